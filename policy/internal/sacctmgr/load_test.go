package sacctmgr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeLoad is a script standing in for `sacctmgr load` without -i: it
// reads the file from the path it is given, fails before its question
// when the file says FAIL, waits (as a slow part) when it says SLOW, and
// records in the log what it committed, in order. Like sacctmgr, it
// takes no answer within its time (30 s; ANSWER_WITHIN) as no, and asks
// again, with its time anew, on a character that is not y, n or a newline.
const fakeLoad = `#!/bin/bash
file=${2#file=}
data=$(cat "$file")
case "$data" in *FAIL*) echo " Problem with line(3)" >&2; exit 1;; esac
case "$data" in *SLOW*) sleep 1;; esac
echo " Adding $data"
printf 'Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): '
while :; do
  if ! IFS= read -r -t "${ANSWER_WITHIN:-30}" -n 1 c; then echo " timeout"; echo " Changes Discarded"; exit 0; fi
  case "$c" in
    y|Y) echo "$data" >> "$LOG"; exit 0 ;;
    n|N|"") echo " Changes Discarded"; exit 0 ;;
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
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			s := &Command{Path: path, Env: []string{"LOG=" + log}, answerWithin: tc.wait, keepAlive: tc.keep}
			if tc.wait > 0 || tc.keep > 0 {
				// sacctmgr's own time to answer, shorter than a slow part.
				s.Env = append(s.Env, "ANSWER_WITHIN=0.8")
			}
			files := make([][]byte, len(tc.files))
			for i, f := range tc.files {
				files[i] = []byte(f)
			}
			n, err := s.LoadInOrder(context.Background(), files)
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
