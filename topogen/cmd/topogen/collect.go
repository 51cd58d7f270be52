package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
)

// cmdCollect describes this node's GPUs through NVML, or from nvidia-smi
// outputs saved on disk, and writes the JSON that render reads.
func cmdCollect(ctx context.Context, c *cli.Context) error {
	host := c.String("hostname")
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return failure(err)
		}
		host, _, _ = strings.Cut(h, ".")
	}
	if c.IsSet("smi-topo") && c.String("smi-xml") == "" {
		return cliexit.Usagef("collect: --smi-topo adds to an nvidia-smi -q -x file: give that file too, as --smi-xml FILE or as the argument" +
			" (without them collect asks NVML, which has the topology itself)")
	}
	var node nvml.Node
	var err error
	if x := c.String("smi-xml"); x != "" {
		node, err = fromSMI(x, c.String("smi-topo"))
		node.Hostname = host
	} else {
		node, err = nvml.Collect(ctx, gonvml.New(), host, time.Now())
	}
	if err != nil {
		return failure(fmt.Errorf("collect: %w", err))
	}
	var buf bytes.Buffer
	if err := nvml.Write(&buf, node); err != nil {
		return failure(err)
	}
	if p := c.String("output"); p != "" {
		return atomicfile.Write(p, buf.Bytes(), 0o644)
	}
	_, err = c.App.Writer.Write(buf.Bytes())
	return err
}

func fromSMI(xmlPath, topoPath string) (nvml.Node, error) {
	f, err := os.Open(xmlPath)
	if err != nil {
		return nvml.Node{}, err
	}
	defer f.Close()
	node, err := nvml.ParseQueryXML(f)
	if err != nil {
		return node, fmt.Errorf("%s: %w", xmlPath, err)
	}
	if topoPath == "" {
		return node, nil
	}
	t, err := os.Open(topoPath)
	if err != nil {
		return node, err
	}
	defer t.Close()
	topo, err := nvml.ParseTopoMatrix(t)
	if err != nil {
		return node, fmt.Errorf("%s: %w", topoPath, err)
	}
	if err := node.Merge(topo); err != nil {
		return node, fmt.Errorf("%s: %w", topoPath, err)
	}
	return node, nil
}
