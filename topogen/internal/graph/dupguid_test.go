package graph_test

import (
	"strings"
	"testing"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// A GUID declared twice in the dump (here a host's HCA block pasted
// again) is a warning finding of its own kind, naming the GUID once,
// which apply's change budget refuses; a clean dump has none.
func TestDuplicateGUIDFinding(t *testing.T) {
	lines := strings.Split(plainTree, "\n")
	var again []string
	for i, l := range lines {
		if strings.HasPrefix(l, "Ca") {
			again = append(again, l, lines[i+1], "")
			break
		}
	}
	if again == nil {
		t.Fatal("plainTree has no Ca block to repeat")
	}
	for name, tc := range map[string]struct {
		dump string
		want int
	}{
		"clean":              {dump: plainTree, want: 0},
		"a host block twice": {dump: plainTree + "\n" + strings.Join(again, "\n") + strings.Join(again, "\n"), want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			fab, err := ib.Parse(strings.NewReader(tc.dump))
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(fab, graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var dups []graph.Finding
			for _, f := range g.Findings {
				if f.Kind == graph.KindDuplicateGUID {
					dups = append(dups, f)
				}
			}
			if len(dups) != tc.want {
				t.Fatalf("duplicate-guid findings = %v, want %d", dups, tc.want)
			}
			for _, f := range dups {
				if f.Severity != graph.Warning || len(f.Subject) != 16 || !strings.Contains(f.Message, "declared more than once") {
					t.Errorf("finding %v: want a warning naming the 16-digit GUID", f)
				}
			}
		})
	}
}
