package sacctmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a Runner at the exec edge: it records the command and
// answers as told.
type recorder struct {
	path           string
	args, env      []string
	stdin          []byte
	stdout, stderr string
	err            error
}

func (r *recorder) Run(_ context.Context, path string, args, env []string) ([]byte, []byte, error) {
	r.path, r.args, r.env = path, args, env
	return []byte(r.stdout), []byte(r.stderr), r.err
}

// inputRecorder also takes standard input.
type inputRecorder struct{ recorder }

func (r *inputRecorder) RunInput(ctx context.Context, path string, args, env []string, stdin []byte) ([]byte, []byte, error) {
	r.stdin = stdin
	return r.Run(ctx, path, args, env)
}

// TestLoad: a load gives sacctmgr the file on its standard input, with
// -i; a failure carries what it printed, cut short when long; a runner
// that cannot give input runs nothing.
func TestLoad(t *testing.T) {
	file := []byte("Cluster - 'c1'\nParent - 'root'\nAccount - 'a':Description='x'\n")
	r := &inputRecorder{recorder{stdout: " Adding account(s)\n"}}
	s := &Command{Path: "/usr/bin/sacctmgr", Token: func(context.Context) (string, error) { return "tok", nil }, Runner: r}
	if err := s.Load(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.args, " ") != "-i load file=/dev/stdin" || string(r.stdin) != string(file) || !slices.Equal(r.env, []string{"SLURM_JWT=tok"}) {
		t.Errorf("ran %q with %q and input %q", r.args, r.env, r.stdin)
	}

	long := strings.Repeat("  pg0001u00001 pg0001-p01 1 gres/gpu=8\n", 1000)
	r = &inputRecorder{recorder{stdout: long + " Problem with line(4)\n", stderr: " Unknown option: QOS='nosuch'\n", err: errors.New("exit status 1")}}
	s.Runner = r
	err := s.Load(context.Background(), file)
	if err == nil || !strings.Contains(err.Error(), "Unknown option: QOS='nosuch'") || !strings.Contains(err.Error(), "Problem with line(4)") || len(err.Error()) > maxMessage+200 {
		t.Errorf("failed load: error of %d bytes %.300q, want stderr, the end of stdout, at most about %d bytes", len(fmt.Sprint(err)), fmt.Sprint(err), maxMessage)
	}

	plain := &recorder{}
	s.Runner = plain
	if err := s.Load(context.Background(), file); err == nil || !strings.Contains(err.Error(), "standard input") || plain.path != "" {
		t.Errorf("runner without input: error %v, ran %q", err, plain.path)
	}
}

func TestSacctmgrClearQOSPreempt(t *testing.T) {
	for name, tc := range map[string]struct {
		path     string
		token    func(context.Context) (string, error)
		qos      string
		answer   recorder
		wantPath string
		wantArgs string
		wantEnv  []string
		wantErr  string // substrings of the error, "" for none
	}{
		"clears with -i, the token in SLURM_JWT": {
			path: "/opt/slurm/bin/sacctmgr", qos: "train",
			token:    func(context.Context) (string, error) { return "tok", nil },
			answer:   recorder{stdout: " Modified qos...\n  train\n"},
			wantPath: "/opt/slurm/bin/sacctmgr", wantArgs: "-i modify qos where name=train set preempt=",
			wantEnv: []string{"SLURM_CONF=/etc/slurm/slurm.conf", "SLURM_JWT=tok"},
		},
		"no token, default path": {
			qos: "batch", answer: recorder{stdout: " Modified qos...\n"},
			wantPath: "sacctmgr", wantArgs: "-i modify qos where name=batch set preempt=",
			wantEnv: []string{"SLURM_CONF=/etc/slurm/slurm.conf"},
		},
		"a failure carries what sacctmgr printed, stderr first": {
			qos: "train",
			answer: recorder{stdout: "  Nothing modified\n", stderr: "sacctmgr: error: Sending PersistInit msg: Protocol authentication error\n",
				err: errors.New("exit status 1")},
			wantPath: "sacctmgr", wantArgs: "-i modify qos where name=train set preempt=",
			wantEnv: []string{"SLURM_CONF=/etc/slurm/slurm.conf"},
			wantErr: "exit status 1: sacctmgr: error: Sending PersistInit msg: Protocol authentication error\nNothing modified",
		},
		"a token that cannot be read runs nothing": {
			qos:     "train",
			token:   func(context.Context) (string, error) { return "", errors.New("no token file") },
			wantErr: "token: no token file",
		},
		"a name sacctmgr would read as more than a name runs nothing": {
			qos: "train set priority=1", wantErr: "not a QOS name",
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := tc.answer
			s := &Command{Path: tc.path, Token: tc.token, Env: []string{"SLURM_CONF=/etc/slurm/slurm.conf"}, Runner: &r}
			err := s.ClearQOSPreempt(context.Background(), tc.qos)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if r.path != tc.wantPath || strings.Join(r.args, " ") != tc.wantArgs || !slices.Equal(r.env, tc.wantEnv) {
				t.Errorf("ran %q %q with %q, want %q %q with %q", r.path, r.args, r.env, tc.wantPath, tc.wantArgs, tc.wantEnv)
			}
		})
	}
}

// TestExecRunner runs a real program: a script standing in for sacctmgr
// that prints its arguments and SLURM_JWT, and fails when asked to.
func TestExecRunner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sacctmgr")
	script := "#!/bin/sh\necho \"args=$* jwt=$SLURM_JWT\"\necho oops >&2\n[ \"$3\" = fail ] && exit 3\nexit 0\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errb, err := ExecRunner{}.Run(context.Background(), path, []string{"-i", "modify", "ok"}, []string{"SLURM_JWT=abc"})
	if err != nil || string(out) != "args=-i modify ok jwt=abc\n" || string(errb) != "oops\n" {
		t.Errorf("run: %q %q %v", out, errb, err)
	}
	cat := filepath.Join(t.TempDir(), "cat")
	if err := os.WriteFile(cat, []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, _, err := (ExecRunner{}).RunInput(context.Background(), cat, nil, nil, []byte("a line\n")); err != nil || string(out) != "a line\n" {
		t.Errorf("run with input: %q %v", out, err)
	}
	s := &Command{Path: path}
	if _, err := s.run(context.Background(), "-i", "modify", "fail"); err == nil || !strings.Contains(err.Error(), "exit status 3: oops") {
		t.Errorf("failing run: %v, want exit status 3 and its stderr", err)
	}
	s.Path = filepath.Join(t.TempDir(), "missing")
	if _, err := s.run(context.Background(), "modify"); err == nil || !strings.Contains(err.Error(), "set --sacctmgr to its path") {
		t.Errorf("missing sacctmgr: %v, want a hint", err)
	}
}
