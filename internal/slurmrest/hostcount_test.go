package slurmrest

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/fuzzseed"
)

var (
	jsonString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	bracketGroup = regexp.MustCompile(`\[([^\]]*)\]`)
)

// HostsBeyond reports whether a string of the JSON body could name more
// than n hosts as a host list (the product of its bracket groups' sizes):
// the fuzz targets skip such bodies. A list of a million hosts, which a
// mutation of one digit makes, is allowed (hostlist.MaxHosts) and took
// the fuzzers 20 s a run, comparisons included; lists that large are
// hostlist's own tests' matter, the conversions do the same for 4,096
// hosts as for a million.
func HostsBeyond(body []byte, n int) bool {
	for _, s := range jsonString.FindAll(body, -1) {
		count := 1
		for _, g := range bracketGroup.FindAllSubmatch(s, -1) {
			size := 0
			for item := range strings.SplitSeq(string(g[1]), ",") {
				lo, hi, ok := strings.Cut(item, "-")
				a, err1 := strconv.Atoi(strings.TrimSpace(lo))
				b, err2 := strconv.Atoi(strings.TrimSpace(hi))
				switch {
				case ok && err1 == nil && err2 == nil && b >= a:
					size += min(b-a+1, n+1)
				case ok && err2 != nil && len(hi) > 0:
					size += n + 1 // a number too large for an int
				default:
					size++
				}
			}
			count = min(count*max(size, 1), n+1)
		}
		if count > n {
			return true
		}
	}
	return false
}

func TestHostsBeyond(t *testing.T) {
	for body, want := range map[string]bool{
		`{"nodes":"gpu[1-4096]"}`:                  false,
		`{"nodes":"gpu[1-4097]"}`:                  true,
		`{"nodes":"gpu[1-999999999999999999999]"}`: true,
		`{"nodes":"a[1-64]b[1-64]"}`:               false,
		`{"nodes":"a[1-64]b[1-65]"}`:               true,
		`{"nodes":"a[1-3000,5-2000]"}`:             true,
		`{"a":"x[1-3000]","b":"y[1-3000]"}`:        false,
		`{"nodes":"gpu[9-1]","x":[1,2]}`:           false,
		`not json [1-99999]`:                       false,
	} {
		if got := HostsBeyond([]byte(body), 4096); got != want {
			t.Errorf("HostsBeyond(%s) = %v, want %v", body, got, want)
		}
	}
}

// SeedPieces cuts the first record of the list under key in a captured
// answer into pieces of per members each, every piece an answer of one
// record: small seeds that keep the record's fields and values. A whole
// record (5 KB for a job) as a seed left the fuzzer minimizing each input
// it found from it, thousands of runs of 5 KB, and so barely exploring.
func SeedPieces(answer []byte, key string, per int) [][]byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(answer, &doc) != nil {
		return nil
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(doc[key], &list) != nil || len(list) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(list[0]))
	var out [][]byte
	for len(names) > 0 {
		n := min(per, len(names))
		piece := map[string]json.RawMessage{}
		for _, name := range names[:n] {
			piece[name] = list[0][name]
		}
		names = names[n:]
		b, err := json.Marshal(map[string]any{key: []any{piece}})
		if err == nil {
			out = append(out, fuzzseed.JSON(b, 1))
		}
	}
	return out
}
