package main

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/policy/internal/generation"
	"github.com/strata-hpc/strata/policy/internal/render"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// TestMain runs the command itself when a test starts this binary as
// strata-policy (STRATA_POLICY_TEST_MAIN=1), so tests can kill a real
// process.
func TestMain(m *testing.M) {
	if os.Getenv("STRATA_POLICY_TEST_MAIN") == "1" {
		cliexit.Main("strata-policy", run)
	}
	os.Exit(m.Run())
}

// selfCommand is this test binary run as strata-policy with args.
func selfCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	// No second of sleep at exit under -race: kills land in the work.
	cmd.Env = append(os.Environ(), "STRATA_POLICY_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
	return cmd
}

// TestRenderKilled: strata-policy render killed with SIGKILL at random
// moments, over and over, between two policies that differ in most files:
// after every kill each file a reader opens is of one policy, the old
// render's or the new one's, never a mix; the next whole render leaves one
// generation and no temporary file.
func TestRenderKilled(t *testing.T) {
	dir := t.TempDir()
	out, slurm := filepath.Join(dir, "rendered"), filepath.Join(dir, "slurm")
	example, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	other := strings.Replace(strings.Replace(string(example), "shares: 60", "shares: 61", 1), "  name: gpu\n", "  name: gpx\n", 1)
	if other == string(example) {
		t.Fatal("the second policy is the example")
	}
	for path, text := range map[string]string{a: string(example), b: other} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What each policy renders, by stable path.
	want := map[string]map[string]string{}
	differ := 0
	for _, pol := range []string{a, b} {
		p, err := spec.Load(pol)
		if err != nil {
			t.Fatal(err)
		}
		want[pol] = map[string]string{}
		for _, f := range render.Files() {
			data, err := f.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(out, f.Name)
			if f.Dir == render.DirSlurm {
				link = filepath.Join(slurm, f.Name)
			}
			want[pol][link] = string(data)
		}
	}
	for link, text := range want[a] {
		if want[b][link] != text {
			differ++
		}
	}
	if differ < 4 {
		t.Fatalf("the two policies differ in %d files: want most", differ)
	}
	renderOf := func(pol string) *exec.Cmd {
		return selfCommand("--log-level", "error", "render", pol, "-o", out, "--slurm-dir", slurm)
	}
	// seen says which policy readers see now, failing on a mix.
	seen := func() string {
		t.Helper()
		var match []string
		for _, pol := range []string{a, b} {
			all := true
			for link, text := range want[pol] {
				data, err := os.ReadFile(link)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				all = all && err == nil && string(data) == text
			}
			if all {
				match = append(match, pol)
			}
		}
		if len(match) != 1 {
			var b strings.Builder
			for link := range want[a] {
				data, _ := os.ReadFile(link)
				switch string(data) {
				case want[a][link]:
					b.WriteString("\n  " + link + ": a")
				default:
					b.WriteString("\n  " + link + ": b or neither")
				}
			}
			t.Fatalf("readers see a mix of renders:%s", b.String())
		}
		return match[0]
	}

	start := time.Now()
	if out, err := renderOf(a).CombinedOutput(); err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	whole := time.Since(start)
	if seen() != a {
		t.Fatal("after a whole render readers do not see it")
	}
	const kills = 40
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	cur, changed, midway := a, 0, 0
	for i := range kills {
		next := b
		if cur == b {
			next = a
		}
		cmd := renderOf(next)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Most of a run is the process starting: aim at its end, where it
		// writes.
		time.Sleep(whole/2 + time.Duration(rng.Int64N(int64(whole)*2/3+1)))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if err == nil {
			cur = next // it finished first
		}
		got := seen()
		if got != cur && got != next {
			t.Fatalf("kill %d: readers see %s", i, got)
		}
		if got != cur {
			changed++
		}
		cur = got
		if gens, _ := os.ReadDir(filepath.Join(out, generation.GenerationsName)); len(gens) > 1 {
			midway++ // killed with a generation written and not yet removed
		}
	}
	t.Logf("%d kills (a whole render took %v): %d left the new render, %d the old; %d left a generation to remove",
		kills, whole, changed, kills-changed, midway)

	if out, err := renderOf(b).CombinedOutput(); err != nil {
		t.Fatalf("render after the kills: %v\n%s", err, out)
	}
	if seen() != b {
		t.Fatal("after the kills a whole render is not what readers see")
	}
	gens, err := os.ReadDir(filepath.Join(out, generation.GenerationsName))
	if err != nil || len(gens) != 1 {
		t.Errorf("generations after the next render: %v (%v), want one", gens, err)
	}
	for _, d := range []string{out, slurm} {
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err == nil && (strings.Contains(e.Name(), ".tmp") || strings.Contains(e.Name(), ".old-")) {
				t.Errorf("left after the next render: %s", path)
			}
			return err
		})
	}
}
