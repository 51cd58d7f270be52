package core

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

func TestSlurmPath(t *testing.T) {
	j := &slurmrest.Job{ID: 42, User: "mem", Name: "train", WorkDir: "/home/mem/run"}
	for in, want := range map[string]string{
		"":                  "",
		"slurm-%j.out":      "/home/mem/run/slurm-42.out",
		"/out/%u/%x-%A.log": "/out/mem/train-42.log",
		"100%%-%j":          "/home/mem/run/100%-42",
		"../%j.out":         "/home/mem/42.out",
		"a-%a.out":          "",
		"trailing%":         "",
	} {
		if got := slurmPath(j, in); got != want {
			t.Errorf("slurmPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSlurmPath: any pattern gives "" or a clean absolute path, with no
// "%" left but from "%%".
func FuzzSlurmPath(f *testing.F) {
	for _, s := range []string{"slurm-%j.out", "/out/%u/%x-%A.log", "100%%", "%", "../../%j", "%a"} {
		f.Add(s)
	}
	j := &slurmrest.Job{ID: 42, User: "mem", Name: "train", WorkDir: "/home/mem/run"}
	f.Fuzz(func(t *testing.T, p string) {
		got := slurmPath(j, p)
		if got == "" {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Errorf("slurmPath(%q) = %q, not a clean absolute path", p, got)
		}
		if !strings.Contains(p, "%%") && strings.Contains(got, "%") {
			t.Errorf("slurmPath(%q) = %q leaves a pattern", p, got)
		}
	})
}
