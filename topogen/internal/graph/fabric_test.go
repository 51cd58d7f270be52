package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// fab describes a small fabric in a few lines of Go; classic writes it the
// way ibnetdiscover does (switch blocks first, then CA blocks, every cable
// listed from both ends) so that every test goes through ib.Parse exactly
// as a real dump does.
//
// GUIDs are handed out in declaration order and are easy to read in
// expected findings: the n-th switch is 50000000000000nn, the n-th HCA is
// c0000000000000nn, and its port GUID is d0000000000000nn (distinct from
// the node GUID, so GUID maps and exclusions can be keyed by either).
type fab struct {
	nodes  []*fnode
	byKey  map[string]*fnode
	nSw    int
	nCA    int
	cables []cable
}

type fnode struct {
	key, desc, guid string
	sw              bool
	ports           []string // link lines, port by port (index = port-1)
}

type cable struct{ a, b string }

func newFab() *fab { return &fab{byKey: map[string]*fnode{}} }

// sw declares a switch whose description names it the way Mellanox/NVIDIA
// firmware does: "MF0;<name>:MQM9700/U1".
func (f *fab) sw(names ...string) *fab {
	for _, n := range names {
		f.swDesc(n, "MF0;"+n+":MQM9700/U1")
	}
	return f
}

// swDesc declares a switch with a verbatim description; key is how cables
// refer to it.
func (f *fab) swDesc(key, desc string) *fab {
	f.nSw++
	f.add(&fnode{key: key, desc: desc, guid: fmt.Sprintf("50000000000000%02d", f.nSw), sw: true})
	return f
}

// hca declares an HCA with description desc ("gpu1 mlx5_0") cabled to the
// switch with key leaf ("" leaves it uncabled). Its key is desc.
func (f *fab) hca(desc, leaf string) *fab {
	f.nCA++
	f.add(&fnode{key: desc, desc: desc, guid: fmt.Sprintf("c0000000000000%02d", f.nCA)})
	if leaf != "" {
		f.cable(desc, leaf)
	}
	return f
}

// hosts declares one HCA "<host> mlx5_0" per host, each on leaf.
func (f *fab) hosts(leaf string, hosts ...string) *fab {
	for _, h := range hosts {
		f.hca(h+" mlx5_0", leaf)
	}
	return f
}

// cable links a to each of bs.
func (f *fab) cable(a string, bs ...string) *fab {
	for _, b := range bs {
		f.cables = append(f.cables, cable{a, b})
	}
	return f
}

func (f *fab) add(n *fnode) {
	if f.byKey[n.key] != nil {
		panic("fab: key declared twice: " + n.key)
	}
	f.nodes = append(f.nodes, n)
	f.byKey[n.key] = n
}

// portGUID returns the port GUID of the HCA key.
func (f *fab) portGUID(key string) string { return "d" + f.node(key).guid[1:] }

func (f *fab) node(key string) *fnode {
	n := f.byKey[key]
	if n == nil {
		panic("fab: no node " + key)
	}
	return n
}

// id is how a link line names the node: "S-<guid>" or "H-<guid>"; an
// HCA's local side also carries its port GUID.
func (n *fnode) id() string {
	if n.sw {
		return `"S-` + n.guid + `"`
	}
	return `"H-` + n.guid + `"`
}

func (f *fab) portSuffix(n *fnode) string {
	if n.sw {
		return ""
	}
	return "(" + f.portGUID(n.key) + ")"
}

// classic writes the fabric as ibnetdiscover's classic output.
func (f *fab) classic() string {
	for _, n := range f.nodes {
		n.ports = nil
	}
	for _, c := range f.cables {
		a, b := f.node(c.a), f.node(c.b)
		pa := len(a.ports) + 1
		a.ports = append(a.ports, "")
		pb := len(b.ports) + 1
		b.ports = append(b.ports, "")
		a.ports[pa-1] = f.linkLine(a, pa, b, pb)
		b.ports[pb-1] = f.linkLine(b, pb, a, pa)
	}
	var sb strings.Builder
	sb.WriteString("#\n# Topology file: written by topogen's graph tests\n#\n\n")
	for _, sw := range []bool{true, false} {
		for _, n := range f.nodes {
			if n.sw != sw {
				continue
			}
			ports := max(len(n.ports), 1)
			if n.sw {
				fmt.Fprintf(&sb, "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x%s\nswitchguid=0x%s(%s)\n", n.guid, n.guid, n.guid)
				fmt.Fprintf(&sb, "Switch\t%d %s\t\t# %q enhanced port 0 lid %d lmc 0\n", ports, n.id(), n.desc, lid(n))
			} else {
				fmt.Fprintf(&sb, "vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x%s\ncaguid=0x%s\n", n.guid, n.guid)
				fmt.Fprintf(&sb, "Ca\t%d %s\t\t# %q\n", ports, n.id(), n.desc)
			}
			for _, l := range n.ports {
				sb.WriteString(l + "\n")
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// linkLine is one link line of node a's block, in the two shapes
// ibnetdiscover uses for switch blocks and CA blocks.
func (f *fab) linkLine(a *fnode, pa int, b *fnode, pb int) string {
	if a.sw {
		return fmt.Sprintf("[%d]\t%s[%d]%s \t\t# %q lid %d 4xNDR", pa, b.id(), pb, f.portSuffix(b), b.desc, lid(b))
	}
	return fmt.Sprintf("[%d](%s) \t%s[%d]\t\t# lid %d lmc 0 %q lid %d 4xNDR", pa, f.portGUID(a.key), b.id(), pb, lid(a), b.desc, lid(b))
}

func lid(n *fnode) int {
	var x int
	fmt.Sscanf(n.guid[len(n.guid)-2:], "%d", &x)
	if n.sw {
		return x
	}
	return 100 + x
}

// parse runs ib.Parse on the text and fails on any diagnostic: a test
// fabric that the parser reads differently from what the test says would
// make the test mean nothing.
func parse(t testing.TB, text string) *ib.Fabric {
	t.Helper()
	f, err := ib.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("ib.Parse: %v", err)
	}
	for _, d := range f.Diagnostics {
		t.Errorf("ib.Parse diagnostic at line %d: %s: %q", d.Line, d.Msg, d.Text)
	}
	return f
}
