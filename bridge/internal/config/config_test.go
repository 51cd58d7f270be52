package config

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/strictyaml/strictyamltest"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/*.bad.yaml")

// TestFiles: each testdata/*.good.yaml loads; each *.bad.yaml fails with
// the diagnostics of its .golden file, all at once, each with its line
// and column (-update rewrites them).
func TestFiles(t *testing.T) {
	strictyamltest.Files(t, "testdata", *update, func(path string) error {
		_, err := Load(path)
		return err
	})
}

// TestMinimal: a file that names only the shared file system gets every
// other value from Default.
func TestMinimal(t *testing.T) {
	cfg, err := Load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Models.AllowedRoots = []string{"/shared"}
	want.Models.Mount.Path, want.Models.Mount.Root = "/shared", "/shared"
	if diff := cmp.Diff(&want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The contract's defaults, written out.
	if cfg.Slurm.PollInterval != 30*time.Second || cfg.Kubernetes.FieldManager != "strata-bridge" ||
		cfg.Kubernetes.RolloutTimeout != 5*time.Minute || cfg.Policy.ServingFile != "/etc/strata/rendered/serving.json" ||
		cfg.Runtimes.Dir != "/etc/strata/bridge/runtimes" || cfg.Defaults != (servespec.Defaults{Runtime: "generic", Replicas: 1}) ||
		cfg.Store.Path != "/var/lib/strata/bridge/bridge.db" || cfg.Listen != "127.0.0.1:9464" || cfg.KServe ||
		cfg.Spread.TopologyKey != "kubernetes.io/hostname" || cfg.Models.Mount.Kind != MountHostPath {
		t.Errorf("defaults = %+v", cfg)
	}
}

// TestShippedExample: etc/strata/bridge.yaml loads, and is the defaults
// with every key written out plus the shared file system of the example
// site; its runtimes folder is the one shipped beside it.
func TestShippedExample(t *testing.T) {
	cfg, err := Load("../../../etc/strata/bridge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Models.AllowedRoots = []string{"/shared/projects", "/shared/tenants"}
	want.Models.Mount.Path, want.Models.Mount.Root = "/shared", "/shared"
	if diff := cmp.Diff(&want, cfg); diff != "" {
		t.Errorf("etc/strata/bridge.yaml differs from the defaults (-want +got):\n%s", diff)
	}
	for _, name := range []string{"vllm", "triton", "generic"} {
		if _, err := os.Stat(filepath.Join("../../..", cfg.Runtimes.Dir, name+".yaml")); err != nil {
			t.Errorf("runtime %s is not shipped: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join("../../..", cfg.Runtimes.Dir, cfg.Defaults.Runtime+".yaml")); err != nil {
		t.Errorf("the default runtime is not shipped: %v", err)
	}
}

func TestListenLoopback(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:9464": true, "127.0.0.2:9464": true, "[::1]:9464": true, "localhost:9464": true,
		"0.0.0.0:9464": false, "[::]:9464": false, "10.0.0.5:9464": false, "bridge.example.org:9464": false, "nonsense": false,
	} {
		c := Config{Listen: listen}
		if got := c.ListenLoopback(); got != want {
			t.Errorf("ListenLoopback(%q) = %v, want %v", listen, got, want)
		}
	}
}

func TestUnder(t *testing.T) {
	for name, tc := range map[string]struct {
		path, root string
		want       bool
	}{
		"itself":           {"/shared", "/shared", true},
		"below":            {"/shared/projects/llm", "/shared", true},
		"a longer sibling": {"/sharedx/m", "/shared", false},
		"above":            {"/", "/shared", false},
		"elsewhere":        {"/home/alice", "/shared", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Under(tc.path, tc.root); got != tc.want {
				t.Errorf("Under(%q, %q) = %v", tc.path, tc.root, got)
			}
		})
	}
}
