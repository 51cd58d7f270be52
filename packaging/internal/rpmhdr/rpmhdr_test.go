package rpmhdr

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "make testdata/tiny.rpm again with nfpm (NFPM names it; default nfpm on PATH)")

// tiny is testdata/tiny.rpm, an RPM nfpm made from testdata/tiny.yaml.
func tiny(t testing.TB) []byte {
	t.Helper()
	if *update {
		nfpm := os.Getenv("NFPM")
		if nfpm == "" {
			nfpm = "nfpm"
		}
		cmd := exec.Command(nfpm, "package", "--config", "tiny.yaml", "--packager", "rpm", "--target", "tiny.rpm")
		cmd.Dir = "testdata"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s package: %v\n%s", nfpm, err, out)
		}
	}
	b, err := os.ReadFile("testdata/tiny.rpm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rpmQuery asks Debian's rpm about a package's bytes, as an admin would;
// without rpm the check is skipped.
func rpmQuery(t *testing.T, b []byte, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm is not installed (make deps installs Debian's rpm): the check by rpm itself is skipped")
	}
	path := filepath.Join(t.TempDir(), "p.rpm")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("rpm", append(args, path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const deptypes = `[%{REQUIRENAME} %{REQUIREFLAGS:deptype}\n]`

func TestMarkPre(t *testing.T) {
	orig := tiny(t)
	p, err := Parse(bytes.Clone(orig))
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.Requires()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"glibc", "systemd", "/usr/bin/systemd-sysusers", "coreutils"} {
		if _, ok := before[n]; !ok {
			t.Fatalf("tiny.rpm does not require %s: %v", n, before)
		}
	}
	if before["/usr/bin/systemd-sysusers"]&SensePre != 0 {
		t.Fatalf("nfpm wrote Requires(pre) already: nfpm can now say it, and this step can go")
	}
	if err := p.MarkPre("/usr/bin/systemd-sysusers", "coreutils"); err != nil {
		t.Fatal(err)
	}
	after, err := p.Requires()
	if err != nil {
		t.Fatal(err)
	}
	for n, f := range before {
		want := f
		if n == "/usr/bin/systemd-sysusers" || n == "coreutils" {
			want |= SensePre
		}
		if after[n] != want {
			t.Errorf("%s: flags %#x, want %#x", n, after[n], want)
		}
	}
	if len(after) != len(before) {
		t.Errorf("dependencies %v, were %v", after, before)
	}
	if len(p.Bytes()) != len(orig) {
		t.Errorf("the package is %d bytes, was %d: nothing may move", len(p.Bytes()), len(orig))
	}
	// Marked again: the same bytes.
	again := bytes.Clone(p.Bytes())
	p2, err := Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.MarkPre("/usr/bin/systemd-sysusers"); err != nil || !bytes.Equal(p2.Bytes(), p.Bytes()) {
		t.Errorf("marked twice: %v, or the bytes changed", err)
	}

	// What rpm itself reads: the contexts, and digests that hold.
	got := rpmQuery(t, p.Bytes(), "-qp", "--nosignature", "--qf", deptypes)
	for _, want := range []string{"/usr/bin/systemd-sysusers pre\n", "coreutils pre,post\n", "systemd manual\n", "glibc manual\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rpm -qp --qf deptype lacks %q:\n%s", want, got)
		}
	}
	if out := rpmQuery(t, p.Bytes(), "-Kv"); strings.Count(out, ": OK") < 3 || strings.Contains(out, "BAD") {
		t.Errorf("rpm -Kv after the change:\n%s", out)
	}
}

func TestMarkPreRefuses(t *testing.T) {
	orig := tiny(t)
	for name, c := range map[string]struct {
		bytes []byte
		names []string
		want  string
	}{
		"not a dependency": {orig, []string{"bash"}, `"bash" is not a dependency`},
		"payload changed":  {append(bytes.Clone(orig[:len(orig)-1]), orig[len(orig)-1]^0xff), []string{"systemd"}, "before the change: signature tag 1004"},
		"header changed": {func() []byte {
			b := bytes.Clone(orig)
			i := bytes.Index(b, []byte("A package for the tests"))
			b[i] = 'a'
			return b
		}(), []string{"systemd"}, "before the change: signature tag 269"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Parse(bytes.Clone(c.bytes))
			if err != nil {
				t.Fatal(err)
			}
			err = p.MarkPre(c.names...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("MarkPre = %v, want an error with %q", err, c.want)
			}
		})
	}
	for name, b := range map[string][]byte{"empty": nil, "a deb": []byte("!<arch>\ndebian-binary   "), "lead only": orig[:96],
		"truncated header": orig[:200]} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzParse: no input makes Parse, Requires or MarkPre panic or write past
// the file.
func FuzzParse(f *testing.F) {
	orig := tiny(f)
	f.Add(orig)
	f.Add(orig[:300])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		_, _ = p.Requires()
		n := len(b)
		_ = p.MarkPre("systemd")
		if len(p.Bytes()) != n {
			t.Fatalf("the package grew from %d to %d bytes", n, len(p.Bytes()))
		}
	})
}
