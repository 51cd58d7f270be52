// Package config reads /etc/strata/bridge.yaml, the configuration of
// strata-bridge: strict YAML (an unknown or misspelt key is an error with
// its line, through internal/yamlconf), defaults in code, and a Validate
// that reports every problem with its key's path at once.
package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/yamlconf"
)

// APIVersion and Kind head the file.
const (
	APIVersion = "strata/v1"
	Kind       = "BridgeConfig"
)

// DefaultPath is where the bridge looks for its configuration.
const DefaultPath = "/etc/strata/bridge.yaml"

// Mount kinds.
const (
	MountHostPath = "hostPath"
	MountNFS      = "nfs"
	MountPVC      = "pvc"
)

// KServe deployment modes: "Standard" (KServe's current name for plain
// Deployments without Knative) and "RawDeployment" (its older name, for
// KServe releases that predate "Standard").
const (
	KServeStandard      = "Standard"
	KServeRawDeployment = "RawDeployment"
)

// Config is the bridge's configuration.
type Config struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Slurm      Slurm      `yaml:"slurm"`
	Kubernetes Kubernetes `yaml:"kubernetes"`
	Policy     Policy     `yaml:"policy"`
	Models     Models     `yaml:"models"`
	Runtimes   Runtimes   `yaml:"runtimes"`
	// Defaults fill what a serve spec leaves out.
	Defaults servespec.Defaults `yaml:"defaults"`
	Store    Store              `yaml:"store"`
	// Listen is the daemon's API and metrics address.
	Listen string `yaml:"listen"`
	// KServe renders an InferenceService instead of Deployment, Service
	// and HorizontalPodAutoscaler; the cluster must have KServe's CRD.
	KServe bool `yaml:"kserve"`
	// KServeDeploymentMode is the InferenceService's
	// serving.kserve.io/deploymentMode: Standard or RawDeployment. It is
	// never Knative: Knative refuses hostPath and NFS volumes.
	KServeDeploymentMode string `yaml:"kserve_deployment_mode"`
	Spread               Spread `yaml:"spread"`
}

// Slurm reaches slurmrestd.
type Slurm struct {
	URL string `yaml:"url"`
	// User the bridge reads jobs as: a Slurm operator, to see every
	// user's jobs.
	User      string `yaml:"user"`
	TokenFile string `yaml:"token_file"`
	// PollInterval between two conditional job listings.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Kubernetes reaches the cluster that serves.
type Kubernetes struct {
	// Kubeconfig file; "" means client-go's defaults ($KUBECONFIG,
	// ~/.kube/config, or the in-cluster service account).
	Kubeconfig string `yaml:"kubeconfig"`
	// FieldManager owns the fields the bridge applies (server-side apply).
	FieldManager string `yaml:"field_manager"`
	// RolloutTimeout bounds the wait for a Deployment to roll out.
	RolloutTimeout time.Duration `yaml:"rollout_timeout"`
}

// Policy is what strata-policy renders for the bridge.
type Policy struct {
	// ServingFile is serving.json: accounts to tenants, namespaces and
	// serving quotas.
	ServingFile string `yaml:"serving_file"`
}

// Models says where models may come from and how pods reach them.
type Models struct {
	// AllowedRoots: a model path must be under one of these (Slurm-side
	// paths), and each must be under Mount.Root.
	AllowedRoots []string `yaml:"allowed_roots"`
	// HostRoot is where the bridge's own host sees the Slurm side's "/",
	// for reading models and strata-serve.yaml ("": the shared file
	// system is mounted at the same paths on both, the usual case).
	HostRoot string `yaml:"host_root,omitempty"`
	Mount    Mount  `yaml:"mount"`
}

// Mount says how pods reach the shared file system without copying the
// model: the model is mounted read-only at /model.
type Mount struct {
	// Kind is "hostPath" (the file system is mounted on every GPU node),
	// "nfs" (pods mount the export themselves) or "pvc" (a
	// PersistentVolumeClaim in each tenant namespace).
	Kind string `yaml:"kind"`
	// Server is the NFS server (nfs only).
	Server string `yaml:"server"`
	// Path is where Root is on the nodes (hostPath) or on the NFS server
	// (nfs); not used by pvc, whose claim is Root.
	Path string `yaml:"path"`
	// Root is the shared file system's root as Slurm jobs see it (e.g.
	// /shared): model paths are mapped from under Root.
	Root string `yaml:"root"`
	// ClaimName is the PVC that each tenant namespace has (pvc only); its
	// root is Root, and the model is its subPath.
	ClaimName string `yaml:"claim_name"`
}

// Runtimes says where the runtime templates are.
type Runtimes struct {
	// Dir holds <name>.yaml per runtime (vllm, triton, generic, ...).
	Dir string `yaml:"dir"`
}

// Store is the bridge's state.
type Store struct {
	// Path of the SQLite database of deployments and versions.
	Path string `yaml:"path"`
}

// Spread spreads a model's replicas.
type Spread struct {
	// TopologyKey is the node label replicas spread across
	// (kubernetes.io/hostname: nodes; topology.kubernetes.io/zone:
	// zones); "" spreads nothing.
	TopologyKey string `yaml:"topology_key"`
}

// Default is the configuration used for keys the file leaves out. It is
// not valid on its own: models.allowed_roots and models.mount.root name
// the site's shared file system, which no default can guess.
func Default() Config {
	return Config{
		APIVersion: APIVersion, Kind: Kind,
		Slurm: Slurm{URL: "http://127.0.0.1:6820", User: "strata-bridge", TokenFile: "/etc/strata/bridge.jwt",
			PollInterval: 30 * time.Second},
		Kubernetes: Kubernetes{Kubeconfig: "/etc/strata/bridge.kubeconfig", FieldManager: "strata-bridge",
			RolloutTimeout: 5 * time.Minute},
		Policy:               Policy{ServingFile: "/etc/strata/serving.json"},
		Models:               Models{Mount: Mount{Kind: MountHostPath}},
		Runtimes:             Runtimes{Dir: "/etc/strata/bridge/runtimes"},
		Defaults:             servespec.Defaults{Runtime: "generic", Replicas: 1},
		Store:                Store{Path: "/var/lib/strata/bridge/bridge.db"},
		Listen:               "127.0.0.1:9464",
		KServeDeploymentMode: KServeStandard,
		Spread:               Spread{TopologyKey: "kubernetes.io/hostname"},
	}
}

// Load reads and validates a file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read bridge config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data strictly over the defaults and validates it; every
// problem comes back at once, one per line, each prefixed by name.
func Parse(name string, data []byte) (*Config, error) {
	cfg := Default()
	if err := yamlconf.Decode(name, data, &cfg, cfg.Validate); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate returns every problem with its key's path.
func (c *Config) Validate() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", "%q is not supported: use %s", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		bad("kind", "%q: want %s", c.Kind, Kind)
	}

	if u, err := url.Parse(c.Slurm.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("slurm.url", "%q is not an http:// or https:// URL of slurmrestd", c.Slurm.URL)
	}
	if c.Slurm.User == "" {
		bad("slurm.user", "required: the Slurm user the bridge reads jobs as (an operator, to see every user's jobs)")
	}
	absFile(bad, "slurm.token_file", c.Slurm.TokenFile, true, "the JWT of slurm.user (scontrol token username=...)")
	if c.Slurm.PollInterval < 5*time.Second {
		bad("slurm.poll_interval", "%s is shorter than 5s: slurmctld would answer a poll every few seconds for nothing", c.Slurm.PollInterval)
	}

	absFile(bad, "kubernetes.kubeconfig", c.Kubernetes.Kubeconfig, false, "")
	switch fm := c.Kubernetes.FieldManager; {
	case fm == "":
		bad("kubernetes.field_manager", "required: the server-side apply field manager, such as strata-bridge")
	case len(fm) > 128:
		bad("kubernetes.field_manager", "%d characters, more than the 128 Kubernetes allows", len(fm))
	}
	if c.Kubernetes.RolloutTimeout < 10*time.Second {
		bad("kubernetes.rollout_timeout", "%s is shorter than 10s: a model server takes longer than that to load", c.Kubernetes.RolloutTimeout)
	}

	absFile(bad, "policy.serving_file", c.Policy.ServingFile, true, "serving.json, which strata-policy render writes")

	c.validateModels(bad)

	absFile(bad, "runtimes.dir", c.Runtimes.Dir, true, "the folder of the runtime templates (<name>.yaml)")
	if err := servespec.CheckRuntimeName(c.Defaults.Runtime); err != nil {
		bad("defaults.runtime", "%v", err)
	}
	if c.Defaults.Replicas < 1 {
		bad("defaults.replicas", "%d: at least 1", c.Defaults.Replicas)
	}
	if c.Defaults.GPUs < 0 {
		bad("defaults.gpus", "%d is negative (0: the runtime's GPUs)", c.Defaults.GPUs)
	}

	absFile(bad, "store.path", c.Store.Path, true, "the SQLite database of deployments and versions")
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (such as 127.0.0.1:9464)", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		bad("listen", "%q: port %q is not a number from 1 to 65535", c.Listen, port)
	} else if host == "" {
		bad("listen", "%q listens on every address: write 0.0.0.0:%s if that is meant, or 127.0.0.1:%s", c.Listen, port, port)
	}
	if c.KServeDeploymentMode != KServeStandard && c.KServeDeploymentMode != KServeRawDeployment {
		bad("kserve_deployment_mode", "%q: want %s, or %s for KServe releases that predate it (never Knative: it refuses hostPath and NFS volumes)",
			c.KServeDeploymentMode, KServeStandard, KServeRawDeployment)
	}
	if k := c.Spread.TopologyKey; k != "" {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			bad("spread.topology_key", "%q is not a label key (such as kubernetes.io/hostname or topology.kubernetes.io/zone)", k)
		}
	}
	return errs
}

func (c *Config) validateModels(bad func(path, format string, args ...any)) {
	m := c.Models.Mount
	rootOK := cleanAbs(m.Root)
	if !rootOK {
		bad("models.mount.root", "%q: required, an absolute clean path other than /: the shared file system's root as Slurm jobs see it (such as /shared)", m.Root)
	}
	if len(c.Models.AllowedRoots) == 0 {
		bad("models.allowed_roots", "required: the folders models may be served from (such as /shared/projects)")
	}
	for i, r := range c.Models.AllowedRoots {
		path := fmt.Sprintf("models.allowed_roots[%d]", i)
		switch {
		case !cleanAbs(r):
			bad(path, "%q is not an absolute clean path", r)
		case rootOK && !Under(r, m.Root):
			bad(path, "%q is not under models.mount.root %s: pods could not reach its models", r, m.Root)
		}
	}
	if h := c.Models.HostRoot; h != "" && !cleanAbs(h) {
		bad("models.host_root", "%q is not an absolute clean path other than /: where this host sees the Slurm side's / (leave it out when the paths are the same)", h)
	}
	only := func(key, value, kind string) {
		if value != "" {
			bad("models.mount."+key, "%q is for kind %s only; this mount is %s", value, kind, m.Kind)
		}
	}
	switch m.Kind {
	case MountHostPath:
		absFile(bad, "models.mount.path", m.Path, true, "where models.mount.root is mounted on the GPU nodes")
		only("server", m.Server, MountNFS)
		only("claim_name", m.ClaimName, MountPVC)
	case MountNFS:
		absFile(bad, "models.mount.path", m.Path, true, "the exported path on the NFS server that is models.mount.root")
		if m.Server == "" {
			bad("models.mount.server", "required for nfs: the NFS server's host name or address")
		} else if net.ParseIP(m.Server) == nil && len(validation.IsDNS1123Subdomain(m.Server)) > 0 {
			bad("models.mount.server", "%q is neither a host name nor an IP address", m.Server)
		}
		only("claim_name", m.ClaimName, MountPVC)
	case MountPVC:
		if m.ClaimName == "" {
			bad("models.mount.claim_name", "required for pvc: the PersistentVolumeClaim each tenant namespace has, whose root is models.mount.root")
		} else if len(validation.IsDNS1123Subdomain(m.ClaimName)) > 0 {
			bad("models.mount.claim_name", "%q is not a PersistentVolumeClaim name", m.ClaimName)
		}
		only("path", m.Path, MountHostPath+" and "+MountNFS)
		only("server", m.Server, MountNFS)
	default:
		bad("models.mount.kind", "%q: want hostPath, nfs or pvc", m.Kind)
	}
}

// absFile checks that value is an absolute, clean path; required says
// whether it may be empty.
func absFile(bad func(path, format string, args ...any), path, value string, required bool, what string) {
	switch {
	case value == "" && required:
		bad(path, "required: %s", what)
	case value != "" && !cleanAbs(value):
		bad(path, "%q is not an absolute clean path", value)
	}
}

func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && p != "/"
}

// Under reports whether path is root or below it (both clean and
// absolute); /shared/projects is under /shared, /sharedx is not.
func Under(path, root string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}
