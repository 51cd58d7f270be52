package sessionproxy

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// TestMain lets this test binary stand in for jupyter-lab, ttyd and
// code-server (run under those names with STRATA_FAKE_SERVER set): a
// server that takes the real programs' options for its address, base
// path and secret, and answers only with that secret.
func TestMain(m *testing.M) {
	if os.Getenv("STRATA_FAKE_SERVER") != "" {
		if err := fakeServer(filepath.Base(os.Args[0]), os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeServer(name string, args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var addr, port, base, cred string
	var debug int
	var auth func(r *http.Request) bool
	switch name {
	case "jupyter-lab":
		fs.StringVar(&addr, "ip", "", "")
		fs.StringVar(&port, "port", "", "")
		fs.StringVar(&base, "ServerApp.base_url", "/", "")
		fs.Bool("no-browser", false, "")
		fs.Int("port-retries", 0, "")
		for _, o := range []string{"ServerApp.allow_remote_access", "ServerApp.trust_xheaders", "ServerApp.root_dir"} {
			fs.String(o, "", "")
		}
		auth = func(r *http.Request) bool {
			return r.Header.Get("Authorization") == "token "+os.Getenv("JUPYTER_TOKEN")
		}
	case "ttyd":
		fs.StringVar(&addr, "interface", "", "")
		fs.StringVar(&port, "port", "", "")
		fs.StringVar(&base, "base-path", "/", "")
		fs.StringVar(&cred, "credential", "", "")
		fs.Bool("writable", false, "")
		fs.Bool("check-origin", false, "")
		fs.Int("ping-interval", 0, "")
		fs.IntVar(&debug, "debug", 7, "")
		auth = func(r *http.Request) bool {
			return cred != "" && r.Header.Get("Authorization") == "Basic "+base64.StdEncoding.EncodeToString([]byte(cred))
		}
	case "code-server":
		var bind string
		fs.StringVar(&bind, "bind-addr", "", "")
		fs.String("auth", "", "")
		fs.Bool("disable-telemetry", false, "")
		fs.Bool("disable-update-check", false, "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var err error
		if addr, port, err = net.SplitHostPort(bind); err != nil {
			return err
		}
		auth = func(r *http.Request) bool {
			c, err := r.Cookie("code-server-session")
			return err == nil && len(os.Getenv("HASHED_PASSWORD")) == 64 && c.Value == os.Getenv("HASHED_PASSWORD")
		}
	default:
		return fmt.Errorf("no fake server %s", name)
	}
	if name != "code-server" {
		if err := fs.Parse(args); err != nil {
			return err
		}
	}
	if debug&4 != 0 && cred != "" {
		// What ttyd prints at its default log level (notices on).
		fmt.Fprintln(os.Stderr, "N:   credential:", base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	base = strings.TrimSuffix(base, "/") + "/"
	l, err := net.Listen("tcp", net.JoinHostPort(addr, port))
	if err != nil {
		return err
	}
	return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !auth(r):
			http.Error(w, "forbidden", http.StatusForbidden)
		case !strings.HasPrefix(r.URL.Path, base):
			http.NotFound(w, r)
		default:
			_, _ = fmt.Fprintf(w, "%s %s", name, strings.TrimPrefix(r.URL.Path, base))
		}
	}))
}

// syncBuffer is a job's output, written by its process while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShippedSessionScripts runs each shipped session template's script
// as its job would (a fake Slurm environment, the fake server under the
// real program's name), reads the connection file it writes and reaches
// the server through the proxy.
func TestShippedSessionScripts(t *testing.T) {
	if _, err := exec.LookPath("getent"); err != nil {
		t.Skip("no getent")
	}
	set, err := templates.Load("../../../etc/strata/templates")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, n := range []string{"jupyter-lab", "ttyd", "code-server"} {
		if err := os.Symlink(self, filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"jupyterlab": "jupyter-lab", "terminal": "ttyd", "vscode": "code-server"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			spec, err := set.Render(name, nil, templates.User{Name: "alice", WorkDir: dir,
				Environment: []string{"STRATA_SESSION_ID=s1", "STRATA_SESSION_DIR=" + filepath.Join(dir, "session")}})
			if err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "job.sh")
			if err := os.WriteFile(script, []byte(spec.Script), 0o700); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", script)
			cmd.Dir = dir
			cmd.Env = append(spec.Environment, "PATH="+bin+":"+os.Getenv("PATH"), "SLURMD_NODENAME=localhost", "SLURM_JOB_ID=42",
				"STRATA_FAKE_SERVER=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
			job := session.Job{State: "RUNNING", Nodes: []string{"localhost"}}
			var target session.Target
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				target, err = session.Resolve(filepath.Join(dir, "session"), uint32(os.Getuid()), job, session.Pin{})
				if err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatalf("no usable connection file: %v\n%s", err, out)
			}
			st, err := os.Stat(filepath.Join(dir, "session", session.FileName))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("connection file mode %v, %v; want 0600", st.Mode(), err)
			}
			p, err := New(Config{Lookup: func(*http.Request, string) (session.Target, error) { return target, nil }})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(p)
			defer front.Close()
			res, err := http.Get(front.URL + "/v1/sessions/s1/proxy/api/status")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(body) != want+" api/status" {
				t.Errorf("through the proxy: %d %q, want 200 from %s at the session's base path\n%s", res.StatusCode, body, want, out)
			}
			if strings.Contains(out.String(), target.Secret) ||
				strings.Contains(out.String(), base64.StdEncoding.EncodeToString([]byte(ttydUser+":"+target.Secret))) {
				t.Errorf("the job's output holds the server's secret:\n%s", out)
			}
			direct, err := http.Get("http://" + target.Addr() + "/v1/sessions/s1/proxy/api/status")
			if err == nil {
				direct.Body.Close()
				if direct.StatusCode != http.StatusForbidden {
					t.Errorf("without the proxy's secret: %d, want 403", direct.StatusCode)
				}
			}
		})
	}
}
