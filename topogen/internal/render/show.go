package render

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// ParseShowTopology reads `scontrol show topology` and returns its
// placement, to compare with the file that was written. For a tree, each
// node is placed at its Level=0 switch and each switch under the switch
// that lists it; for blocks, each node at its BlockName (aggregated blocks
// are Slurm's own and skipped).
func ParseShowTopology(out []byte) (Placement, error) {
	p := Placement{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		kv := map[string]string{}
		for _, f := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		nodes := func() ([]string, error) {
			hs, err := hostlist.Expand(kv["Nodes"])
			if err != nil {
				return nil, fmt.Errorf("scontrol show topology line %d: %w", n, err)
			}
			return hs, nil
		}
		switch {
		case kv["SwitchName"] != "":
			name := kv["SwitchName"]
			if kv["Level"] == "0" {
				hs, err := nodes()
				if err != nil {
					return nil, err
				}
				for _, h := range hs {
					p["node "+h] = name
				}
			}
			if kv["Switches"] != "" {
				cs, err := hostlist.Expand(kv["Switches"])
				if err != nil {
					return nil, fmt.Errorf("scontrol show topology line %d: %w", n, err)
				}
				for _, c := range cs {
					p["switch "+c] = name
				}
			}
		case kv["BlockName"] != "":
			hs, err := nodes()
			if err != nil {
				return nil, err
			}
			for _, h := range hs {
				p["node "+h] = kv["BlockName"]
			}
		}
	}
	return p, sc.Err()
}

// Diff lists how two placements differ, sorted, at most max lines.
func (p Placement) Diff(q Placement, max int) []string {
	var out []string
	keys := map[string]bool{}
	for k := range p {
		keys[k] = true
	}
	for k := range q {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if p[k] != q[k] {
			if max > 0 && len(out) == max { // "..." only when a difference is really left out
				out = append(out, "...")
				break
			}
			out = append(out, fmt.Sprintf("%s: %q vs %q", k, p[k], q[k]))
		}
	}
	return out
}
