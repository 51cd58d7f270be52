package diff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLines(t *testing.T) {
	for name, tc := range map[string]struct {
		old, new string
		want     []string
	}{
		"same":           {"a\nb\n", "a\nb\n", nil},
		"reordered":      {"a\nb\n", "b\na\n", nil},
		"from nothing":   {"", "a\n\nb\n", []string{"+ a", "+ b"}},
		"to nothing":     {"a\nb\n", "", []string{"- a", "- b"}},
		"one changed":    {"# x\nSwitchName=s1 Nodes=n1\n", "# x\nSwitchName=s1 Nodes=n[1-2]\n", []string{"- SwitchName=s1 Nodes=n1", "+ SwitchName=s1 Nodes=n[1-2]"}},
		"a repeat added": {"a\n", "a\na\n", []string{"+ a"}},
		"no final line":  {"a\nb", "a\nb\n", nil},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Lines([]byte(tc.old), []byte(tc.new))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
