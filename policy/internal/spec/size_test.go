package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/test/policygen"
)

// A policy larger than the bound is one diagnostic that says so, before
// anything is parsed; Load reads no more of it than the bound (a link to
// /dev/zero ends at once); within the bound the same file checks.
func TestSizeBound(t *testing.T) {
	var b bytes.Buffer
	if _, err := policygen.Write(&b, policygen.Spec{Cluster: "gpu", Tenants: 2, Projects: 2, Members: 3, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMax(file, int64(b.Len())); err != nil {
		t.Fatalf("a policy of exactly the bound: %v", err)
	}
	for name, tc := range map[string]struct {
		path string
		max  int64
		want string
	}{
		"one byte over": {file, int64(b.Len()) - 1,
			fmt.Sprintf("%s:1:1: the policy file is larger than %d bytes, the most it may be (hint: a policy this large", file, b.Len()-1)},
		"/dev/zero": {"/dev/zero", 1 << 20, "/dev/zero:1:1: the policy file is larger than 1 MiB, the most it may be"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadMax(tc.path, tc.max)
			var diags Diagnostics
			if !errors.As(err, &diags) || len(diags) != 1 || !strings.HasPrefix(diags[0].Error(), tc.want) ||
				!strings.Contains(err.Error(), "strata-policy --max-policy-size") {
				t.Errorf("LoadMax(%s, %d) = %v; want one diagnostic %q", tc.path, tc.max, err, tc.want)
			}
		})
	}
	if _, err := Parse("big.yaml", bytes.Repeat([]byte("#"), int(MaxSize)+1)); err == nil ||
		!strings.Contains(err.Error(), "big.yaml:1:1: the policy file is larger than 16 MiB") {
		t.Errorf("Parse of a file above MaxSize: %v", err)
	}
}

// BenchmarkParse checks generated policies of growing size: time and,
// with -benchmem, what a check allocates per byte of policy.
func BenchmarkParse(b *testing.B) {
	for _, tenants := range []int{10, 100} {
		var buf bytes.Buffer
		if _, err := policygen.Write(&buf, policygen.Spec{Cluster: "gpu", Tenants: tenants, Projects: 10, Members: 20, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("tenants=%d/bytes=%d", tenants, buf.Len()), func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("policy.yaml", buf.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
