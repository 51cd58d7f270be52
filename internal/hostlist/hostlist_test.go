package hostlist

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var expandTests = map[string]struct {
	list    string
	want    []string
	wantErr string // substring of the error; "" for success
}{
	"plain name": {
		list: "login1",
		want: []string{"login1"},
	},
	"plain names": {
		list: "login1,login2,head",
		want: []string{"login1", "login2", "head"},
	},
	"range": {
		list: "gpu[1-4]",
		want: []string{"gpu1", "gpu2", "gpu3", "gpu4"},
	},
	"zero padding kept": {
		list: "n[001-004,010]",
		want: []string{"n001", "n002", "n003", "n004", "n010"},
	},
	"range growing a digit": {
		list: "n[8-11]",
		want: []string{"n8", "n9", "n10", "n11"},
	},
	"single number in brackets": {
		list: "n[7]",
		want: []string{"n7"},
	},
	"suffix after the brackets": {
		list: "gpu[1-2]-ib",
		want: []string{"gpu1-ib", "gpu2-ib"},
	},
	"two groups, cartesian product left to right": {
		list: "rack[1-2]-n[01-02]",
		want: []string{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"},
	},
	"comma list mixing names and groups": {
		list: "login1,gpu[1-2],rack[1-2]-n[1,3],n[9-10]",
		want: []string{
			"login1", "gpu1", "gpu2",
			"rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3",
			"n9", "n10",
		},
	},
	"whitespace around items": {
		list: " gpu[1-2] ,\tlogin1 ",
		want: []string{"gpu1", "gpu2", "login1"},
	},
	"duplicates kept": {
		list: "n1,n[1-2]",
		want: []string{"n1", "n1", "n2"},
	},
	"empty list": {
		list: "",
		want: nil,
	},
	"only separators and blanks": {
		list: " , ,",
		want: nil,
	},
	"unmatched open bracket": {
		list:    "n[1-3",
		wantErr: "unmatched '['",
	},
	"unmatched open bracket in second item": {
		list:    "a1,n[1-3",
		wantErr: `hostlist "a1,n[1-3": at offset 3: unmatched '['`,
	},
	"unmatched close bracket": {
		list:    "n1-3]",
		wantErr: "at offset 4: unmatched ']'",
	},
	"extra close bracket": {
		list:    "n[1-3]]",
		wantErr: "unmatched ']'",
	},
	"non-numeric range": {
		list:    "ib[A-B]",
		wantErr: `at offset 3: range "A-B" is not numeric`,
	},
	"half-open range": {
		list:    "n[1-]",
		wantErr: `range "1-" is not numeric`,
	},
	"nested brackets": {
		list:    "n[[1]]",
		wantErr: "is not numeric",
	},
	"backwards range": {
		list:    "n[5-3]",
		wantErr: `at offset 2: range "5-3" runs backwards`,
	},
	"empty brackets": {
		list:    "n[]",
		wantErr: "at offset 2: empty brackets",
	},
	"number out of bounds": {
		list:    "n[99999999999999999999]",
		wantErr: "is out of bounds",
	},
	"range larger than MaxHosts": {
		list:    "n[1-2000000]",
		wantErr: fmt.Sprintf("expands to more than %d hosts", MaxHosts),
	},
	"range one past MaxHosts": {
		list:    fmt.Sprintf("n[1-%d]", MaxHosts+1),
		wantErr: fmt.Sprintf("expands to more than %d hosts", MaxHosts),
	},
	"cartesian product larger than MaxHosts": {
		list:    "a[1-1024]b[1-1025]", // 1024*1025 = 1049600 > 1<<20
		wantErr: fmt.Sprintf("expands to more than %d hosts", MaxHosts),
	},
}

func TestExpand(t *testing.T) {
	for name, tc := range expandTests {
		t.Run(name, func(t *testing.T) {
			got, err := Expand(tc.list)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Expand(%q) = %q, want error containing %q", tc.list, got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Expand(%q) error = %q, want it to contain %q", tc.list, err, tc.wantErr)
				}
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("Expand(%q) error is %T, want *SyntaxError", tc.list, err)
				}
				if got != nil {
					t.Errorf("Expand(%q) returned %d hosts with its error", tc.list, len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("Expand(%q): %v", tc.list, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Expand(%q) mismatch (-want +got):\n%s", tc.list, diff)
			}
		})
	}
}

// TestExpandBudget checks the host budget at its edge on expandOne, which
// Expand calls with what is left of MaxHosts: an item may use the whole
// budget and not one host more, whatever its form.
func TestExpandBudget(t *testing.T) {
	tests := map[string]struct {
		item    string
		budget  int
		want    []string
		wantErr bool
	}{
		"plain name, room for one":    {item: "x1", budget: 1, want: []string{"x1"}},
		"plain name, no room":         {item: "x1", budget: 0, wantErr: true},
		"range filling the budget":    {item: "n[1-3]", budget: 3, want: []string{"n1", "n2", "n3"}},
		"range one past the budget":   {item: "n[1-4]", budget: 3, wantErr: true},
		"list filling the budget":     {item: "n[1-2,5]", budget: 3, want: []string{"n1", "n2", "n5"}},
		"list one past the budget":    {item: "n[1-2,5-6]", budget: 3, wantErr: true},
		"product filling the budget":  {item: "a[1-2]b[1-2]", budget: 4, want: []string{"a1b1", "a1b2", "a2b1", "a2b2"}},
		"product one past the budget": {item: "a[1-2]b[1-2]", budget: 3, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := expandOne(tc.item, 0, tc.item, tc.budget)
			if tc.wantErr {
				want := fmt.Sprintf("expands to more than %d hosts", MaxHosts)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("expandOne(%q, budget %d) = %q, %v; want error containing %q", tc.item, tc.budget, got, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("expandOne(%q, budget %d): %v", tc.item, tc.budget, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("expandOne(%q, budget %d) mismatch (-want +got):\n%s", tc.item, tc.budget, diff)
			}
		})
	}
}

// TestExpandMaxHosts expands MaxHosts names and then one plain name more,
// which must be refused like any other host past the bound.
func TestExpandMaxHosts(t *testing.T) {
	list := fmt.Sprintf("n[1-%d],x1", MaxHosts)
	got, err := Expand(list)
	want := fmt.Sprintf("at offset %d: expands to more than %d hosts", len(list)-2, MaxHosts)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Expand(%q) = %d hosts, %v; want error containing %q", list, len(got), err, want)
	}
}

// TestExpandHugeRangeDoesNotAllocate checks that a range far beyond MaxHosts
// is refused before any host name is made: a few allocations for the error
// are fine, a million are not.
func TestExpandHugeRangeDoesNotAllocate(t *testing.T) {
	var err error
	allocs := testing.AllocsPerRun(10, func() {
		_, err = Expand("n[0-99999999999]")
	})
	if err == nil {
		t.Fatal("Expand of 10^11 hosts succeeded")
	}
	if allocs > 20 {
		t.Errorf("Expand of a huge range made %.0f allocations before failing, want at most 20", allocs)
	}
}

var compressTests = map[string]struct {
	hosts []string
	want  string
}{
	"nothing": {
		hosts: nil,
		want:  "",
	},
	"only empty names": {
		hosts: []string{"", ""},
		want:  "",
	},
	"single host has no brackets": {
		hosts: []string{"gpu5"},
		want:  "gpu5",
	},
	"single padded host has no brackets": {
		hosts: []string{"n007"},
		want:  "n007",
	},
	"runs and a single": {
		hosts: []string{"gpu1", "gpu2", "gpu3", "gpu7"},
		want:  "gpu[1-3,7]",
	},
	"unsorted with duplicates": {
		hosts: []string{"gpu3", "gpu1", "", "gpu2", "gpu1", "gpu3"},
		want:  "gpu[1-3]",
	},
	"zero padded": {
		hosts: []string{"n003", "n001", "n004", "n002"},
		want:  "n[001-004]",
	},
	"names without numbers": {
		hosts: []string{"login", "head", "login"},
		want:  "head,login",
	},
	"run across a digit boundary": {
		hosts: []string{"n10", "n9"},
		want:  "n[9-10]",
	},
	"padded beside unpadded of the same width": {
		hosts: []string{"n10", "n01"},
		want:  "n[01,10]",
	},
	"padded beside unpadded of other widths": {
		hosts: []string{"n10", "n5", "n01", "n100"},
		want:  "n[5,100],n[01,10]",
	},
	"same number padded and not": {
		hosts: []string{"n01", "n1"},
		want:  "n1,n01",
	},
	"prefixes sorted": {
		hosts: []string{"login1", "gpu2", "cpu-a", "gpu1"},
		want:  "cpu-a,gpu[1-2],login1",
	},
	"name without number before the numbered ones": {
		hosts: []string{"gpu2", "gpu", "gpu1"},
		want:  "gpu,gpu[1-2]",
	},
	"dashed prefixes": {
		hosts: []string{"rack2-n01", "rack1-n02", "rack1-n01"},
		want:  "rack1-n[01-02],rack2-n01",
	},
	"all digits": {
		hosts: []string{"2", "0", "1"},
		want:  "[0-2]",
	},
	"more than 18 digits stays a plain name": {
		hosts: []string{"n1234567890123456789", "n1234567890123456788"},
		want:  "n1234567890123456788,n1234567890123456789",
	},
}

func TestCompress(t *testing.T) {
	for name, tc := range compressTests {
		t.Run(name, func(t *testing.T) {
			got := Compress(tc.hosts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Compress(%q) mismatch (-want +got):\n%s", tc.hosts, diff)
			}
			checkRoundTrip(t, tc.hosts)
		})
	}
}

// TestCompressExpandOrder pins the order Expand(Compress(h)) yields: names
// by prefix, then unpadded before padded, then by number, the way Slurm sorts
// a host list (not plain string order, which would put n10 before n9).
func TestCompressExpandOrder(t *testing.T) {
	hosts := []string{"n10", "login", "n01", "n9", "gpu2", "gpu1", "n10"}
	got, err := Expand(Compress(hosts))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpu1", "gpu2", "login", "n9", "n01", "n10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Expand(Compress(%q)) mismatch (-want +got):\n%s", hosts, diff)
	}
}

// uniqueSorted returns the distinct non-empty names of hosts in string order.
func uniqueSorted(hosts []string) []string {
	out := []string{}
	for _, h := range hosts {
		if h != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkRoundTrip asserts Compress's contract for hosts: Expand(Compress(h))
// holds every distinct name once and nothing else, and the compressed form is
// canonical: it does not depend on the input order and compressing its own
// expansion gives it back. (The order of the expansion is Slurm's host list
// order, pinned by TestCompressExpandOrder; here both sides are put in string
// order to compare them as sets.)
func checkRoundTrip(t *testing.T, hosts []string) {
	t.Helper()
	c := Compress(hosts)
	got, err := Expand(c)
	if err != nil {
		t.Fatalf("Expand(Compress(%q)) = Expand(%q): %v", hosts, c, err)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if sorted == nil {
		sorted = []string{}
	}
	if diff := cmp.Diff(uniqueSorted(hosts), sorted); diff != "" {
		t.Fatalf("Expand(Compress(%q)) = Expand(%q) = %q: not the unique hosts (-want +got):\n%s", hosts, c, got, diff)
	}
	if again := Compress(got); again != c {
		t.Fatalf("Compress(Expand(%q)) = %q, want it unchanged", c, again)
	}
	rev := slices.Clone(hosts)
	slices.Reverse(rev)
	if r := Compress(rev); r != c {
		t.Fatalf("Compress depends on input order: %q gives %q, reversed gives %q", hosts, c, r)
	}
}

// validHostName reports whether every byte of s may appear in a host name.
// Compress lists a name it cannot bracket as it is, so a name holding '[',
// ']' or ',' (or blanks, which Expand trims) cannot come back through Expand;
// such names are not host names, and the round-trip fuzz test keeps to
// letters, digits, '-', '.' and '_'.
func validHostName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// FuzzCompressRoundTrip feeds Compress comma-separated lists of valid host
// names (see validHostName) and checks Expand(Compress(h)) is h's set.
func FuzzCompressRoundTrip(f *testing.F) {
	for _, tc := range compressTests {
		f.Add(strings.Join(tc.hosts, ","))
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts := strings.Split(s, ",")
		if len(hosts) > 4096 {
			return
		}
		for _, h := range hosts {
			if !validHostName(h) {
				return
			}
		}
		checkRoundTrip(t, hosts)
	})
}

// wideRange matches what may be a bracket range "lo-hi".
var wideRange = regexp.MustCompile(`([0-9]+)-([0-9]+)`)

// hasWideRange reports whether list holds a range of more than 4096 numbers.
// Expanding one builds up to MaxHosts names, which takes the fuzzer a second
// or more per input and stalls it; the fuzz tests leave such lists to the
// MaxHosts tests.
func hasWideRange(list string) bool {
	for _, m := range wideRange.FindAllStringSubmatch(list, -1) {
		lo, errLo := strconv.ParseUint(m[1], 10, 64)
		hi, errHi := strconv.ParseUint(m[2], 10, 64)
		if errLo == nil && errHi == nil && hi > lo && hi-lo > 4096 {
			return true
		}
	}
	return false
}

// FuzzExpand checks that Expand never panics, fails only with a
// *SyntaxError, never returns more than MaxHosts names, and that what it
// returns compresses and expands back to the same set.
func FuzzExpand(f *testing.F) {
	for _, tc := range expandTests {
		f.Add(tc.list)
	}
	f.Fuzz(func(t *testing.T, list string) {
		if hasWideRange(list) {
			return // slow, not interesting; MaxHosts has its own tests above
		}
		hosts, err := Expand(list)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Expand(%q) error is %T (%v), want *SyntaxError", list, err, err)
			}
			if se.Offset < 0 || se.Offset > len(list) {
				t.Fatalf("Expand(%q): offset %d outside the list", list, se.Offset)
			}
			if hosts != nil {
				t.Fatalf("Expand(%q) returned hosts with its error", list)
			}
			return
		}
		if len(hosts) > MaxHosts {
			t.Fatalf("Expand(%q) returned %d hosts, more than MaxHosts", list, len(hosts))
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "[],") || strings.TrimSpace(h) != h {
				t.Fatalf("Expand(%q) returned host %q", list, h)
			}
		}
		checkRoundTrip(t, hosts)
	})
}
