package ib_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// endless is a reader that never ends: pattern over and over. It counts
// what it gave.
type endless struct {
	pattern []byte
	given   int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.pattern[(e.given+int64(i))%int64(len(e.pattern))]
	}
	e.given += int64(len(p))
	return len(p), nil
}

// An endless input is refused once it passes a limit, having read little
// more than the limit (a pipe is read whole before parsing, so an
// unbounded read would take the host's memory), and fast.
func TestParseEndlessInput(t *testing.T) {
	for name, tc := range map[string]struct {
		pattern string
		lim     ib.Limits
		want    error
		msg     string
		most    int64 // the most bytes it may read
	}{
		"no newline ever (a pipe of /dev/zero)": {pattern: "\x00", want: ib.ErrLineTooLong,
			msg: "ib: line 1 is longer than 64 KiB, where a dump's lines are a few hundred bytes: this is no ibnetdiscover dump", most: 1 << 20},
		"one endless line after good ones": {pattern: "Switch\t36 \"S-0008f10500108c5c\"\t\t# \"x\" enhanced port 0 lid 1 lmc 0\n" + strings.Repeat("y", 1<<20),
			lim: ib.Limits{MaxLine: 4096}, want: ib.ErrLineTooLong, msg: "ib: line 2 is longer than 4 KiB", most: 2 << 20},
		"endless comment lines": {pattern: "# a comment\n", lim: ib.Limits{MaxBytes: 1 << 20}, want: ib.ErrTooLarge,
			msg: "ib: the dump is larger than 1 MiB, the most topogen reads", most: 1<<20 + 1},
	} {
		t.Run(name, func(t *testing.T) {
			r := &endless{pattern: []byte(tc.pattern)}
			start := time.Now()
			_, err := ib.ParseLimited(r, tc.lim)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("ParseLimited = %v, want %v with %q", err, tc.want, tc.msg)
			}
			if r.given > tc.most {
				t.Errorf("read %d bytes, more than %d", r.given, tc.most)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// A file larger than the limit is refused by its size, without reading
// it; a line longer than the limit within one read is refused with its
// number; /dev/zero, a file that seeks to 0 and never ends, is refused.
func TestParseLimitsOnFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.out")
	if err := os.WriteFile(big, []byte(strings.Repeat("# comment\n", 20000)), 0o644); err != nil {
		t.Fatal(err)
	}
	longLine := filepath.Join(dir, "long-line.out")
	if err := os.WriteFile(longLine, []byte("# one\n# two\n#"+strings.Repeat("x", 5000)+"\n# four\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path          string
		lim           ib.Limits
		want          error
		msg, pipedMsg string
	}{
		"a file over the size": {big, ib.Limits{MaxBytes: 100000}, ib.ErrTooLarge, "ib: the dump is 200000 bytes, more than 100000 bytes",
			"ib: the dump is larger than 100000 bytes"},
		"a line over the limit": {longLine, ib.Limits{MaxLine: 4096}, ib.ErrLineTooLong, "ib: line 3 is longer than 4 KiB", "ib: line 3 is longer than 4 KiB"},
		"/dev/zero":             {"/dev/zero", ib.Limits{}, ib.ErrLineTooLong, "ib: line 1 is longer than 64 KiB", "ib: line 1 is longer than 64 KiB"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(tc.path)
			if err != nil {
				t.Skip(err)
			}
			defer f.Close()
			_, err = ib.ParseLimited(f, tc.lim)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("ParseLimited = %v, want %v with %q", err, tc.want, tc.msg)
			}
			// Through a pipe (a reader without Seek) the same.
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			_, err = ib.ParseLimited(io.MultiReader(f), tc.lim)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.pipedMsg) {
				t.Errorf("through a pipe: %v, want %v with %q", err, tc.want, tc.pipedMsg)
			}
		})
	}
}
