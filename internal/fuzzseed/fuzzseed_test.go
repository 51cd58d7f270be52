package fuzzseed

import "testing"

func TestJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"jobs":[{"id":1,"name":"","nodes":null,"tres":{},"gres":[]},{"id":2},{"id":3}],"n":9223372036854775807}`: `{"jobs":[{"id":1},{"id":2}],"n":9223372036854775807}`,
		`[[1,2,3],[4],[5]]`:               `[[1,2],[4]]`,
		`{"set":false,"number":0}`:        `{"number":0,"set":false}`,
		`not json`:                        `not json`,
		`{"a":{"b":{"c":null}},"d":true}`: `{"d":true}`,
	} {
		if got := string(JSON([]byte(in), 2)); got != want {
			t.Errorf("JSON(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestYAML(t *testing.T) {
	in := "# a comment\napiVersion: strata/v1\n\n  # indented comment\nimage: \"x:1\" # kept\nargs:\n  - \"#not a comment\"\n"
	want := "apiVersion: strata/v1\nimage: \"x:1\" # kept\nargs:\n  - \"#not a comment\"\n"
	if got := string(YAML([]byte(in))); got != want {
		t.Errorf("YAML = %q, want %q", got, want)
	}
}
