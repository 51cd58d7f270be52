package ib_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// guidMapTests are the GUID map cases; FuzzParseGUIDMap starts from them.
var guidMapTests = map[string]struct {
	in      string
	want    map[string]string
	wantErr string // substring of the error; "" for success
}{
	"X5 style": {
		in:   "# cluster X5\nH-003048c74e4a0000 x5570comp1\nH-0002c90300080e84 r510gluster1\n",
		want: map[string]string{"003048c74e4a0000": "x5570comp1", "0002c90300080e84": "r510gluster1"},
	},
	"node-name-map style, quoted names with spaces": {
		in:   "0x0008f104003f0a9f \"ISR9288/ISR9096 Voltaire sLB-24\"\n0x0008f10400411a08 \"SW-6IB4 Voltaire\" # rack 3\n",
		want: map[string]string{"0008f104003f0a9f": "ISR9288/ISR9096 Voltaire sLB-24", "0008f10400411a08": "SW-6IB4 Voltaire"},
	},
	"short and uppercase GUIDs, S- prefix, bare": {
		in:   "S-8F10400410015 sw1\n2c5eab0300b87b40\tleaf-04-04\n",
		want: map[string]string{"0008f10400410015": "sw1", "2c5eab0300b87b40": "leaf-04-04"},
	},
	"comments, blank lines, CRLF, BOM": {
		in:   "\uFEFF# hosts\r\n\r\n   H-1 n1   # rack 3\r\n\t# end\r\n",
		want: map[string]string{"0000000000000001": "n1"},
	},
	"same line twice": {
		in:   "H-1 n1\nH-1 n1\n",
		want: map[string]string{"0000000000000001": "n1"},
	},
	"empty": {
		in:   "",
		want: map[string]string{},
	},
	"no name": {
		in:      "H-1\n",
		wantErr: "GUID map line 1: no name after the GUID",
	},
	"bad GUID": {
		in:      "# ok\nH-xyz n1\n",
		wantErr: `GUID map line 2: bad GUID "H-xyz"`,
	},
	"GUID too long": {
		in:      "0x00000000000000001 n1\n",
		wantErr: "GUID map line 1: bad GUID",
	},
	"two words unquoted": {
		in:      "H-1 n1\nH-2 node two\n",
		wantErr: "GUID map line 2: unexpected text after the name",
	},
	"unterminated quote": {
		in:      "0x1 \"abc\n",
		wantErr: "GUID map line 1: unterminated quoted name",
	},
	"empty quoted name": {
		in:      "0x1 \"\"\n",
		wantErr: "GUID map line 1: empty name",
	},
	"control character": {
		in:      "0x1 \"a\x01b\"\n",
		wantErr: "GUID map line 1: name has control characters",
	},
	"GUID named twice": {
		in:      "H-1 n1\n\nS-0x1 n2\n",
		wantErr: `GUID map line 3: GUID 0000000000000001 is already named "n1" at line 1`,
	},
}

func TestParseGUIDMap(t *testing.T) {
	for name, tc := range guidMapTests {
		t.Run(name, func(t *testing.T) {
			got, err := ib.ParseGUIDMap(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseGUIDMap() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseGUIDMap() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseGUIDMap() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseGUIDMapReadError(t *testing.T) {
	cause := errors.New("permission denied")
	if _, err := ib.ParseGUIDMap(errReader{cause}); !errors.Is(err, cause) {
		t.Fatalf("ParseGUIDMap() error = %v, want it to wrap %v", err, cause)
	}
}

// TestGUIDMapNamesX5 is how PSMN's X5 fabric gets host names: its CAs all
// say "MT25408 ConnectX Mellanox Technologies", so only X5.map names them.
func TestGUIDMapNamesX5(t *testing.T) {
	r, err := os.Open(filepath.Join("testdata", "X5.map"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names, err := ib.ParseGUIDMap(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 86 { // grep -c '^H-' X5.map
		t.Errorf("X5.map has %d entries, want 86", len(names))
	}
	if got := names["003048c74e4a0000"]; got != "x5570comp1" { // line 2: H-003048c74e4a0000 x5570comp1
		t.Errorf("003048c74e4a0000 is named %q, want x5570comp1", got)
	}
	f := parseFile(t, "X5.topofile")
	named := 0
	var unnamed []string
	for _, n := range f.ByType(ib.CA) {
		if _, ok := names[n.GUID]; ok {
			named++
		} else {
			unnamed = append(unnamed, n.GUID)
		}
	}
	// comm -23 <(grep -o '^Ca.*"H-[0-9a-f]*"' X5.topofile | grep -o 'H-[0-9a-f]*' | sort) <(awk '/^H-/{print $1}' X5.map | sort)
	want := []string{"003048c749450000", "003048c74ae20000", "78e7d1030024535c"}
	if named != 86 || !cmp.Equal(unnamed, want) {
		t.Errorf("X5.map names %d CAs and leaves %v unnamed, want 86 and %v", named, unnamed, want)
	}
}
