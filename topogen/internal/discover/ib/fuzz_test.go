package ib_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// smallFixtures seed FuzzParse next to the table cases. example.out and
// X5.topofile are too big to mutate usefully; their first lines are in the
// table already.
var smallFixtures = []string{
	"example-bad.out",
	"ibtopotool-1.topo", "ibtopotool-2.topo", "ibtopotool-3.topo", "ibtopotool-4.topo",
	"osc-test.out", "osc-test2.out", "osc-test3.out",
	"ibdiag-ca-label.ibnetdiscover",
}

// FuzzParse checks that no input panics Parse and that every Fabric it
// returns keeps the promises other packages rely on.
func FuzzParse(f *testing.F) {
	for _, tc := range parseTests {
		f.Add([]byte(tc.in))
	}
	for _, name := range smallFixtures {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fab, err := ib.Parse(bytes.NewReader(in))
		if err != nil {
			if fab != nil {
				t.Fatalf("Parse returned a fabric and the error %v", err)
			}
			if !errors.Is(err, ib.ErrNoNodes) {
				t.Fatalf("Parse error %v does not wrap ErrNoNodes", err)
			}
			return
		}
		checkFabric(t, fab, lineCount(in))
	})
}

// lineCount is the number of lines in, the last one counted even without a
// newline.
func lineCount(in []byte) int {
	n := bytes.Count(in, []byte("\n"))
	if len(in) > 0 && in[len(in)-1] != '\n' {
		n++
	}
	return n
}

func checkFabric(t *testing.T, f *ib.Fabric, lines int) {
	t.Helper()
	if f.Format < ib.Classic || f.Format > ib.IBDiag {
		t.Errorf("Format = %v", f.Format)
	}
	if len(f.Nodes) == 0 {
		t.Errorf("a fabric without nodes and no error")
	}
	for guid, n := range f.Nodes {
		if n.GUID != guid || !isGUID(guid) {
			t.Errorf("node keyed %q has GUID %q", guid, n.GUID)
		}
		if n.Type < ib.Switch || n.Type > ib.Router {
			t.Errorf("node %s has type %v", guid, n.Type)
		}
		if n.Line < 1 || n.Line > lines {
			t.Errorf("node %s declared at line %d of %d", guid, n.Line, lines)
		}
		if n.Aggregation && n.Type != ib.CA {
			t.Errorf("node %s: an aggregation node that is a %v", guid, n.Type)
		}
		for port, pg := range n.PortGUIDs {
			if port < 1 || !isGUID(pg) || n.Type == ib.Switch {
				t.Errorf("node %s (%v): port GUID %d -> %q", guid, n.Type, port, pg)
			}
		}
	}
	type end struct {
		guid string
		port int
	}
	cabled := map[end]bool{}
	for i, l := range f.Links {
		if f.Nodes[l.A] == nil || f.Nodes[l.B] == nil {
			t.Errorf("link %+v: an end is not a node", l)
		}
		if l.A > l.B || (l.A == l.B && l.APort > l.BPort) {
			t.Errorf("link %+v: ends not in order", l)
		}
		if l.APort < 1 || l.BPort < 1 {
			t.Errorf("link %+v: port below 1", l)
		}
		if l.Line < 1 || l.Line > lines {
			t.Errorf("link %+v: line outside 1..%d", l, lines)
		}
		if i > 0 && !linkLess(f.Links[i-1], l) {
			t.Errorf("links %+v and %+v: not sorted or duplicated", f.Links[i-1], l)
		}
		ends := []end{{l.A, l.APort}, {l.B, l.BPort}}
		if ends[0] == ends[1] {
			ends = ends[:1] // a port cabled to itself
		}
		for _, e := range ends {
			if cabled[e] {
				t.Errorf("link %+v: port %d of %s has two cables", l, e.port, e.guid)
			}
			cabled[e] = true
		}
	}
	for i, d := range f.Diagnostics {
		if d.Line < 1 || d.Line > lines {
			t.Errorf("diagnostic %+v: line outside 1..%d", d, lines)
		}
		if i > 0 && d.Line < f.Diagnostics[i-1].Line {
			t.Errorf("diagnostics out of line order: %d after %d", d.Line, f.Diagnostics[i-1].Line)
		}
		if len(d.Text) > 200 || !utf8.ValidString(d.Text) || d.Msg == "" {
			t.Errorf("diagnostic %+v: text over 200 bytes, invalid UTF-8 or no message", d)
		}
	}
}

func linkLess(a, b ib.Link) bool {
	if a.A != b.A {
		return a.A < b.A
	}
	if a.APort != b.APort {
		return a.APort < b.APort
	}
	if a.B != b.B {
		return a.B < b.B
	}
	return a.BPort < b.BPort
}

func isGUID(s string) bool {
	if len(s) != 16 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// FuzzParseGUIDMap checks that no input panics ParseGUIDMap, that what it
// accepts is clean, and that what it rejects names a line.
func FuzzParseGUIDMap(f *testing.F) {
	for _, tc := range guidMapTests {
		f.Add([]byte(tc.in))
	}
	data, err := os.ReadFile(filepath.Join("testdata", "X5.map"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ib.ParseGUIDMap(bytes.NewReader(in))
		if err != nil {
			if m != nil || !strings.Contains(err.Error(), "line ") {
				t.Fatalf("ParseGUIDMap() = %v, %v: want no map and an error naming a line", m, err)
			}
			return
		}
		for guid, name := range m {
			if !isGUID(guid) {
				t.Errorf("key %q is not a 16-digit lowercase GUID", guid)
			}
			if name == "" || name != strings.TrimSpace(name) || !utf8.ValidString(name) {
				t.Errorf("GUID %s: bad name %q", guid, name)
			}
		}
	})
}

// labelRule is what FuzzIBDiagLabels holds a label to, written apart from
// the parser: letters and digits in runs joined by single slashes.
var labelRule = regexp.MustCompile(`^[A-Za-z0-9]+(/[A-Za-z0-9]+)*$`)

// FuzzIBDiagLabels puts an arbitrary label where ibdiagnet2 writes one on
// an HCA port ("[1](B134D0F0/0/0/1)(b01)", "[1](1)(b01)"), with the switch
// side of the same cable listed too. A label of the documented form gives
// the one cable, counted once, with the HCA's port GUID and no diagnostic;
// anything else gives one diagnostic for that line and still the one cable
// (from the switch side). Seeded with the forms ibdiagnet2 writes.
func FuzzIBDiagLabels(f *testing.F) {
	for _, l := range []string{"B134D0F0/0/0/1", "1", "1/1/1", "0000:b1:00.0", "1//1", "", "(", ")", "b01", "1/", "/1"} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, label string) {
		if strings.ContainsAny(label, "\n\r") {
			return // one line stays one line
		}
		in := "Switch  65 \"S-0000000000000a00\"      # \"leaf-1\" enhanced port 0 lid 1 lmc 0\n" +
			"[1](1/1/1) \"H-0000000000000b01\"[1](b01)      # \"node1 mlx5_0\" lid 2 4xNDR\n\n" +
			"Ca  1 \"H-0000000000000b01\"      # \"node1 mlx5_0\"\n" +
			"[1](" + label + ")(b01) \"S-0000000000000a00\"[1] # lid 2 lmc 0 \"leaf-1\" lid 1 4xNDR\n"
		fab, err := ib.Parse(strings.NewReader(in))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if len(fab.Links) != 1 {
			t.Fatalf("%d links, want the one cable once: %+v", len(fab.Links), fab.Links)
		}
		ca := fab.Nodes["0000000000000b01"]
		if ca == nil || ca.PortGUIDs[1] != "0000000000000b01" {
			t.Fatalf("HCA port GUID lost: %+v", ca)
		}
		switch {
		case strings.ContainsAny(label, "()"):
			// Several groups: which of them is the label is the parser's
			// call; the cable must still be there once (checked above).
		case labelRule.MatchString(label):
			if len(fab.Diagnostics) != 0 || fab.Format != ib.IBDiag {
				t.Fatalf("label %q: diagnostics %v, format %v; want none and ibdiag", label, fab.Diagnostics, fab.Format)
			}
		case len(fab.Diagnostics) != 1 || fab.Diagnostics[0].Line != 5:
			t.Fatalf("label %q: diagnostics %v, want one for line 5", label, fab.Diagnostics)
		}
	})
}
