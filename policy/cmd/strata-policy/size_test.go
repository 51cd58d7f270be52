package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// --max-policy-size bounds the policy a verb reads: a larger file is
// refused as invalid (exit 3) with a message that names the bound; a
// bound that is no size is a usage error (exit 2).
func TestMaxPolicySize(t *testing.T) {
	const example = "../../../etc/strata/policy.yaml"
	for name, tc := range map[string]struct {
		args     []string
		env      string
		wantCode int
		want     string
	}{
		"within the default": {args: []string{"check", example}, wantCode: 0},
		"above the flag": {args: []string{"--max-policy-size", "1KiB", "check", example}, wantCode: exitInvalid,
			want: example + ":1:1: the policy file is larger than 1 KiB, the most it may be (hint: "},
		"above the environment's": {args: []string{"check", example}, env: "2K", wantCode: exitInvalid,
			want: "the policy file is larger than 2 KiB"},
		"not a size": {args: []string{"--max-policy-size", "lots", "check", example}, wantCode: cliexit.ExitUsage,
			want: `--max-policy-size: "lots": want a size such as 16MiB`},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("STRATA_POLICY_MAX_SIZE", tc.env)
			}
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"strata-policy"}, tc.args...), &stdout, &stderr)
			if code := cliexit.CodeOf(err); code != tc.wantCode || (tc.want != "" && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("exit %d, %v; want %d and %q", code, err, tc.wantCode, tc.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"16MiB": 16 << 20, "64M": 64 << 20, "1GiB": 1 << 30, "512 KiB": 512 << 10, "1000": 1000,
		"0": 0, "-1M": 0, "1.5M": 0, "M": 0, "": 0, "99999999999G": 0} {
		got, err := parseSize(in)
		if got != want || (want == 0) != (err != nil) {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
