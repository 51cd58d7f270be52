package apply

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultKeepBackups is how many backups of the live file Apply keeps
// when Options.KeepBackups is 0: enough to go back over a day of hourly
// applies that each changed something.
const DefaultKeepBackups = 30

// backupTime is the timestamp of a backup's name, in UTC.
const backupTime = "20060102T150405Z"

// backup is one backup file: <live>.<UTC time>.bak, or
// <live>.<UTC time>.<n>.bak for the n-th (n >= 2) of the same second.
type backup struct {
	path string
	at   time.Time
	n    int
}

// parseBackup reads a backup's name; ok is false for any other file
// (another tool's, an admin's topology.conf.manual.bak).
func parseBackup(live, path string) (b backup, ok bool) {
	mid, found := strings.CutPrefix(path, live+".")
	if !found {
		return b, false
	}
	if mid, found = strings.CutSuffix(mid, ".bak"); !found {
		return b, false
	}
	ts, seq, hasSeq := strings.Cut(mid, ".")
	at, err := time.Parse(backupTime, ts)
	if err != nil {
		return b, false
	}
	n := 1
	if hasSeq {
		if n, err = strconv.Atoi(seq); err != nil || n < 2 || strconv.Itoa(n) != seq {
			return b, false
		}
	}
	return backup{path: path, at: at, n: n}, true
}

func listBackups(live string) ([]backup, error) {
	m, err := filepath.Glob(live + ".*.bak")
	if err != nil {
		return nil, err
	}
	var out []backup
	for _, p := range m {
		if b, ok := parseBackup(live, p); ok {
			out = append(out, b)
		}
	}
	// Newest first.
	slices.SortFunc(out, func(a, b backup) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.n, a.n)) })
	return out, nil
}

// newBackupName is a name no backup of live has yet, for a backup made at
// now: two applies in one second (the lock makes them one after the
// other) each keep their own.
func newBackupName(live string, now time.Time) (string, error) {
	ts := now.UTC().Format(backupTime)
	for n := 1; n < 1000; n++ {
		name := fmt.Sprintf("%s.%s.bak", live, ts)
		if n > 1 {
			name = fmt.Sprintf("%s.%s.%d.bak", live, ts, n)
		}
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free backup name for %s at %s: remove old backups", live, ts)
}

// pruneBackups removes the oldest backups of live beyond keep (keep < 0
// keeps all), never keepAlso (the backup just made); it returns what it
// removed.
func pruneBackups(live string, keep int, keepAlso string) ([]string, error) {
	if keep < 0 {
		return nil, nil
	}
	bs, err := listBackups(live)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for i, b := range bs {
		if i < keep || b.path == keepAlso {
			continue
		}
		if err := os.Remove(b.path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, b.path)
	}
	return removed, errors.Join(errs...)
}
