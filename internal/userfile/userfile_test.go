package userfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const secret = "s3cr3t-token-do-not-print"

// resolvers are both ways to resolve beneath a root: each case runs with
// each, so the walk is tested on a kernel that has openat2 too.
var resolvers = map[string]resolver{"openat2 or fallback": resolveBeneath, "walk": walk}

// tree lays out a job's folder (root) beside a folder it must not reach
// (outside, holding a secret), as a hostile user would arrange it.
func tree(t testing.TB) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "job"), filepath.Join(base, "etc")
	for _, d := range []string{root, outside, filepath.Join(root, "sub"), filepath.Join(root, "adir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string) {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "token"), secret)
	write(filepath.Join(root, "spec.yaml"), "name: a\n")
	write(filepath.Join(root, "sub", "spec.yaml"), "name: b\n")
	write(filepath.Join(root, "exact"), strings.Repeat("x", 64))
	write(filepath.Join(root, "big"), strings.Repeat("x", 65))
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("/dev/zero", "zero")
	link(filepath.Join(outside, "token"), "token")
	link("spec.yaml", "inside-link")
	link(outside, "linkdir")
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func TestReadFile(t *testing.T) {
	me := Policy{UID: uint32(os.Getuid()), MaxSize: 64}
	tests := map[string]struct {
		name    string
		policy  *Policy // nil: me
		want    string
		wantErr error
	}{
		"a regular file":                        {name: "spec.yaml", want: "name: a\n"},
		"in a subfolder":                        {name: "sub/spec.yaml", want: "name: b\n"},
		"exactly the cap":                       {name: "exact", want: strings.Repeat("x", 64)},
		"one byte over the cap":                 {name: "big", wantErr: ErrTooLarge},
		"a FIFO, refused at once":               {name: "fifo", wantErr: ErrNotRegular},
		"a link to /dev/zero":                   {name: "zero", wantErr: ErrSymlink},
		"a link to a secret":                    {name: "token", wantErr: ErrSymlink},
		"even a link that stays inside":         {name: "inside-link", wantErr: ErrSymlink},
		"a folder":                              {name: "adir", wantErr: ErrNotRegular},
		"climbing out by ..":                    {name: "../etc/token", wantErr: ErrEscapes},
		".. in the middle":                      {name: "sub/../../etc/token", wantErr: ErrEscapes},
		"through a linked parent folder":        {name: "linkdir/token", wantErr: ErrSymlink},
		"an absolute name":                      {name: "/etc/passwd", wantErr: ErrName},
		"an empty component":                    {name: "sub//spec.yaml", wantErr: ErrName},
		"missing":                               {name: "nope.yaml", wantErr: fs.ErrNotExist},
		"missing folder":                        {name: "nope/spec.yaml", wantErr: fs.ErrNotExist},
		"another owner than the one asked for":  {name: "spec.yaml", policy: &Policy{UID: uint32(os.Getuid()) + 1}, wantErr: ErrOwner},
		"any owner, when the caller says so":    {name: "spec.yaml", policy: &Policy{UID: uint32(os.Getuid()) + 1, AnyOwner: true}, want: "name: a\n"},
		"the default cap":                       {name: "big", policy: &Policy{UID: uint32(os.Getuid())}, want: strings.Repeat("x", 65)},
		"a folder is never read, even if asked": {name: "adir", policy: &Policy{UID: uint32(os.Getuid()), AllowDir: true}, wantErr: ErrNotRegular},
		"a .. that would stay inside":           {name: "sub/../fifo", wantErr: ErrEscapes},
	}
	for rname, resolve := range resolvers {
		root, _ := tree(t)
		for name, tc := range tests {
			t.Run(rname+"/"+name, func(t *testing.T) {
				p := me
				if tc.policy != nil {
					p = *tc.policy
				}
				var (
					got  []byte
					err  error
					done = make(chan struct{})
				)
				go func() { got, err = readFile(root, tc.name, p, resolve); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("ReadFile(%q) still blocks after 10s", tc.name)
				}
				if tc.wantErr == nil {
					if err != nil || string(got) != tc.want {
						t.Fatalf("ReadFile(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
					}
					return
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ReadFile(%q) = %q, %v; want %v", tc.name, got, err, tc.wantErr)
				}
				var ue *Error
				if !errors.As(err, &ue) || ue.Path != filepath.Join(root, tc.name) {
					t.Errorf("error %v does not name the path %s", err, filepath.Join(root, tc.name))
				}
				if got != nil {
					t.Errorf("a refused file returned %d bytes", len(got))
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "xxxx") {
					t.Errorf("the error quotes the file: %v", err)
				}
			})
		}
	}
}

// A file of another user in the job's folder (a hard link to a secret
// looks just like it) is refused: it needs root to give a file away.
func TestReadFileOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another uid; run the unit tests as root to check this case")
	}
	for rname, resolve := range resolvers {
		t.Run(rname, func(t *testing.T) {
			root, outside := tree(t)
			if err := os.Chown(filepath.Join(outside, "token"), 12345, 12345); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(outside, "token"), filepath.Join(root, "hard")); err != nil {
				t.Fatal(err)
			}
			got, err := readFile(root, "hard", Policy{UID: 1000}, resolve)
			if !errors.Is(err, ErrOwner) || got != nil {
				t.Fatalf("ReadFile(hard link of uid 12345's file) = %q, %v; want ErrOwner", got, err)
			}
			if want := "belongs to uid 12345, not uid 1000"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
				t.Errorf("error %q: want it to say %q and not to quote the file", err, want)
			}
			if got, err := readFile(root, "hard", Policy{UID: 12345}, resolve); err != nil || string(got) != secret {
				t.Errorf("ReadFile as its owner = %q, %v", got, err)
			}
		})
	}
}

// A file whose size fstat does not tell (procfs says 0) is still capped
// as it is read.
func TestReadFileCapsWhatItReads(t *testing.T) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || len(data) < 2 {
		t.Skip("no /proc/self/mountinfo to read")
	}
	got, err := ReadFile("/proc/self", "mountinfo", Policy{AnyOwner: true, MaxSize: 1})
	if !errors.Is(err, ErrTooLarge) || got != nil {
		t.Fatalf("ReadFile(mountinfo, cap 1) = %d bytes, %v; want ErrTooLarge", len(got), err)
	}
}

func TestOpenFolder(t *testing.T) {
	root, _ := tree(t)
	me := Policy{UID: uint32(os.Getuid()), AllowDir: true}
	f, err := Open(root, "adir", me)
	if err != nil {
		t.Fatalf("Open(folder, AllowDir) = %v", err)
	}
	f.Close()
	f, err = Open(root, ".", me)
	if err != nil {
		t.Fatalf("Open(root itself, AllowDir) = %v", err)
	}
	f.Close()
	if _, err := Open(root, ".", Policy{UID: me.UID}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(root itself) without AllowDir = %v, want ErrNotRegular", err)
	}
	if _, err := Open(root, "adir", Policy{UID: me.UID}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(folder) without AllowDir = %v, want ErrNotRegular", err)
	}
	if _, err := Open(root, "fifo", me); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("Open(fifo, AllowDir) = %v, want ErrNotRegular naming a pipe", err)
	}
	if _, err := Open(filepath.Join(root, "spec.yaml"), "x", me); err == nil || !strings.Contains(err.Error(), "open the folder") {
		t.Errorf("Open under a file as root = %v", err)
	}
}
