package yamlconf

import (
	"errors"
	"strings"
	"testing"
)

type conf struct {
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		data    string
		want    conf
		wantErr string
	}{
		"defaults kept":  {data: "name: x\n", want: conf{Name: "x", Count: 7}},
		"empty file":     {data: "# nothing\n", want: conf{Name: "def", Count: 7}},
		"unknown key":    {data: "name: x\ncuont: 3\n", wantErr: "line 2: field cuont not found"},
		"wrong type":     {data: "count: many\n", wantErr: "line 1: cannot unmarshal"},
		"invalid values": {data: "count: -1\n", wantErr: "f.yaml: count: -1 is negative\nf.yaml: name: required"},
	} {
		t.Run(name, func(t *testing.T) {
			c := conf{Name: "def", Count: 7}
			if name == "invalid values" {
				c.Name = ""
			}
			err := Decode("f.yaml", []byte(tc.data), &c, func() []error {
				var errs []error
				if c.Count < 0 {
					errs = append(errs, errors.New("count: -1 is negative"))
				}
				if c.Name == "" {
					errs = append(errs, errors.New("name: required"))
				}
				return errs
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c != tc.want {
				t.Errorf("got %+v, %v; want %+v", c, err, tc.want)
			}
		})
	}
}
