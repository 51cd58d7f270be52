// Package config reads /etc/strata/bridge.yaml, the configuration of
// strata-bridge, with internal/strictyaml: strict YAML (an unknown or
// misspelt key is an error with its line and column and the key it is
// closest to), defaults in code, durations in the grammar of
// internal/duration, and a Validate whose problems carry their key's path,
// so that every problem of a file comes at once as "file:line:col: message
// (hint: ...)".
package config

import (
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/fieldcheck"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/strictyaml"
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
	API    API    `yaml:"api"`
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
	// MaxAnswerMiB caps one answer of slurmrestd. Job listings are read
	// as a stream and cost the jobs kept, not their size; the cap stops a
	// runaway answer.
	MaxAnswerMiB int `yaml:"max_answer_mib"`
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
	// Path of the SQLite database of deployments and versions, used when
	// Database is "".
	Path string `yaml:"path"`
	// Database is a PostgreSQL database's URL without a password
	// (postgres://strata_bridge@db.example.org/strata_bridge?sslmode=verify-full),
	// for an active and a standby bridge on two hosts; "" keeps the
	// state in SQLite at Path.
	Database string `yaml:"database"`
	// DatabasePasswordFile holds the PostgreSQL password (a secret file,
	// held to the rule of the bridge's other secrets); "" for none.
	DatabasePasswordFile string `yaml:"database_password_file"`
	// LeaseTTL is how long the active bridge's lease lasts unrenewed: a
	// standby takes over at most LeaseTTL and a third after the active
	// one stopped. PostgreSQL only.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// Postgres says whether the bridge keeps its state in PostgreSQL.
func (s Store) Postgres() bool { return s.Database != "" }

// API guards the daemon's JSON API (not /healthz and /metrics).
type API struct {
	// TokenFile holds the bearer token every API request must carry; it
	// is read again when it changes and on SIGHUP. Others must not be
	// able to read it (internal/secretfile's rule).
	TokenFile string `yaml:"token_file"`
	// AllowedHosts are the names clients call the API by (its Host
	// header), besides localhost, 127.0.0.1, ::1, the listen address's
	// host and this host's name.
	AllowedHosts []string `yaml:"allowed_hosts"`
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
			PollInterval: 30 * time.Second, MaxAnswerMiB: 512},
		Kubernetes: Kubernetes{Kubeconfig: "/etc/strata/bridge.kubeconfig", FieldManager: "strata-bridge",
			RolloutTimeout: 5 * time.Minute},
		Policy:               Policy{ServingFile: "/etc/strata/rendered/serving.json"},
		Models:               Models{Mount: Mount{Kind: MountHostPath}},
		Runtimes:             Runtimes{Dir: "/etc/strata/bridge/runtimes"},
		Defaults:             servespec.Defaults{Runtime: "generic", Replicas: 1},
		Store:                Store{Path: "/var/lib/strata/bridge/bridge.db", LeaseTTL: 15 * time.Second},
		Listen:               "127.0.0.1:9464",
		API:                  API{TokenFile: "/etc/strata/bridge-api.token", AllowedHosts: []string{}},
		KServeDeploymentMode: KServeStandard,
		Spread:               Spread{TopologyKey: "kubernetes.io/hostname"},
	}
}

// Load reads and validates a file; every problem comes back at once as
// strictyaml.Diagnostics, each "file:line:col: message (hint: ...)".
func Load(path string) (*Config, error) {
	return ptr(strictyaml.LoadWithDefaults(path, Default(), decodeOptions))
}

// Parse decodes data strictly over the defaults and validates it; name
// names the file in diagnostics.
func Parse(name string, data []byte) (*Config, error) {
	return ptr(strictyaml.ParseWithDefaults(name, data, Default(), decodeOptions))
}

func ptr(c Config, err error) (*Config, error) {
	if err != nil {
		return nil, err
	}
	return &c, nil
}

var decodeOptions = strictyaml.Options{
	What: "a bridge config", AllowEmpty: true,
	Nouns: map[reflect.Type]string{
		reflect.TypeFor[Config]():             "the bridge config",
		reflect.TypeFor[servespec.Defaults](): "defaults",
	},
	Example: "start with apiVersion: " + APIVersion + " and kind: " + Kind + " (see " + DefaultPath + ")",
}

// problems collects a validation's problems, each at its key's path.
type problems strictyaml.Diagnostics

func (ps *problems) bad(path, hint, format string, args ...any) {
	*ps = append(*ps, strictyaml.Diagnostic{Path: path, Msg: path + ": " + fmt.Sprintf(format, args...), Hint: hint})
}

// Validate returns every problem with its key's path.
func (c *Config) Validate() strictyaml.Diagnostics {
	var ps problems
	if c.APIVersion != APIVersion {
		ps.bad("apiVersion", "use apiVersion: "+APIVersion, "%q is not supported", c.APIVersion)
	}
	if c.Kind != Kind {
		ps.bad("kind", "use kind: "+Kind, "%q is not a bridge config", c.Kind)
	}

	if err := fieldcheck.HTTPURL(c.Slurm.URL); err != nil {
		ps.bad("slurm.url", "give slurmrestd's URL, such as http://127.0.0.1:6820", "%v", err)
	}
	if c.Slurm.User == "" {
		ps.bad("slurm.user", "give the Slurm user the bridge reads jobs as (an operator, to see every user's jobs)", "required")
	}
	ps.absFile("slurm.token_file", c.Slurm.TokenFile, true, "the JWT of slurm.user (scontrol token username=...)")
	if c.Slurm.PollInterval < 5*time.Second {
		ps.bad("slurm.poll_interval", "give 5s or more (30s is usual): slurmctld would answer a poll every few seconds for nothing",
			"%s is shorter than 5s", c.Slurm.PollInterval)
	}
	if c.Slurm.MaxAnswerMiB < 1 || c.Slurm.MaxAnswerMiB > 16384 {
		ps.bad("slurm.max_answer_mib", "give 1 to 16384 (512 is usual; a job listing takes some 7 KiB a job)",
			"%d is not a size in MiB from 1 to 16384", c.Slurm.MaxAnswerMiB)
	}

	ps.absFile("kubernetes.kubeconfig", c.Kubernetes.Kubeconfig, false, "")
	switch fm := c.Kubernetes.FieldManager; {
	case fm == "":
		ps.bad("kubernetes.field_manager", "give the server-side apply field manager, such as strata-bridge", "required")
	case len(fm) > 128:
		ps.bad("kubernetes.field_manager", "shorten it: Kubernetes allows 128 characters", "%d characters is too long", len(fm))
	}
	if c.Kubernetes.RolloutTimeout < 10*time.Second {
		ps.bad("kubernetes.rollout_timeout", "give 10s or more (5m is usual): a model server takes longer than that to load",
			"%s is shorter than 10s", c.Kubernetes.RolloutTimeout)
	}

	ps.absFile("policy.serving_file", c.Policy.ServingFile, true, "serving.json, which strata-policy render writes")

	c.validateModels(&ps)

	ps.absFile("runtimes.dir", c.Runtimes.Dir, true, "the folder of the runtime templates (<name>.yaml)")
	if err := servespec.CheckRuntimeName(c.Defaults.Runtime); err != nil {
		ps.bad("defaults.runtime", "", "%v", err)
	}
	if c.Defaults.Replicas < 1 {
		ps.bad("defaults.replicas", "give 1 or more", "%d is too few", c.Defaults.Replicas)
	}
	if c.Defaults.GPUs < 0 {
		ps.bad("defaults.gpus", "give 0 or more (0: the runtime's GPUs)", "%d is negative", c.Defaults.GPUs)
	}

	ps.absFile("store.path", c.Store.Path, true, "the SQLite database of deployments and versions")
	c.validateDatabase(&ps)
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		ps.bad("listen", "write host:port, such as 127.0.0.1:9464", "%q is not host:port", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		ps.bad("listen", "give a port from 1 to 65535", "%q: port %q is not a port number", c.Listen, port)
	} else if host == "" {
		ps.bad("listen", fmt.Sprintf("write 0.0.0.0:%s if that is meant, or 127.0.0.1:%s", port, port),
			"%q listens on every address", c.Listen)
	}
	ps.absFile("api.token_file", c.API.TokenFile, true, "the file of the API's bearer token (head -c 32 /dev/urandom | base64)")
	for i, h := range c.API.AllowedHosts {
		if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(h))) > 0 {
			ps.bad(fmt.Sprintf("api.allowed_hosts[%d]", i), "give a host name or an IP address, without scheme or port, such as bridge.example.org",
				"%q is neither a host name nor an IP address", h)
		}
	}
	if c.KServeDeploymentMode != KServeStandard && c.KServeDeploymentMode != KServeRawDeployment {
		ps.bad("kserve_deployment_mode", "never Knative: it refuses hostPath and NFS volumes",
			"want %s, or %s for KServe releases that predate it, got %q", KServeStandard, KServeRawDeployment, c.KServeDeploymentMode)
	}
	if k := c.Spread.TopologyKey; k != "" {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			ps.bad("spread.topology_key", "give a node label key, such as kubernetes.io/hostname or topology.kubernetes.io/zone",
				"%q is not a label key", k)
		}
	}
	return strictyaml.Diagnostics(ps)
}

// validateDatabase: store.database is "" (SQLite at store.path) or a
// postgres:// URL without a password, which goes in
// store.database_password_file.
func (c *Config) validateDatabase(ps *problems) {
	st := c.Store
	if st.Database == "" {
		if st.DatabasePasswordFile != "" {
			ps.bad("store.database_password_file", "leave it out with SQLite, or give store.database: postgres://...",
				"set, but store.database is not: the store is SQLite at store.path")
		}
		return
	}
	if !pgsql.IsURL(st.Database) {
		ps.bad("store.database", "give postgres://user@host[:port]/database, or leave it out for SQLite at store.path",
			"not a postgres:// URL")
	} else if err := pgsql.CheckURL(st.Database); err != nil {
		ps.bad("store.database", "write postgres://user@host[:port]/database[?sslmode=verify-full], the password in store.database_password_file", "%v", err)
	}
	ps.absFile("store.database_password_file", st.DatabasePasswordFile, false, "the file of the PostgreSQL password")
	if st.LeaseTTL < 3*time.Second || st.LeaseTTL > 10*time.Minute {
		ps.bad("store.lease_ttl", "give 3s to 10m (15s is usual: a standby takes over within 20s)",
			"%s is not from 3s to 10m", st.LeaseTTL)
	}
}

func (c *Config) validateModels(ps *problems) {
	m := c.Models.Mount
	rootOK := cleanAbs(m.Root)
	if !rootOK {
		ps.bad("models.mount.root", "give the shared file system's root as Slurm jobs see it, such as /shared: an absolute clean path other than /",
			"%q is not the root of a shared file system", m.Root)
	}
	if len(c.Models.AllowedRoots) == 0 {
		ps.bad("models.allowed_roots", "list the folders models may be served from, such as [/shared/projects]", "required")
	}
	for i, r := range c.Models.AllowedRoots {
		path := fmt.Sprintf("models.allowed_roots[%d]", i)
		switch {
		case !cleanAbs(r):
			ps.bad(path, "write an absolute path without . or .. parts", "%q is not an absolute clean path", r)
		case rootOK && !Under(r, m.Root):
			ps.bad(path, "pods could not reach its models: list folders under the mount's root", "%q is not under models.mount.root %s", r, m.Root)
		}
	}
	if h := c.Models.HostRoot; h != "" && !cleanAbs(h) {
		ps.bad("models.host_root", "give where this host sees the Slurm side's /, an absolute clean path other than /; leave it out when the paths are the same",
			"%q is not an absolute clean path", h)
	}
	only := func(key, value, kind string) {
		if value != "" {
			ps.bad("models.mount."+key, "remove it, or set kind: "+strings.Split(kind, " ")[0], "%q is for kind %s only; this mount is %s", value, kind, m.Kind)
		}
	}
	switch m.Kind {
	case MountHostPath:
		ps.absFile("models.mount.path", m.Path, true, "where models.mount.root is mounted on the GPU nodes")
		only("server", m.Server, MountNFS)
		only("claim_name", m.ClaimName, MountPVC)
	case MountNFS:
		ps.absFile("models.mount.path", m.Path, true, "the exported path on the NFS server that is models.mount.root")
		if m.Server == "" {
			ps.bad("models.mount.server", "give the NFS server's host name or address", "required for nfs")
		} else if net.ParseIP(m.Server) == nil && len(validation.IsDNS1123Subdomain(m.Server)) > 0 {
			ps.bad("models.mount.server", "give the NFS server's host name or address", "%q is neither a host name nor an IP address", m.Server)
		}
		only("claim_name", m.ClaimName, MountPVC)
	case MountPVC:
		if m.ClaimName == "" {
			ps.bad("models.mount.claim_name", "give the PersistentVolumeClaim each tenant namespace has, whose root is models.mount.root", "required for pvc")
		} else if len(validation.IsDNS1123Subdomain(m.ClaimName)) > 0 {
			ps.bad("models.mount.claim_name", "use lowercase letters, digits, '-' and '.'", "%q is not a PersistentVolumeClaim name", m.ClaimName)
		}
		only("path", m.Path, MountHostPath+" and "+MountNFS)
		only("server", m.Server, MountNFS)
	default:
		hint := ""
		if g := strictyaml.Closest(m.Kind, []string{MountHostPath, MountNFS, MountPVC}); g != "" {
			hint = "did you mean " + g + "?"
		}
		ps.bad("models.mount.kind", hint, "want hostPath, nfs or pvc, got %q", m.Kind)
	}
}

// ListenLoopback reports whether listen is a loopback address (127.0.0.1,
// ::1, localhost): only local clients reach the API, so it needs no TLS.
func (c *Config) ListenLoopback() bool {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// absFile checks that value is an absolute, clean path; required says
// whether it may be empty.
func (ps *problems) absFile(path, value string, required bool, what string) {
	switch {
	case value == "" && required:
		ps.bad(path, "give "+what, "required")
	case value != "" && !cleanAbs(value):
		ps.bad(path, "write an absolute path without . or .. parts", "%q is not an absolute clean path", value)
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
