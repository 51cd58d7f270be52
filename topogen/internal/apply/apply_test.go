package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/topogen/internal/apply"
)

// fakeScontrol stands in for scontrol at the exec edge: Apply runs it
// through apply.Scontrol exactly as it runs the real one. It keeps its
// state in files beside itself:
//
//	log                    every call, one line each ("scontrol ping"); the restart command appends "restart"
//	env                    SLURM_CONF as the last call saw it
//	show                   what `scontrol show topology` prints (slurmctld's live placement)
//	down                   slurmctld is down: ping says DOWN, reconfigure and show fail
//	crash-on-reconfigure   reconfigure returns success, then slurmctld is down (a fatal topology error)
//	reconfigure-fails      reconfigure fails
//	show-fails             show topology fails (slurmctld up)
//
// Messages are those of the real scontrol.
const fakeScontrol = `#!/bin/sh
dir=$(dirname "$0")
echo "scontrol $*" >> "$dir/log"
printf '%s' "$SLURM_CONF" > "$dir/env"
unreachable() {
	echo "$1 error: Unable to contact slurm controller (connect failure)" >&2
	exit 1
}
case "$*" in
ping)
	if [ -e "$dir/down" ]; then
		echo "Slurmctld(primary) at localhost is DOWN"
		exit 1
	fi
	echo "Slurmctld(primary) at localhost is UP"
	;;
"show topology")
	[ -e "$dir/down" ] && unreachable slurm_load_topo
	if [ -e "$dir/show-fails" ]; then
		echo "slurm_load_topo error: Requested topology not found" >&2
		exit 1
	fi
	cat "$dir/show"
	;;
reconfigure)
	[ -e "$dir/down" ] && unreachable slurm_reconfigure
	[ -e "$dir/reconfigure-fails" ] && unreachable slurm_reconfigure
	[ -e "$dir/crash-on-reconfigure" ] && touch "$dir/down"
	exit 0
	;;
*)
	echo "fake scontrol: unexpected arguments: $*" >&2
	exit 2
	;;
esac
`

// The topology files of the tests. newConf moves gpu2 from leaf1 to leaf2.
const (
	oldConf = "SwitchName=leaf1 Nodes=gpu[1-2]\nSwitchName=leaf2 Nodes=gpu[3-4]\nSwitchName=spine1 Switches=leaf[1-2]\n"
	newConf = "SwitchName=leaf1 Nodes=gpu1\nSwitchName=leaf2 Nodes=gpu[2-4]\nSwitchName=spine1 Switches=leaf[1-2]\n"
	badConf = "SwitchName=leaf1 Nodes=gpu[1-2]\nSwitchName=leaf1 Nodes=gpu[3-4]\n"
	// newShow is what slurmctld 26.05 prints for newConf.
	newShow = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu1\n" +
		"SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[2-4]\n" +
		"SwitchName=spine1 Level=1 LinkSpeed=1 Nodes=gpu[1-4] Switches=leaf[1-2]\n"
)

// oldShow is what a real slurmctld 26.05.5 printed for oldConf.
func oldShow(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../render/testdata/show-tree-26.05.txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var cluster = []string{"gpu1", "gpu2", "gpu3", "gpu4"}

// now is the injected clock: 03:04:05 in UTC+2 is 01:04:05 UTC.
var now = time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CEST", 2*60*60))

const backupSuffix = ".20250102T010405Z.bak"

// bed is one test's slurmctld stand-in and /etc/slurm.
type bed struct {
	t    *testing.T
	ctl  string // folder of the fake scontrol and its state
	etc  string // folder of the topology file
	path string // the live topology.conf
	sc   apply.Scontrol
}

func newBed(t *testing.T) *bed {
	b := &bed{t: t, ctl: t.TempDir(), etc: t.TempDir()}
	b.path = filepath.Join(b.etc, "topology.conf")
	script := filepath.Join(b.ctl, "scontrol")
	if err := os.WriteFile(script, []byte(fakeScontrol), 0o755); err != nil {
		t.Fatal(err)
	}
	b.sc = apply.Scontrol{Path: script}
	return b
}

// restartCommand copies the live file aside (to show what slurmctld would
// have started on), brings slurmctld up and logs "restart".
func (b *bed) restartCommand() string {
	return fmt.Sprintf("cp %q %q && rm -f %q && echo restart >> %q",
		b.path, filepath.Join(b.ctl, "at-restart"), filepath.Join(b.ctl, "down"), filepath.Join(b.ctl, "log"))
}

func (b *bed) set(name, content string) {
	b.t.Helper()
	if err := os.WriteFile(filepath.Join(b.ctl, name), []byte(content), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) log() []string {
	b.t.Helper()
	data, err := os.ReadFile(filepath.Join(b.ctl, "log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// etcFiles lists the topology folder: a temporary file left behind would
// show up here.
func (b *bed) etcFiles() []string {
	b.t.Helper()
	entries, err := os.ReadDir(b.etc)
	if err != nil {
		b.t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, path string) (string, os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), st.Mode().Perm()
}

const (
	reconfigure = "scontrol reconfigure"
	ping        = "scontrol ping"
	show        = "scontrol show topology"
	restart     = "restart"
)

func TestApply(t *testing.T) {
	tests := map[string]struct {
		old            *string // the live file before; nil: none
		candidate      string
		skipValidation bool
		markers        []string                     // state files of the fake scontrol to create
		show           func(t *testing.T) string    // what slurmctld reports; nil: nothing
		restarter      func(b *bed) apply.Restarter // nil: no Restarter
		wantErr        error                        // errors.Is target; nil for success
		wantRes        apply.Result                 // Backup is a suffix of the path
		wantFile       *string                      // the live file after; nil: none
		wantLog        []string
		wantProblem    string // substring of Result.Problems
	}{
		"unchanged file: no write, no reconfigure": {
			old:       ptr(oldConf),
			candidate: oldConf,
			wantFile:  ptr(oldConf),
		},
		"invalid candidate: not written, scontrol never runs": {
			old:         ptr(oldConf),
			candidate:   badConf,
			wantErr:     apply.ErrInvalid,
			wantFile:    ptr(oldConf),
			wantProblem: "line 2: switch leaf1 is already defined on line 1",
		},
		"success: written beside a backup, slurmctld reports it": {
			old:       ptr(oldConf),
			candidate: newConf,
			show:      func(*testing.T) string { return newShow },
			wantRes:   apply.Result{Changed: true, Backup: backupSuffix},
			wantFile:  ptr(newConf),
			wantLog:   []string{reconfigure, ping, show},
		},
		"success without a previous file: no backup": {
			candidate: newConf,
			show:      func(*testing.T) string { return newShow },
			wantRes:   apply.Result{Changed: true},
			wantFile:  ptr(newConf),
			wantLog:   []string{reconfigure, ping, show},
		},
		"slurmctld keeps the old placement: rolled back": {
			old:         ptr(oldConf),
			candidate:   newConf,
			show:        oldShow,
			wantErr:     apply.ErrRolledBack,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, show, reconfigure, ping, show},
			wantProblem: `slurmctld reports another placement than the file (written vs live): node gpu2: "leaf2" vs "leaf1"`,
		},
		"slurmctld reports a placement of neither file: rollback failed": {
			old:         ptr(oldConf),
			candidate:   newConf,
			show:        func(*testing.T) string { return "SwitchName=leaf9 Level=0 LinkSpeed=1 Nodes=gpu[1-4]\n" },
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, show, reconfigure, ping, show},
			wantProblem: `node gpu1: "leaf1" vs "leaf9"`,
		},
		"show topology fails: neither file can be confirmed": {
			old:         ptr(oldConf),
			candidate:   newConf,
			markers:     []string{"show-fails"},
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, show, reconfigure, ping, show},
			wantProblem: "scontrol show topology: exit status 1: slurm_load_topo error: Requested topology not found",
		},
		"no previous file and a mismatch: the file is removed": {
			// After the removal there is no placement to compare: that
			// slurmctld answers is enough.
			candidate:   newConf,
			show:        oldShow,
			wantErr:     apply.ErrRolledBack,
			wantRes:     apply.Result{Changed: true, RolledBack: true},
			wantLog:     []string{reconfigure, ping, show, reconfigure, ping},
			wantProblem: "slurmctld reports another placement",
		},
		"no previous file and slurmctld down: the file is removed, but rollback failed": {
			// Removing the file is not enough: slurmctld is still down,
			// and nothing started it again.
			candidate:   newConf,
			markers:     []string{"crash-on-reconfigure"},
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, RolledBack: true},
			wantLog:     []string{reconfigure, ping, reconfigure},
			wantProblem: "slurmctld stopped answering after reconfigure",
		},
		"no previous file and slurmctld down: removed, then restarted": {
			candidate: newConf,
			markers:   []string{"crash-on-reconfigure"},
			restarter: func(b *bed) apply.Restarter {
				s := b.sc
				s.RestartCommand = "rm -f " + filepath.Join(b.ctl, "down")
				return s
			},
			wantErr:     apply.ErrRolledBack,
			wantRes:     apply.Result{Changed: true, RolledBack: true},
			wantLog:     []string{reconfigure, ping, reconfigure, ping},
			wantProblem: "slurmctld stopped answering after reconfigure",
		},
		"slurmctld down after reconfigure: rollback, then restart": {
			old:         ptr(oldConf),
			candidate:   newConf,
			markers:     []string{"crash-on-reconfigure"},
			show:        oldShow,
			restarter:   func(b *bed) apply.Restarter { s := b.sc; s.RestartCommand = b.restartCommand(); return s },
			wantErr:     apply.ErrRolledBack,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, reconfigure, restart, ping, show},
			wantProblem: "slurmctld stopped answering after reconfigure",
		},
		"slurmctld down and no restarter: rollback failed": {
			old:         ptr(oldConf),
			candidate:   newConf,
			markers:     []string{"crash-on-reconfigure"},
			show:        oldShow,
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, reconfigure},
			wantProblem: "slurmctld stopped answering after reconfigure",
		},
		"slurmctld down and no restart command: rollback failed": {
			old:         ptr(oldConf),
			candidate:   newConf,
			markers:     []string{"crash-on-reconfigure"},
			show:        oldShow,
			restarter:   func(b *bed) apply.Restarter { return b.sc },
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, ping, reconfigure},
			wantProblem: "slurmctld stopped answering after reconfigure",
		},
		"reconfigure refused: rollback cannot be confirmed either": {
			old:         ptr(oldConf),
			candidate:   newConf,
			markers:     []string{"reconfigure-fails"},
			show:        oldShow,
			wantErr:     apply.ErrRollbackFailed,
			wantRes:     apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:    ptr(oldConf),
			wantLog:     []string{reconfigure, reconfigure},
			wantProblem: "reconfigure: scontrol reconfigure: exit status 1: slurm_reconfigure error: Unable to contact slurm controller",
		},
		"invalid candidate written anyway when asked, and rolled back": {
			old:            ptr(oldConf),
			candidate:      badConf,
			skipValidation: true,
			show:           oldShow,
			wantErr:        apply.ErrRolledBack,
			wantRes:        apply.Result{Changed: true, Backup: backupSuffix, RolledBack: true},
			wantFile:       ptr(oldConf),
			wantLog:        []string{reconfigure, ping, show, reconfigure, ping, show},
			wantProblem:    "line 2: switch leaf1 is already defined on line 1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			var before os.FileInfo
			if tc.old != nil {
				if err := os.WriteFile(b.path, []byte(*tc.old), 0o640); err != nil {
					t.Fatal(err)
				}
				// os.WriteFile's mode is cut by the umask; set it exactly.
				if err := os.Chmod(b.path, 0o640); err != nil {
					t.Fatal(err)
				}
				// Held open until the test ends, so that its inode is not
				// freed and given to a new file (ext4 reuses them at once),
				// which would make a renamed-over file look rewritten.
				hold, err := os.Open(b.path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = hold.Close() })
				if before, err = hold.Stat(); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range tc.markers {
				b.set(m, "")
			}
			if tc.show != nil {
				b.set("show", tc.show(t))
			}
			opt := apply.Options{
				Path:           b.path,
				Candidate:      []byte(tc.candidate),
				KnownNodes:     cluster,
				SkipValidation: tc.skipValidation,
				Settle:         10 * time.Millisecond,
				Ctl:            b.sc,
				Now:            func() time.Time { return now },
			}
			if tc.restarter != nil {
				opt.Restarter = tc.restarter(b)
			}

			res, err := apply.Apply(t.Context(), opt)

			if tc.wantErr == nil && err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply error = %v, want %v", err, tc.wantErr)
			}
			wantBackup := ""
			if tc.wantRes.Backup != "" {
				wantBackup = b.path + tc.wantRes.Backup
			}
			if tc.wantProblem != "" && !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.Contains(p, tc.wantProblem) }) {
				t.Errorf("Problems = %q, want one containing %q", res.Problems, tc.wantProblem)
			}
			got := res
			got.Problems = nil
			want := tc.wantRes
			want.Backup = wantBackup
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLog, b.log()); diff != "" {
				t.Errorf("scontrol calls (-want +got):\n%s", diff)
			}

			// The live file: content, mode kept, replaced by a rename.
			if tc.wantFile == nil {
				if _, err := os.Stat(b.path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after Apply (stat error %v), want it removed", b.path, err)
				}
			} else {
				content, mode := readFile(t, b.path)
				if content != *tc.wantFile {
					t.Errorf("live file:\n%s\nwant:\n%s", content, *tc.wantFile)
				}
				wantMode := os.FileMode(0o644) // a new file's
				if tc.old != nil {
					wantMode = 0o640
				}
				if mode != wantMode {
					t.Errorf("live file mode %v, want %v", mode, wantMode)
				}
				if st, err := os.Stat(b.path); err == nil && before != nil && res.Changed && os.SameFile(before, st) {
					t.Errorf("live file rewritten in place; want a new file renamed over it")
				}
			}

			// The backup holds the old file, with its mode.
			var wantFiles []string
			if tc.wantFile != nil {
				wantFiles = append(wantFiles, "topology.conf")
			}
			if wantBackup != "" {
				wantFiles = append(wantFiles, filepath.Base(wantBackup))
				content, mode := readFile(t, wantBackup)
				if content != *tc.old || mode != 0o640 {
					t.Errorf("backup %s (mode %v):\n%s\nwant the old file (mode 0640):\n%s", wantBackup, mode, content, *tc.old)
				}
			}
			slices.Sort(wantFiles)
			if diff := cmp.Diff(wantFiles, b.etcFiles(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("files in %s (-want +got):\n%s", b.etc, diff)
			}

			// The restart saw the restored file, not the candidate.
			if slices.Contains(tc.wantLog, restart) {
				content, _ := readFile(t, filepath.Join(b.ctl, "at-restart"))
				if content != *tc.old {
					t.Errorf("slurmctld was restarted on:\n%s\nwant the restored file:\n%s", content, *tc.old)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An apply whose context is already canceled (SIGTERM before it began)
// writes nothing and runs nothing.
func TestApplyCanceled(t *testing.T) {
	b := newBed(t)
	if err := os.WriteFile(b.path, []byte(oldConf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.set("show", newShow)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := apply.Apply(ctx, apply.Options{
		Path: b.path, Candidate: []byte(newConf), Settle: time.Hour, Ctl: b.sc,
		Now: func() time.Time { return now },
	})
	if !errors.Is(err, context.Canceled) || res.Changed {
		t.Fatalf("Apply with a canceled context = %+v, %v; want context.Canceled and nothing changed", res, err)
	}
	if content, _ := readFile(t, b.path); content != oldConf {
		t.Errorf("live file after a canceled apply:\n%s\nwant the old file", content)
	}
	if diff := cmp.Diff([]string{"topology.conf"}, b.etcFiles()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if log := b.log(); len(log) != 0 {
		t.Errorf("scontrol ran: %q", log)
	}
}

func TestValidate(t *testing.T) {
	if p := apply.Validate([]byte(oldConf), cluster); len(p) != 0 {
		t.Errorf("Validate(valid) = %q, want none", p)
	}
	got := apply.Validate([]byte("SwitchName=leaf1 Nodes=gpu[1-5] Bogus=1\n"), cluster)
	want := []string{
		`line 1: unknown key "bogus" on a SwitchName line`,
		"line 1: node gpu5 is not a node of this cluster",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}

func TestScontrol(t *testing.T) {
	b := newBed(t)
	b.sc.Env = []string{"SLURM_CONF=/etc/slurm/test.conf"}
	ctx := t.Context()

	if err := b.sc.Ping(ctx); err != nil {
		t.Errorf("Ping (up): %v", err)
	}
	b.set("show", newShow)
	if out, err := b.sc.ShowTopology(ctx); err != nil || string(out) != newShow {
		t.Errorf("ShowTopology = %q, %v; want %q", out, err, newShow)
	}
	if env, _ := readFile(t, filepath.Join(b.ctl, "env")); env != "/etc/slurm/test.conf" {
		t.Errorf("scontrol ran with SLURM_CONF=%q, want /etc/slurm/test.conf", env)
	}
	if err := b.sc.Reconfigure(ctx); err != nil {
		t.Errorf("Reconfigure: %v", err)
	}

	b.set("down", "")
	if err := b.sc.Ping(ctx); err == nil || !strings.Contains(err.Error(), "is DOWN") {
		t.Errorf("Ping (down) = %v, want an error quoting the DOWN line", err)
	}
	err := b.sc.Reconfigure(ctx)
	if want := "scontrol reconfigure: exit status 1: slurm_reconfigure error: Unable to contact slurm controller (connect failure)"; err == nil || err.Error() != want {
		t.Errorf("Reconfigure (down) = %v, want %q", err, want)
	}
	if _, err := b.sc.ShowTopology(ctx); err == nil {
		t.Errorf("ShowTopology (down) succeeded")
	}

	if err := b.sc.Restart(ctx); err == nil || !strings.Contains(err.Error(), "no restart command configured") {
		t.Errorf("Restart without a command = %v", err)
	}
	b.sc.RestartCommand = "echo starting; exit 3"
	if err := b.sc.Restart(ctx); err == nil || !strings.Contains(err.Error(), "exit status 3: starting") {
		t.Errorf("failing Restart = %v, want exit status 3 with its output", err)
	}
	if err := os.WriteFile(b.path, []byte(oldConf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.sc.RestartCommand = b.restartCommand()
	if err := b.sc.Restart(ctx); err != nil {
		t.Errorf("Restart: %v", err)
	}
	if err := b.sc.Ping(ctx); err != nil {
		t.Errorf("Ping after restart: %v", err)
	}
}

// TestPingWantsUp: an exit status of 0 is not enough, the primary must be UP.
func TestPingWantsUp(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "scontrol")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'Slurmctld(primary) at head1 is DOWN'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := apply.Scontrol{Path: script}.Ping(t.Context())
	if want := "slurmctld is not up: Slurmctld(primary) at head1 is DOWN"; err == nil || err.Error() != want {
		t.Errorf("Ping = %v, want %q", err, want)
	}
}

func TestBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topology.conf")
	for _, name := range []string{
		"topology.conf",
		"topology.conf.20250101T000000Z.bak",
		"topology.conf.20250301T120000Z.bak",
		"topology.conf.20250201T000000Z.bak",
		"topology.conf.20250301T115959Z.bak",
		"gres.conf.20250401T000000Z.bak", // another file's
		".topology.conf.tmp123",          // a temporary file
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := apply.Backups(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		path + ".20250301T120000Z.bak",
		path + ".20250301T115959Z.bak",
		path + ".20250201T000000Z.bak",
		path + ".20250101T000000Z.bak",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backups (-want +got):\n%s", diff)
	}

	none, err := apply.Backups(filepath.Join(dir, "slurm.conf"))
	if err != nil || len(none) != 0 {
		t.Errorf("Backups of a file without any = %q, %v; want none", none, err)
	}
}

// TestApplyBackupIsListed: the backup Apply writes is what Backups finds.
func TestApplyBackupIsListed(t *testing.T) {
	b := newBed(t)
	if err := os.WriteFile(b.path, []byte(oldConf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.set("show", newShow)
	res, err := apply.Apply(t.Context(), apply.Options{
		Path: b.path, Candidate: []byte(newConf), Settle: 10 * time.Millisecond, Ctl: b.sc,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := apply.Backups(b.path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{res.Backup}, got); diff != "" {
		t.Errorf("Backups after Apply (-want +got):\n%s", diff)
	}
}
