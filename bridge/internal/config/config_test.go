package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
)

// fileCases: each testdata/*.good.yaml loads; each *.bad.yaml fails with
// exactly the problems listed, all at once.
var fileCases = map[string][]string{
	"minimal.good.yaml": nil,
	"nfs.good.yaml":     nil,
	"pvc.good.yaml":     nil,
	// yaml.v3 reports every unknown key, with its line.
	"typo.bad.yaml": {
		"unmarshal errors:",
		"  line 5: field rot not found in type config.Mount",
		"  line 6: field kserv not found in type config.Config",
	},
	"wrong-type.bad.yaml": {
		"unmarshal errors:",
		"  line 2: cannot unmarshal !!str `soon` into time.Duration",
		"  line 4: cannot unmarshal !!str `/shared` into []string",
	},
	// No default can name the site's shared file system.
	"empty.bad.yaml": {
		`models.mount.root: "": required, an absolute clean path other than /: the shared file system's root as Slurm jobs see it (such as /shared)`,
		"models.allowed_roots: required: the folders models may be served from (such as /shared/projects)",
		"models.mount.path: required: where models.mount.root is mounted on the GPU nodes",
	},
	"bad-kind.bad.yaml": {`models.mount.kind: "cephfs": want hostPath, nfs or pvc`},
	"nfs-without-server.bad.yaml": {
		"models.mount.server: required for nfs: the NFS server's host name or address",
		`models.mount.claim_name: "x" is for kind pvc only; this mount is nfs`,
	},
	"pvc-with-path.bad.yaml": {
		`models.mount.claim_name: "Shared_FS" is not a PersistentVolumeClaim name`,
		`models.mount.path: "/export" is for kind hostPath and nfs only; this mount is pvc`,
	},
	// One wrong value per key.
	"every-problem.bad.yaml": {
		`apiVersion: "strata/v2" is not supported: use strata/v1`,
		`kind: "Bridge": want BridgeConfig`,
		`slurm.url: "slurmrestd:6820" is not an http:// or https:// URL of slurmrestd`,
		"slurm.user: required: the Slurm user the bridge reads jobs as (an operator, to see every user's jobs)",
		`slurm.token_file: "bridge.jwt" is not an absolute clean path`,
		"slurm.poll_interval: 1s is shorter than 5s: slurmctld would answer a poll every few seconds for nothing",
		`kubernetes.kubeconfig: "~/.kube/config" is not an absolute clean path`,
		"kubernetes.field_manager: required: the server-side apply field manager, such as strata-bridge",
		"kubernetes.rollout_timeout: 1s is shorter than 10s: a model server takes longer than that to load",
		"policy.serving_file: required: serving.json, which strata-policy render writes",
		`models.allowed_roots[0]: "/home" is not under models.mount.root /shared: pods could not reach its models`,
		`models.allowed_roots[1]: "/shared/../etc" is not an absolute clean path`,
		`models.host_root: "mnt/cluster" is not an absolute clean path other than /: where this host sees the Slurm side's / (leave it out when the paths are the same)`,
		`models.mount.path: "shared" is not an absolute clean path`,
		`models.mount.server: "nfs1" is for kind nfs only; this mount is hostPath`,
		`models.mount.claim_name: "models" is for kind pvc only; this mount is hostPath`,
		"runtimes.dir: required: the folder of the runtime templates (<name>.yaml)",
		`defaults.runtime: runtime "vLLM" is not a runtime template name (hint: lowercase letters, digits and '-', such as vllm, triton or generic)`,
		"defaults.replicas: 0: at least 1",
		"defaults.gpus: -1 is negative (0: the runtime's GPUs)",
		`store.path: "bridge.db" is not an absolute clean path`,
		`listen: ":9464" listens on every address: write 0.0.0.0:9464 if that is meant, or 127.0.0.1:9464`,
		`kserve_deployment_mode: "Serverless": want Standard, or RawDeployment for KServe releases that predate it (never Knative: it refuses hostPath and NFS volumes)`,
		`spread.topology_key: "zone name" is not a label key (such as kubernetes.io/hostname or topology.kubernetes.io/zone)`,
	},
}

func TestFiles(t *testing.T) {
	for name, want := range fileCases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			cfg, err := Load(path)
			if want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			// yamlconf prefixes the first line (a decoding error) or every
			// line (validation problems) with the file name.
			var got []string
			for _, line := range strings.Split(err.Error(), "\n") {
				got = append(got, strings.TrimPrefix(line, path+": "))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryTestFileListed keeps TestFiles complete.
func TestEveryTestFileListed(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := fileCases[filepath.Base(f)]; !ok {
			t.Errorf("%s is not in fileCases", f)
		}
	}
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
		cfg.Kubernetes.RolloutTimeout != 5*time.Minute || cfg.Policy.ServingFile != "/etc/strata/serving.json" ||
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
