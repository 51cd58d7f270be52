package sacctmgr

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeLoad is a script standing in for `sacctmgr load` without -i: it
// reads the file from the path it is given, fails before its question
// when the file says FAIL, waits (as a slow part) when it says SLOW (1 s)
// or STUCK (30 s), and records in the log what it committed, in order,
// and in $LOG.no what it was told no. Like sacctmgr, it takes no answer
// within its time (30 s; ANSWER_WITHIN) as no, and asks again, with its
// time anew, on a character that is not y, n or a newline.
//
// HOLD and WAITFOR stand in for a lock in slurmdbd's database: a part
// that says WAITFOR does its work (before its question) only once a part
// that says HOLD has ended, as a part of a load waits in MariaDB for a
// lock that another part's open transaction holds until it commits or
// rolls back.
const fakeLoad = `#!/bin/bash
file=${2#file=}
data=$(cat "$file")
case "$data" in *FAIL*) echo " Problem with line(3)" >&2; exit 1;; esac
case "$data" in *HOLD*) trap 'touch "$LOG.released"' EXIT;; esac
case "$data" in *WAITFOR*) until [ -e "$LOG.released" ]; do sleep 0.05; done;; esac
case "$data" in *SLOW*) sleep 1;; esac
case "$data" in *STUCK*) sleep 30 </dev/null >/dev/null 2>&1 3<&-;; esac
echo " Adding $data"
printf 'Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): '
while :; do
  if ! IFS= read -r -t "${ANSWER_WITHIN:-30}" -n 1 c; then echo " timeout"; echo " Changes Discarded"; exit 0; fi
  case "$c" in
    y|Y) echo "$data" >> "$LOG"; exit 0 ;;
    n|N|"") echo "$data" >> "$LOG.no"; echo " Changes Discarded"; exit 0 ;;
  esac
  printf 'Y or N please\n(N/y): '
done
`

// TestLoadInOrder: parts load side by side and commit in order; a part
// that fails is reported, the parts before it are committed and those
// after it are told no; a part that would wait too long for the ones
// before it (wait: answerWithin) is told no, and it and those after it are
// loaded again.
func TestLoadInOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sacctmgr")
	if err := os.WriteFile(path, []byte(fakeLoad), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		files   []string
		wait    time.Duration
		keep    time.Duration
		want    int
		wantLog string
		wantErr string
		// wantAgain: some parts run more than once (how many depends on
		// the machine's speed), not what they commit.
		wantAgain bool
		stall     time.Duration
		// wantNo: the parts told no, in order; within: the most it may
		// take.
		wantNo string
		within time.Duration
	}{
		"all, in order, a slow first part too": {files: []string{"a SLOW", "b", "c"}, want: 3, wantLog: "a SLOW\nb\nc\n"},
		"the second fails":                     {files: []string{"a", "b FAIL", "c", "d"}, want: 1, wantLog: "a\n", wantErr: "part 2 of 4: exit status 1: Problem with line(3)"},
		"the first fails":                      {files: []string{"a FAIL", "b"}, wantErr: "part 1 of 2"},
		"a slow first part: the others, late, are loaded again": {
			files: []string{"a SLOW", "b", "c"}, wait: 300 * time.Millisecond, want: 3, wantLog: "a SLOW\nb\nc\n", wantAgain: true},
		"a slow first part: the others kept asking, each loaded once": {
			files: []string{"a SLOW", "b", "c"}, keep: 300 * time.Millisecond, want: 3, wantLog: "a SLOW\nb\nc\n"},
		"late, then a failure in the next round": {
			files: []string{"a SLOW", "b", "c FAIL"}, wait: 300 * time.Millisecond, want: 2, wantLog: "a SLOW\nb\n",
			wantErr: "part 3 of 3: exit status 1", wantAgain: true},
		// The first part waits (in the database) for a lock the second
		// holds while it waits (in apply) for the first to commit: the
		// second is told no once the first has not asked for stall, which
		// frees the first, and loaded again after it. Without the stall,
		// only the 20 s wait ends it.
		"the first part waits for a lock of the second at its question": {
			files: []string{"a WAITFOR", "b HOLD"}, wait: 20 * time.Second, keep: 200 * time.Millisecond, stall: 300 * time.Millisecond,
			want: 2, wantLog: "a WAITFOR\nb HOLD\n", wantNo: "b HOLD\n", wantAgain: true, within: 10 * time.Second},
		"a first part slower than the stall: the second is loaded again": {
			files: []string{"a SLOW", "b", "c"}, keep: 200 * time.Millisecond, stall: 300 * time.Millisecond,
			want: 3, wantLog: "a SLOW\nb\nc\n", wantNo: "b\nc\n", wantAgain: true},
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			s := &Command{Path: path, Env: []string{"LOG=" + log}, answerWithin: tc.wait, keepAlive: tc.keep, stallWithin: tc.stall}
			if tc.wait > 0 || tc.keep > 0 {
				// sacctmgr's own time to answer, shorter than a slow part.
				s.Env = append(s.Env, "ANSWER_WITHIN=0.8")
			}
			files := make([][]byte, len(tc.files))
			for i, f := range tc.files {
				files[i] = []byte(f)
			}
			start := time.Now()
			n, err := s.LoadInOrder(context.Background(), files)
			if took := time.Since(start); tc.within > 0 && took > tc.within {
				t.Errorf("LoadInOrder took %v, want %v at most", took, tc.within)
			}
			if tc.wantNo != "" {
				if no, _ := os.ReadFile(log + ".no"); string(no) != tc.wantNo {
					t.Errorf("told no %q, want %q", no, tc.wantNo)
				}
			}
			if n != tc.want || tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("LoadInOrder = %d, %v; want %d, %q", n, err, tc.want, tc.wantErr)
			}
			got, _ := os.ReadFile(log)
			if string(got) != tc.wantLog {
				t.Errorf("committed %q, want %q", got, tc.wantLog)
			}
			if runs := s.Runs(); tc.wantAgain && runs <= int64(len(files)) || !tc.wantAgain && runs != int64(len(files)) {
				t.Errorf("%d runs of %d files, want more: %t", runs, len(files), tc.wantAgain)
			}
		})
	}
}

// TestLoadInOrderInterrupted: when its context ends (apply got SIGTERM),
// LoadInOrder commits nothing more: a part at its question, or one that
// reaches it within the grace, is told no, so that slurmdbd rolls it back
// before apply exits; one still working after the grace is killed.
func TestLoadInOrderInterrupted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sacctmgr")
	if err := os.WriteFile(path, []byte(fakeLoad), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		files   []string
		wantNo  []string
		wantErr string
	}{
		"the parts asked or ask within the grace": {files: []string{"a SLOW", "b", "c"}, wantNo: []string{"a SLOW", "b", "c"}, wantErr: "told no: context canceled"},
		"a part still working after the grace":    {files: []string{"a STUCK", "b"}, wantNo: []string{"b"}, wantErr: "killed before its question, 2s after it was interrupted"},
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			s := &Command{Path: path, Env: []string{"LOG=" + log}, cancelGrace: 2 * time.Second}
			files := make([][]byte, len(tc.files))
			for i, f := range tc.files {
				files[i] = []byte(f)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			start := time.Now()
			n, err := s.LoadInOrder(ctx, files)
			if n != 0 || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("LoadInOrder = %d, %v; want 0, %q", n, err, tc.wantErr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("LoadInOrder took %v after its context ended", took)
			}
			if got, _ := os.ReadFile(log); len(got) > 0 {
				t.Errorf("committed after the interruption: %q", got)
			}
			no, _ := os.ReadFile(log + ".no")
			got := strings.Fields(strings.ReplaceAll(string(no), " ", "_"))
			slices.Sort(got)
			want := slices.Clone(tc.wantNo)
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], " ", "_")
			}
			if !slices.Equal(got, want) {
				t.Errorf("told no: %q, want %q", got, want)
			}
			if runs := s.Runs(); runs != int64(len(files)) {
				t.Errorf("%d runs of %d files: a round started after the interruption", runs, len(files))
			}
		})
	}
}
