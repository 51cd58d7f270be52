package kubetest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestParseEnv(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		"what testbed.sh writes": {
			in: "# Kubernetes test bed k8s, written at 2026-11-29T22:00:00Z\n" +
				"STRATA_KUBE_NAME=k8s\nSTRATA_KUBE_NODES=\"kwok-gpu-1 kwok-gpu-2\"\n\nKUBE_BIN=/var/cache/x\n",
			want: map[string]string{"STRATA_KUBE_NAME": "k8s", "STRATA_KUBE_NODES": "kwok-gpu-1 kwok-gpu-2", "KUBE_BIN": "/var/cache/x"},
		},
		"value with =":       {in: "A=b=c\n", want: map[string]string{"A": "b=c"}},
		"empty value":        {in: "A=\n", want: map[string]string{"A": ""}},
		"lone quote kept":    {in: "A=\"\n", want: map[string]string{"A": `"`}},
		"later key wins":     {in: "A=1\nA=2\n", want: map[string]string{"A": "2"}},
		"indented":           {in: "  A=1  \n", want: map[string]string{"A": "1"}},
		"no =":               {in: "A=1\nnot a pair\n", wantErr: `line 2: want KEY=value, got "not a pair"`},
		"no key":             {in: "=1\n", wantErr: "line 1: want KEY=value"},
		"space in key":       {in: "export A=1\n", wantErr: "line 1: want KEY=value"},
		"empty file":         {in: "", want: map[string]string{}},
		"only comments":      {in: "# a\n#b=c\n", want: map[string]string{}},
		"no trailing return": {in: "A=1", want: map[string]string{"A": "1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseEnv(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseEnv: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{"A=1\n", "# c\nB=\"x y\"\n", "=1", "A", "A=\"", "\n\n", "K=v=w\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		kv, err := parseEnv(strings.NewReader(in))
		if err != nil {
			return
		}
		for k, v := range kv {
			if k == "" || strings.ContainsAny(k, " \t\"") {
				t.Errorf("key %q accepted", k)
			}
			if !strings.Contains(in, k+"=") {
				t.Errorf("key %q is not in the input", k)
			}
			if !strings.Contains(in, v) {
				t.Errorf("value %q of %q is not in the input", v, k)
			}
		}
	})
}

const goodEnv = `# Kubernetes test bed k8s
STRATA_KUBE_NAME=k8s
STRATA_KUBECONFIG=/var/lib/strata/testbed/k8s/kubeconfig
STRATA_KUBE_SERVER=https://127.0.0.1:16443
STRATA_KUBE_VERSION=v1.37.2
STRATA_KUBE_NODES="kwok-gpu-1 kwok-gpu-2"
STRATA_KUBE_GPUS_PER_NODE=8
STRATA_KUBE_GPU_RESOURCE=nvidia.com/gpu
STRATA_KUBE_LOGS=/var/lib/strata/testbed/k8s/log
`

func TestLoad(t *testing.T) {
	tests := map[string]struct {
		env     string
		want    Bed
		wantErr string
	}{
		"good": {env: goodEnv, want: Bed{
			Name: "k8s", Kubeconfig: "/var/lib/strata/testbed/k8s/kubeconfig", Server: "https://127.0.0.1:16443",
			Version: "v1.37.2", Nodes: []string{"kwok-gpu-1", "kwok-gpu-2"}, GPUsPerNode: 8,
			GPUResource: "nvidia.com/gpu", Logs: "/var/lib/strata/testbed/k8s/log",
		}},
		"GPU resource defaults": {
			env: strings.Replace(goodEnv, "STRATA_KUBE_GPU_RESOURCE=nvidia.com/gpu\n", "", 1),
			want: Bed{
				Name: "k8s", Kubeconfig: "/var/lib/strata/testbed/k8s/kubeconfig", Server: "https://127.0.0.1:16443",
				Version: "v1.37.2", Nodes: []string{"kwok-gpu-1", "kwok-gpu-2"}, GPUsPerNode: 8,
				GPUResource: "nvidia.com/gpu", Logs: "/var/lib/strata/testbed/k8s/log",
			},
		},
		"a Slurm bed's file": {
			env:     "STRATA_TB_NAME=s2605\nSTRATA_TB_REST_URL=http://127.0.0.1:26102\n",
			wantErr: "no STRATA_KUBECONFIG: not an environment file of test/testbed/k8s/testbed.sh",
		},
		"bad GPU count": {
			env:     strings.Replace(goodEnv, "GPUS_PER_NODE=8", "GPUS_PER_NODE=eight", 1),
			wantErr: `STRATA_KUBE_GPUS_PER_NODE: strconv.Atoi: parsing "eight"`,
		},
		"no nodes": {
			env:     strings.Replace(goodEnv, `STRATA_KUBE_NODES="kwok-gpu-1 kwok-gpu-2"`, `STRATA_KUBE_NODES=""`, 1),
			wantErr: "no STRATA_KUBE_NODES",
		},
		"not KEY=value": {env: goodEnv + "oops\n", wantErr: "line 10: want KEY=value"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(path, []byte(tc.env), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Load: error %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tc.want.dir = filepath.Dir(path) // the lock lives beside the file
			if diff := cmp.Diff(tc.want, *got, cmp.AllowUnexported(Bed{})); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMissingFileSaysHowToStartTheBed(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "env"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "make kube-up") {
		t.Fatalf("Load of a missing file: %v, want ErrNotExist and a hint to run make kube-up", err)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte(goodEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		vars           map[string]string
		wantKubeconfig string
		wantDir        string
		wantErr        error
	}{
		"nothing set":         {vars: map[string]string{"CI": "true"}, wantErr: errNoBed},
		"env file":            {vars: map[string]string{EnvVar: envFile}, wantKubeconfig: "/var/lib/strata/testbed/k8s/kubeconfig", wantDir: dir},
		"env file wins":       {vars: map[string]string{EnvVar: envFile, KubeconfigVar: "/elsewhere/kc"}, wantKubeconfig: "/var/lib/strata/testbed/k8s/kubeconfig", wantDir: dir},
		"kubeconfig only":     {vars: map[string]string{KubeconfigVar: "/elsewhere/kc"}, wantKubeconfig: "/elsewhere/kc", wantDir: "/elsewhere"},
		"env file is missing": {vars: map[string]string{EnvVar: filepath.Join(dir, "nope")}, wantErr: os.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := find(func(k string) string { return tc.vars[k] })
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("find: error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("find: %v", err)
			}
			if b.Kubeconfig != tc.wantKubeconfig || b.dir != tc.wantDir {
				t.Errorf("find: kubeconfig %q, lock dir %q; want %q, %q", b.Kubeconfig, b.dir, tc.wantKubeconfig, tc.wantDir)
			}
		})
	}
}

func TestReadyWhenNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := &rest.Config{Host: "https://" + addr, BearerToken: "x", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	err = Ready(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Ready on a closed port: %v, want an error that says %s does not answer", err, addr)
	}
}

func TestValidPrefix(t *testing.T) {
	tests := map[string]struct {
		prefix string
		ok     bool
	}{
		"plain":             {"bridge", true},
		"with dash":         {"bridge-deploy", true},
		"digits":            {"t1", true},
		"upper case":        {"Bridge", false},
		"trailing dash":     {"bridge-", false},
		"leading dash":      {"-bridge", false},
		"underscore":        {"a_b", false},
		"empty":             {"", false},
		"57 characters":     {strings.Repeat("a", 57), true},
		"58 characters":     {strings.Repeat("a", 58), false},
		"dot (not a label)": {"a.b", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := validPrefix(tc.prefix)
			if (err == nil) != tc.ok {
				t.Errorf("validPrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
			}
		})
	}
}
