package apply

import (
	"fmt"
	"io"
	"os"
)

// MaxTopologyBytes bounds a topology file topogen reads (the live file, a
// file to validate or to apply): a topology.conf of 100,000 nodes is a few
// MiB, so anything larger is no topology file (a device such as /dev/zero,
// a log written over it), and reading it whole would take the host's
// memory. It is not configurable.
const MaxTopologyBytes = 64 << 20

// ReadTopology reads the topology file at path, refusing one larger than
// MaxTopologyBytes without reading more of it. A missing file is an error
// wrapping os.ErrNotExist.
func ReadTopology(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTopologyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxTopologyBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB, the most topogen reads of a topology file: it is no topology.conf or topology.yaml "+
			"(one of 100,000 nodes is a few MiB); check the path", path, MaxTopologyBytes>>20)
	}
	return data, nil
}
