package apply_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/apply"
)

func (b *bed) options(candidate string) apply.Options {
	return apply.Options{Path: b.path, Candidate: []byte(candidate), KnownNodes: cluster, Settle: 10 * time.Millisecond, Ctl: b.sc,
		Now: func() time.Time { return now }}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Two applies in the same second each keep their backup: the second does
// not overwrite the first, which holds the only copy of the original file.
func TestApplyBackupsAreUnique(t *testing.T) {
	b := newBed(t)
	write(t, b.path, oldConf)
	b.set("show", newShow)
	first, err := apply.Apply(t.Context(), b.options(newConf))
	if err != nil {
		t.Fatal(err)
	}
	b.set("show", oldShow(t))
	second, err := apply.Apply(t.Context(), b.options(oldConf))
	if err != nil {
		t.Fatal(err)
	}
	if first.Backup == second.Backup {
		t.Fatalf("both applies backed up to %s", first.Backup)
	}
	for path, want := range map[string]string{first.Backup: oldConf, second.Backup: newConf} {
		if got, _ := readFile(t, path); got != want {
			t.Errorf("backup %s:\n%s\nwant:\n%s", path, got, want)
		}
	}
	got, err := apply.Backups(b.path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{b.path + ".20250102T010405Z.2.bak", b.path + backupSuffix}; !gocmp.Equal(want, got) || second.Backup != want[0] {
		t.Errorf("Backups = %q, want %q, newest (the second apply's) first", got, want)
	}
}

// Backups are kept by count, newest first; files that are not Apply's
// backups (an admin's copy) are never removed.
func TestApplyKeepsBackupsByCount(t *testing.T) {
	b := newBed(t)
	write(t, b.path, oldConf)
	for _, name := range []string{"20240101T000000Z", "20240102T000000Z", "20240102T000000Z.2", "manual"} {
		write(t, b.path+"."+name+".bak", "old backup\n")
	}
	b.set("show", newShow)
	o := b.options(newConf)
	o.KeepBackups = 2
	res, err := apply.Apply(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"topology.conf", "topology.conf.20240102T000000Z.2.bak", "topology.conf.20250102T010405Z.bak", "topology.conf.manual.bak"}
	if diff := gocmp.Diff(want, b.etcFiles()); diff != "" {
		t.Errorf("files after keeping 2 backups (-want +got):\n%s", diff)
	}
	if res.Backup != b.path+backupSuffix {
		t.Errorf("backup = %s", res.Backup)
	}
}

// lockEtc holds the lock on the bed's folder as another apply would.
func lockEtc(t *testing.T, b *bed) (release func()) {
	t.Helper()
	d, err := os.Open(b.etc)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return func() { d.Close() }
}

// A second apply while one runs fails at once, names who holds the lock,
// and touches nothing; once the first is done, it runs.
func TestApplyLocked(t *testing.T) {
	b := newBed(t)
	write(t, b.path, oldConf)
	b.set("show", newShow)
	release := lockEtc(t, b)
	start := time.Now()
	res, err := apply.Apply(t.Context(), b.options(newConf))
	if !errors.Is(err, apply.ErrBusy) {
		t.Fatalf("Apply while locked = %+v, %v; want ErrBusy", res, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Apply while locked took %v: it must not wait", d)
	}
	if _, procErr := os.Stat("/proc/locks"); procErr == nil {
		if want := fmt.Sprintf("is locked by pid %d (", os.Getpid()); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the holder (%q)", err, want)
		}
	}
	if !strings.Contains(err.Error(), b.etc) {
		t.Errorf("error %q does not name the folder", err)
	}
	if content, _ := readFile(t, b.path); content != oldConf || len(b.log()) != 0 || len(b.etcFiles()) != 1 {
		t.Errorf("a locked-out apply changed something: file %q, scontrol %q, files %q", content, b.log(), b.etcFiles())
	}
	release()
	if _, err := apply.Apply(t.Context(), b.options(newConf)); err != nil {
		t.Errorf("Apply after the lock was released: %v", err)
	}
}

// Two applies at once: the one that comes second while the first waits
// for slurmctld to settle is refused; the first completes.
func TestApplyConcurrent(t *testing.T) {
	b := newBed(t)
	write(t, b.path, oldConf)
	b.set("show", newShow)
	slow := b.options(newConf)
	slow.Settle = time.Second
	done := make(chan error, 1)
	go func() { _, err := apply.Apply(t.Context(), slow); done <- err }()
	waitFor(t, b, reconfigure)
	_, err := apply.Apply(t.Context(), b.options(otherConf))
	if !errors.Is(err, apply.ErrBusy) {
		t.Errorf("second apply during the first = %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Errorf("first apply: %v", err)
	}
}

// otherConf is a valid topology other than newConf.
const otherConf = "SwitchName=leaf1 Nodes=gpu[1-4]\n"

// waitFor waits until the fake scontrol has logged line.
func waitFor(t *testing.T, b *bed, line string) {
	t.Helper()
	if !logged(b, line) {
		t.Fatalf("scontrol never logged %q", line)
	}
}

// logged waits up to 10 s for the fake scontrol to log line; safe to call
// off the test's goroutine.
func logged(b *bed, line string) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		data, _ := os.ReadFile(filepath.Join(b.ctl, "log"))
		if slices.Contains(strings.Split(string(data), "\n"), line) {
			return true
		}
	}
	return false
}

// SIGTERM during the settle wait: the file is restored and the rollback's
// reconfigure still runs, on its own deadline, so slurmctld rereads the
// old file; the apply says rolled back, not "slurmctld may be down".
func TestApplyCanceledDuringSettle(t *testing.T) {
	b := newBed(t)
	write(t, b.path, oldConf)
	b.set("show", oldShow(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := b.options(newConf)
	o.Settle = 500 * time.Millisecond
	go func() { logged(b, reconfigure); cancel() }()
	res, err := apply.Apply(ctx, o)
	if !errors.Is(err, apply.ErrRolledBack) || !res.RolledBack {
		t.Fatalf("Apply canceled while settling = %+v, %v; want ErrRolledBack", res, err)
	}
	if diff := gocmp.Diff([]string{reconfigure, reconfigure, ping, show}, b.log()); diff != "" {
		t.Errorf("scontrol calls (-want +got):\n%s", diff)
	}
	if content, _ := readFile(t, b.path); content != oldConf {
		t.Errorf("live file:\n%s\nwant the old one back", content)
	}
}

// A symbolic link at the live path (a site that keeps its Slurm files in
// a shared or versioned folder) is written through, on success and on
// rollback, and stays a link; a link to nothing is refused.
func TestApplySymlinkedLiveFile(t *testing.T) {
	setup := func(t *testing.T) (*bed, string) {
		b := newBed(t)
		target := filepath.Join(t.TempDir(), "topology.conf")
		write(t, target, oldConf)
		if err := os.Symlink(target, b.path); err != nil {
			t.Fatal(err)
		}
		return b, target
	}
	stillLink := func(t *testing.T, b *bed, target, want string) {
		t.Helper()
		st, err := os.Lstat(b.path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a symbolic link (%v, %v)", b.path, st.Mode(), err)
		}
		if dest, _ := os.Readlink(b.path); dest != target {
			t.Errorf("link points to %s, want %s", dest, target)
		}
		if got, _ := readFile(t, target); got != want {
			t.Errorf("link target:\n%s\nwant:\n%s", got, want)
		}
	}
	t.Run("success", func(t *testing.T) {
		b, target := setup(t)
		b.set("show", newShow)
		res, err := apply.Apply(t.Context(), b.options(newConf))
		if err != nil {
			t.Fatal(err)
		}
		stillLink(t, b, target, newConf)
		if got, _ := readFile(t, res.Backup); got != oldConf {
			t.Errorf("backup %s:\n%s\nwant the old file", res.Backup, got)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		b, target := setup(t)
		b.set("show", oldShow(t))
		if _, err := apply.Apply(t.Context(), b.options(newConf)); !errors.Is(err, apply.ErrRolledBack) {
			t.Fatalf("Apply = %v, want ErrRolledBack", err)
		}
		stillLink(t, b, target, oldConf)
	})
	t.Run("a link to nothing", func(t *testing.T) {
		b := newBed(t)
		missing := filepath.Join(t.TempDir(), "gone", "topology.conf")
		if err := os.Symlink(missing, b.path); err != nil {
			t.Fatal(err)
		}
		_, err := apply.Apply(t.Context(), b.options(newConf))
		if err == nil || !strings.Contains(err.Error(), "is a symbolic link to "+missing) {
			t.Fatalf("Apply through a dangling link = %v, want a refusal naming the link's target", err)
		}
		if st, err := os.Lstat(b.path); err != nil || st.Mode()&os.ModeSymlink == 0 || len(b.log()) != 0 {
			t.Errorf("the dangling link was changed or scontrol ran: %v, %v, %q", st, err, b.log())
		}
	})
}

// The change budget: a candidate that drops more than the allowed share
// of the live file's nodes or switches (a truncated dump), or that comes
// from a dump with duplicate GUIDs, is refused unless forced, with what it
// would lose; nothing is written and slurmctld is not touched.
func TestApplyChangeBudget(t *testing.T) {
	const (
		truncated     = "SwitchName=leaf1 Nodes=gpu1\n"
		truncatedShow = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu1\n"
		oneGone       = "SwitchName=leaf1 Nodes=gpu1\nSwitchName=leaf2 Nodes=gpu[3-4]\nSwitchName=spine1 Switches=leaf[1-2]\n"
		oneGoneShow   = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu1\nSwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[3-4]\n" +
			"SwitchName=spine1 Level=1 LinkSpeed=1 Nodes=gpu[1,3-4] Switches=leaf[1-2]\n"
	)
	renamed := strings.NewReplacer("leaf", "LEAF-000", "spine1", "SPINE-0001").Replace(oldConf)
	renamedShow := strings.NewReplacer("leaf", "LEAF-000", "spine1", "SPINE-0001").Replace(oldShow(t))
	// A live file with a line topogen cannot parse (Slurm may or may not
	// take it): what it holds is unknown, so nothing can be measured.
	unreadable := oldConf + "SwitchName=spine2 Switches=leaf[1-2] Weight=3\n"
	tests := map[string]struct {
		live            string // oldConf when ""
		candidate, show string
		maxDrop         float64
		dups            []string
		force           bool
		want            []string // in the error; nil: applied
	}{
		"a truncated candidate over a live file topogen cannot read is refused, not measured": {live: unreadable, candidate: truncated, want: []string{
			"the live file cannot be read to measure the change against it (line 4: unknown key \"weight\" on a SwitchName line)",
			"fix that line of the live file (or move the file away) and run again, or apply with --force if the candidate is right"}},
		"any candidate over a live file topogen cannot read is refused": {live: unreadable, candidate: oldConf,
			want: []string{"the live file cannot be read to measure the change"}},
		"a live file topogen cannot read, forced, it is applied": {live: unreadable, candidate: newConf, show: newShow, force: true},
		"a truncated dump is refused": {candidate: truncated, want: []string{
			"drops 3 of the live file's 4 nodes (75%, more than the 10% allowed): gpu[2-4]",
			"it has 1 switches where the live file has 3 (67% fewer, more than the 10% allowed)",
			"apply with --force"}},
		"forced, it is applied":                  {candidate: truncated, show: truncatedShow, force: true},
		"a node moved is no loss":                {candidate: newConf, show: newShow},
		"a drop within the share is applied":     {candidate: oneGone, show: oneGoneShow, maxDrop: 0.25},
		"a drop just over the share is refused":  {candidate: oneGone, maxDrop: 0.2, want: []string{"drops 1 of the live file's 4 nodes (25%, more than the 20% allowed): gpu2"}},
		"switches renamed are no loss":           {candidate: renamed, show: renamedShow},
		"duplicate GUIDs are refused":            {candidate: newConf, dups: []string{"2c5eab0300b87b40"}, want: []string{"declares 1 GUIDs more than once (2c5eab0300b87b40)"}},
		"duplicate GUIDs, forced, it is applied": {candidate: newConf, show: newShow, dups: []string{"2c5eab0300b87b40"}, force: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			live := cmp.Or(tc.live, oldConf)
			write(t, b.path, live)
			b.set("show", tc.show)
			o := b.options(tc.candidate)
			o.MaxDrop, o.DuplicateGUIDs, o.Force = tc.maxDrop, tc.dups, tc.force
			res, err := apply.Apply(t.Context(), o)
			if tc.want == nil {
				if err != nil || !res.Changed {
					t.Fatalf("Apply = %+v, %v; want applied", res, err)
				}
				return
			}
			if !errors.Is(err, apply.ErrBudget) || res.Changed {
				t.Fatalf("Apply = %+v, %v; want ErrBudget and nothing changed", res, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if content, _ := readFile(t, b.path); content != live || len(b.log()) != 0 || len(b.etcFiles()) != 1 {
				t.Errorf("a refused apply changed something: file %q, scontrol %q, files %q", content, b.log(), b.etcFiles())
			}
		})
	}
}

// The change budget of a topology.yaml: every topology in the live file
// is measured against the candidate's, so a truncated scan is refused as
// for topology.conf; a live topology.yaml topogen cannot read refuses too.
func TestApplyChangeBudgetYAML(t *testing.T) {
	const (
		liveYAML = "- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n" +
			"      - switch: spine1\n        children: leaf[1-2]\n" +
			"      - switch: leaf1\n        nodes: gpu[1-2]\n      - switch: leaf2\n        nodes: gpu[3-4]\n" +
			"- topology: nvl\n  cluster_default: false\n  block:\n    block_sizes:\n      - 2\n    blocks:\n" +
			"      - block: nvl1\n        nodes: gpu[1-2]\n      - block: nvl2\n        nodes: gpu[3-4]\n"
		// A scan that saw gpu1 and gpu2 only.
		partialYAML = "- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n" +
			"      - switch: leaf1\n        nodes: gpu[1-2]\n"
		partialConf = "SwitchName=leaf1 Nodes=gpu[1-2]\n"
	)
	for name, tc := range map[string]struct {
		live  string
		force bool
		want  []string // in the error; nil: applied
	}{
		"a partial scan is refused": {live: liveYAML, want: []string{
			"drops 2 of the live file's 4 nodes (50%, more than the 10% allowed): gpu[3-4]",
			"it has 1 switches where the live file has 3"}},
		"a live topology.yaml topogen cannot read is refused": {live: "- topology: fabric\n  tree:\n    nodez: []\n",
			want: []string{"the live file cannot be read to measure the change against it (topology.yaml: line 3: unknown key nodez)"}},
		"a partial scan, forced, is applied": {live: liveYAML, force: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			b.path = filepath.Join(b.etc, "topology.yaml")
			write(t, b.path, tc.live)
			b.set("show", "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[1-2]\n")
			o := b.options(partialYAML)
			o.Expect, o.YAML, o.Force = []byte(partialConf), true, tc.force
			res, err := apply.Apply(t.Context(), o)
			if tc.want == nil {
				if err != nil || !res.Changed {
					t.Fatalf("Apply = %+v, %v; want applied", res, err)
				}
				return
			}
			if !errors.Is(err, apply.ErrBudget) || res.Changed {
				t.Fatalf("Apply = %+v, %v; want ErrBudget and nothing changed", res, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if content, _ := readFile(t, b.path); content != tc.live || len(b.log()) != 0 {
				t.Errorf("a refused apply changed something: file %q, scontrol %q", content, b.log())
			}
		})
	}
}
