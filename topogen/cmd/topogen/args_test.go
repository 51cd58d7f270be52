package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestArgs: every verb takes the file it reads as an argument as well as a
// flag, a file that is not there fails naming it, and an argument the verb
// does not take is a usage error that says what it takes.
func TestArgs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "topogen.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: strata/v1\nkind: TopogenConfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := filepath.Join(dir, "topology.conf")
	if err := os.WriteFile(valid, []byte("SwitchName=s1 Nodes=n[1-2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	dump := ibData + "X5.topofile"
	fabric := []string{"--guid-map", ibData + "X5.map", "--no-node-check", "--topology-file", filepath.Join(dir, "live.conf")}
	smi := "../../internal/discover/nvml/testdata/smi/tesla-t4.xml"
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in the error
	}{
		"render: dump as argument":     {args: append([]string{"render", dump}, fabric...), wantOut: "SwitchName=hoibp0013"},
		"render: dump after flags":     {args: append(append([]string{"render"}, fabric...), dump), wantOut: "SwitchName=hoibp0013"},
		"render: missing dump":         {args: append([]string{"render", missing}, fabric...), wantCode: exitFailure, wantErr: missing},
		"render: dump and flag differ": {args: []string{"render", "--ibnetdiscover", dump, missing}, wantCode: cliexit.ExitUsage, wantErr: "disagree"},
		"render: two dumps": {args: []string{"render", dump, dump}, wantCode: cliexit.ExitUsage,
			wantErr: `render: unexpected argument "` + dump + `": render takes at most 1 argument, [DUMP]`},
		"render: --nodes names no node": {args: []string{"render", dump, "--guid-map", ibData + "X5.map", "--nodes", ""},
			wantCode: exitFailure, wantErr: "--nodes names no node"},
		"plan: dump as argument":  {args: append([]string{"plan", dump}, fabric...), wantCode: exitChanges, wantOut: "+ SwitchName=hoibp0013"},
		"plan: missing dump":      {args: append([]string{"plan", missing}, fabric...), wantCode: exitFailure, wantErr: missing},
		"plan: extra":             {args: []string{"plan", dump, "x"}, wantCode: cliexit.ExitUsage, wantErr: `plan: unexpected argument "x"`},
		"apply: missing dump":     {args: append([]string{"apply", missing}, fabric...), wantCode: exitFailure, wantErr: missing},
		"apply: extra":            {args: []string{"apply", dump, "x"}, wantCode: cliexit.ExitUsage, wantErr: `apply: unexpected argument "x"`},
		"validate: file":          {args: []string{"validate", valid, "--no-node-check"}, wantOut: valid + " is valid."},
		"validate: file by flag":  {args: []string{"validate", "--no-node-check", "--file", valid}, wantOut: valid + " is valid."},
		"validate: flag after it": {args: []string{"validate", valid, "--nodes", "n[1-2]"}, wantOut: valid + " is valid."},
		"validate: missing file":  {args: []string{"validate", missing}, wantCode: exitFailure, wantErr: missing},
		"validate: no file": {args: []string{"validate"}, wantCode: cliexit.ExitUsage,
			wantErr: "validate: missing FILE: give it as an argument or as --file"},
		"validate: two files": {args: []string{"validate", valid, valid}, wantCode: cliexit.ExitUsage,
			wantErr: "validate takes 1 argument, FILE (usage: topogen validate [options] FILE)"},
		"collect: nvidia-smi file":   {args: []string{"collect", "--hostname", "n1", smi}, wantOut: `"hostname": "n1"`},
		"collect: missing file":      {args: []string{"collect", "--hostname", "n1", missing}, wantCode: exitFailure, wantErr: missing},
		"collect: extra":             {args: []string{"collect", smi, "x"}, wantCode: cliexit.ExitUsage, wantErr: `collect: unexpected argument "x"`},
		"check-config: file":         {args: []string{"check-config", cfg}, wantOut: cfg + " is valid"},
		"check-config: missing file": {args: []string{"check-config", missing}, wantCode: exitFailure, wantErr: missing},
		"check-config: extra": {args: []string{"check-config", cfg, "x"}, wantCode: cliexit.ExitUsage,
			wantErr: "check-config takes at most 1 argument, [CONFIG]"},
		"unknown verb": {args: []string{"rendr"}, wantCode: cliexit.ExitUsage, wantErr: `unknown command "rendr": want one of render, plan,`},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := []string{"topogen", "--log-level", "error"}
			if !strings.HasPrefix(name, "check-config") {
				args = append(args, "-c", cfg)
			}
			err := run(t.Context(), append(args, tc.args...), &out, &errb)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s%s", code, err, tc.wantCode, out.String(), errb.String())
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out.String())
			}
		})
	}
}

// TestCheckConfigDefault: without a file, check-config reads the default
// one, and a missing default means the built-in defaults, which it says
// plainly (never "is valid" of a file it did not read); a missing file
// that was named is an error (above).
func TestCheckConfigDefault(t *testing.T) {
	if _, err := os.Stat("/etc/strata/topogen.yaml"); err == nil {
		t.Skip("this host has /etc/strata/topogen.yaml")
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"topogen", "check-config"}, &out, &out); err != nil {
		t.Fatalf("check-config: %v\n%s", err, out.String())
	}
	if want := "No configuration file was read (/etc/strata/topogen.yaml does not exist): topogen runs on its built-in defaults: format tree"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("got %q, want it to start with %q", out.String(), want)
	}
}

// TestCheckConfigFiles: an all-comment file is said to set nothing; a file
// that sets keys without apiVersion and kind is refused, as the example
// file says they are required.
func TestCheckConfigFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		content  string
		wantCode int
		want     string // in stdout, or in the error
	}{
		"all comments": {content: "# apiVersion: strata/v1\n# kind: TopogenConfig\n", want: " sets nothing (it is empty or all comments): topogen runs on its built-in defaults"},
		"no apiVersion and kind": {content: "slurm:\n  format: block\n", wantCode: exitFailure,
			want: "missing key apiVersion in the topogen config (hint: add apiVersion: strata/v1 at the top of the file)"},
		"no kind": {content: "apiVersion: strata/v1\nslurm:\n  format: block\n", wantCode: exitFailure,
			want: "missing key kind in the topogen config (hint: add kind: TopogenConfig at the top of the file)"},
		"both": {content: "apiVersion: strata/v1\nkind: TopogenConfig\n", want: " is valid: format tree"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "topogen.yaml")
			if err := os.WriteFile(cfg, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"topogen", "check-config", cfg}, &out, &errb)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.wantCode)
			}
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
