package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func file(kind, host string, port int, sec string) string {
	return fmt.Sprintf(`{"version":1,"kind":%q,"host":%q,"port":%d,"secret":%q,"started":"2026-12-01T10:00:00Z"}`, kind, host, port, sec)
}

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		data    string
		want    Connection
		wantErr error
		wantMsg string
	}{
		"jupyterlab": {data: file("jupyterlab", "gpu01", 41234, secret),
			want: Connection{Version: 1, Kind: JupyterLab, Host: "gpu01", Port: 41234, Secret: secret, Started: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}},
		"ttyd with newline": {data: file("ttyd", "gpu-a.b_c", 1024, secret) + "\n",
			want: Connection{Version: 1, Kind: TTYD, Host: "gpu-a.b_c", Port: 1024, Secret: secret, Started: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}},
		"empty":          {data: "", wantErr: ErrFormat, wantMsg: "empty"},
		"syntax":         {data: `{"version":1,` + secret, wantErr: ErrFormat, wantMsg: "invalid JSON"},
		"unknown field":  {data: strings.Replace(file("ttyd", "gpu01", 2000, secret), `"version"`, `"extra":1,"version"`, 1), wantErr: ErrFormat, wantMsg: "unknown field"},
		"secret as port": {data: strings.Replace(file("ttyd", "gpu01", 2000, secret), `"port":2000`, `"port":"`+secret+`"`, 1), wantErr: ErrFormat, wantMsg: "port"},
		"trailing":       {data: file("ttyd", "gpu01", 2000, secret) + "{}", wantErr: ErrFormat, wantMsg: "after"},
		"version":        {data: strings.Replace(file("ttyd", "gpu01", 2000, secret), `"version":1`, `"version":2`, 1), wantErr: ErrFormat, wantMsg: "version"},
		"kind":           {data: file("rstudio", "gpu01", 2000, secret), wantErr: ErrFormat, wantMsg: "kind"},
		"host url":       {data: file("ttyd", "http://evil/", 2000, secret), wantErr: ErrFormat, wantMsg: "host"},
		"host colon":     {data: file("ttyd", "gpu01:22", 2000, secret), wantErr: ErrFormat, wantMsg: "host"},
		"privileged":     {data: file("ttyd", "gpu01", 22, secret), wantErr: ErrFormat, wantMsg: "port"},
		"port too big":   {data: file("ttyd", "gpu01", 70000, secret), wantErr: ErrFormat, wantMsg: "port"},
		"no start":       {data: strings.Replace(file("ttyd", "gpu01", 2000, secret), `"2026-12-01T10:00:00Z"`, `"0001-01-01T00:00:00Z"`, 1), wantErr: ErrFormat, wantMsg: "started"},
		"bad start":      {data: strings.Replace(file("ttyd", "gpu01", 2000, secret), `2026-12-01T10:00:00Z`, `yesterday`, 1), wantErr: ErrFormat, wantMsg: "started"},
		"no secret":      {data: file("ttyd", "gpu01", 2000, ""), wantErr: ErrNoSecret},
		"short secret":   {data: file("ttyd", "gpu01", 2000, "abc"), wantErr: ErrNoSecret},
		"secret space":   {data: file("ttyd", "gpu01", 2000, secret+" x"), wantErr: ErrNoSecret},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Parse: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantMsg)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "evil") {
					t.Errorf("error quotes the file: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if strings.Contains(got.String(), secret) || strings.Contains(fmt.Sprint(got.LogValue()), secret) {
				t.Errorf("String or LogValue shows the secret")
			}
		})
	}
}

func write(t *testing.T, dir, name, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	uid := uint32(os.Getuid())
	good := file("jupyterlab", "gpu01", 41234, secret)
	for name, tc := range map[string]struct {
		setup   func(t *testing.T, dir string)
		uid     uint32
		wantErr error
	}{
		"good":       {setup: func(t *testing.T, dir string) { write(t, dir, FileName, good, 0o600) }, uid: uid},
		"read-only":  {setup: func(t *testing.T, dir string) { write(t, dir, FileName, good, 0o400) }, uid: uid},
		"not yet":    {setup: func(t *testing.T, dir string) {}, uid: uid, wantErr: ErrNoFile},
		"group mode": {setup: func(t *testing.T, dir string) { write(t, dir, FileName, good, 0o640) }, uid: uid, wantErr: ErrMode},
		"world mode": {setup: func(t *testing.T, dir string) { write(t, dir, FileName, good, 0o604) }, uid: uid, wantErr: ErrMode},
		"other user": {setup: func(t *testing.T, dir string) { write(t, dir, FileName, good, 0o600) }, uid: uid + 1},
		"symlink": {setup: func(t *testing.T, dir string) {
			write(t, dir, "real.json", good, 0o600)
			if err := os.Symlink("real.json", filepath.Join(dir, FileName)); err != nil {
				t.Fatal(err)
			}
		}, uid: uid},
		"too large": {setup: func(t *testing.T, dir string) {
			write(t, dir, FileName, good+strings.Repeat(" ", MaxBytes), 0o600)
		}, uid: uid, wantErr: ErrFormat},
		"no secret": {setup: func(t *testing.T, dir string) { write(t, dir, FileName, file("ttyd", "gpu01", 2000, ""), 0o600) }, uid: uid, wantErr: ErrNoSecret},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			c, err := Read(dir, tc.uid)
			switch {
			case name == "other user" || name == "symlink":
				if err == nil {
					t.Fatalf("Read accepted it: %v", c)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("Read: %v, want %v", err, tc.wantErr)
			case err == nil && c.Secret != secret:
				t.Fatalf("Read: %+v", c)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error quotes the secret: %v", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	c := Connection{Version: 1, Kind: TTYD, Host: "gpu02", Port: 40000, Secret: secret, Started: time.Now()}
	running := Job{State: "RUNNING", Nodes: []string{"gpu01", "gpu02"}}
	for name, tc := range map[string]struct {
		c       Connection
		job     Job
		pin     Pin
		wantErr error
	}{
		"running":      {c: c, job: running},
		"pinned":       {c: c, job: running, pin: Pin{Host: "gpu02", Port: 40000}},
		"pending":      {c: c, job: Job{State: "PENDING"}, wantErr: ErrNotRunning},
		"completed":    {c: c, job: Job{State: "COMPLETED", Nodes: []string{"gpu02"}}, wantErr: ErrNotRunning},
		"other node":   {c: c, job: Job{State: "RUNNING", Nodes: []string{"gpu01"}}, wantErr: ErrHost},
		"moved node":   {c: c, job: running, pin: Pin{Host: "gpu01", Port: 40000}, wantErr: ErrHost},
		"other port":   {c: c, job: running, pin: Pin{Host: "gpu02", Port: 40001}, wantErr: ErrPort},
		"no secret":    {c: Connection{Kind: TTYD, Host: "gpu02", Port: 40000}, job: running, wantErr: ErrNoSecret},
		"prefix match": {c: Connection{Kind: TTYD, Host: "gpu0", Port: 40000, Secret: secret}, job: running, wantErr: ErrHost},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Check(tc.c, tc.job, tc.pin)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Check: %v, want %v", err, tc.wantErr)
			}
			if err == nil && (got.Addr() != "gpu02:40000" || got.Secret != secret) {
				t.Errorf("Check = %+v", got)
			}
			if strings.Contains(fmt.Sprint(err, got, got.LogValue()), secret) {
				t.Errorf("the secret shows in an error, String or LogValue")
			}
		})
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, FileName, file("jupyterlab", "gpu01", 41234, secret), 0o600)
	tg, err := Resolve(dir, uint32(os.Getuid()), Job{State: "RUNNING", Nodes: []string{"gpu01"}}, Pin{})
	if err != nil || tg.Addr() != "gpu01:41234" || tg.Kind != JupyterLab {
		t.Fatalf("Resolve = %+v, %v", tg, err)
	}
	if _, err := Resolve(dir, uint32(os.Getuid()), Job{State: "COMPLETED"}, Pin{}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Resolve of a finished job: %v", err)
	}
}
