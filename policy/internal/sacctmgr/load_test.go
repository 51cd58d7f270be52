package sacctmgr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLoad is a script standing in for `sacctmgr load` without -i: it
// reads the file from the path it is given, fails before its question
// when the file says FAIL, waits (as a slow part) when it says SLOW, and
// records in the log what it committed, in order.
const fakeLoad = `#!/bin/sh
file=${2#file=}
data=$(cat "$file")
case "$data" in *FAIL*) echo " Problem with line(3)" >&2; exit 1;; esac
case "$data" in *SLOW*) sleep 1;; esac
echo " Adding $data"
printf 'Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): '
read answer
if [ "$answer" = y ]; then echo "$data" >> "$LOG"; exit 0; fi
echo " Changes Discarded"
`

// TestLoadInOrder: parts load side by side and commit in order; a part
// that fails is reported, the parts before it are committed and those
// after it are told no.
func TestLoadInOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sacctmgr")
	if err := os.WriteFile(path, []byte(fakeLoad), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		files   []string
		want    int
		wantLog string
		wantErr string
	}{
		"all, in order, a slow first part too": {files: []string{"a SLOW", "b", "c"}, want: 3, wantLog: "a SLOW\nb\nc\n"},
		"the second fails":                     {files: []string{"a", "b FAIL", "c", "d"}, want: 1, wantLog: "a\n", wantErr: "part 2 of 4: exit status 1: Problem with line(3)"},
		"the first fails":                      {files: []string{"a FAIL", "b"}, wantErr: "part 1 of 2"},
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			s := &Command{Path: path, Env: []string{"LOG=" + log}}
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
			if s.Runs() != int64(len(files)) {
				t.Errorf("%d runs, want %d", s.Runs(), len(files))
			}
		})
	}
}
