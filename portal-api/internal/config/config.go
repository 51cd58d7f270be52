// Package config reads /etc/strata/portal-api.yaml, the configuration of
// strata-portal-api, with internal/strictyaml: strict YAML over defaults
// in code, durations in internal/duration's grammar, and a Validate whose
// problems carry their key's path, so that every problem of a file comes
// at once as "file:line:col: message (hint: ...)".
package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/fieldcheck"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/strictyaml"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// APIVersion and Kind head the file.
const (
	APIVersion = "strata/v1"
	Kind       = "PortalConfig"
)

// DefaultPath is where strata-portal-api looks for its configuration.
const DefaultPath = "/etc/strata/portal-api.yaml"

// Config is the portal API's configuration.
type Config struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Listen is the address of the API, /healthz and /metrics.
	Listen string `yaml:"listen"`
	TLS    TLS    `yaml:"tls"`
	// Database is where the portal keeps tokens, page and session
	// cookies, sessions, submissions and the audit log: the path of a
	// SQLite file (the default), or the URL of a PostgreSQL database
	// (postgres://user@host:port/database?sslmode=verify-full), which
	// any number of portals behind one address can share.
	Database string `yaml:"database"`
	// DatabasePasswordFile holds the PostgreSQL password (a secret file,
	// readable by root and the strata-portal-api group only); never in
	// the URL.
	DatabasePasswordFile string `yaml:"database_password_file"`
	// TemplatesDir holds the job templates, one YAML file each; a
	// missing folder is no templates.
	TemplatesDir string `yaml:"templates_dir"`
	// Containers is the site's container runtime, with which a template
	// that names an image is rendered; unset, such a template is refused.
	Containers templates.Containers `yaml:"containers"`
	Auth       Auth                 `yaml:"auth"`
	Limits     Limits               `yaml:"limits"`
	Sessions   Sessions             `yaml:"sessions"`
	Pages      Pages                `yaml:"pages"`
	Clusters   []Cluster            `yaml:"clusters"`
}

// Pages configures the web pages served under / beside the API.
type Pages struct {
	// PublicURL is where browsers reach the portal (https://portal.example.org):
	// the base of login-link URLs and of the OIDC redirect
	// (<public_url>/signin/callback). "": login-link prints a path only,
	// and OIDC sign-in on the pages is off.
	PublicURL string `yaml:"public_url"`
	// SessionIdle ends a page session after so long without a request;
	// SessionMax after so long whatever its use.
	SessionIdle time.Duration `yaml:"session_idle"`
	SessionMax  time.Duration `yaml:"session_max"`
	// LoginLinkLifetime is how long a login-link URL may wait for its one use.
	LoginLinkLifetime time.Duration `yaml:"login_link_lifetime"`
	OIDC              PagesOIDC     `yaml:"oidc"`
}

// PagesOIDC is the pages' client at auth.oidc.issuer (the code flow with
// PKCE); an empty ClientID turns OIDC sign-in on the pages off.
type PagesOIDC struct {
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client's secret (a secret file); "": a
	// public client, PKCE alone.
	ClientSecretFile string `yaml:"client_secret_file"`
}

// Sessions tunes the interactive sessions' proxy.
type Sessions struct {
	// CookieKeyFile holds the key, 32 bytes or more, that signs the
	// proxy's browser cookies: a secret held to internal/secretfile's
	// rule, kept across restarts and shared by every portal instance
	// behind one address. "": a random key per process, so that after a
	// restart, or on another instance, a browser must ask for a new
	// cookie (POST /v1/sessions/{id}/cookie).
	CookieKeyFile string `yaml:"cookie_key_file"`
	// Origin is where browsers open sessions, a host apart from the
	// pages' (a session's server runs its owner's script, which on the
	// pages' host would act with the page session):
	// https://sessions.portal.example.org, served from listen and told
	// apart by its Host, or https://*.sessions.portal.example.org for one
	// host per session (<id>.sessions.portal.example.org; wildcard DNS
	// and certificate). "": browsers cannot open sessions (API clients
	// still reach them with a bearer token); check-config warns.
	Origin string `yaml:"origin"`
	// MaxConnections caps one session's open requests and WebSockets
	// through the proxy (default 64); past it the proxy answers 429
	// session_busy. A JupyterLab tab opens a handful; raise it for a
	// session shared by many tabs or users' tools that open many.
	MaxConnections int `yaml:"max_connections"`
}

// TLS serves HTTPS when both files are given.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// TerminatedByProxy says that a listen address other hosts reach is
	// served in plain HTTP on purpose: a TLS-terminating proxy or load
	// balancer is the only way in. Without it, or cert_file and key_file,
	// a non-loopback listen is refused: bearer tokens, cookies and every
	// answer would cross the network in clear.
	TerminatedByProxy bool `yaml:"terminated_by_proxy"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Auth says who a caller is.
type Auth struct {
	OIDC  OIDC  `yaml:"oidc"`
	Proxy Proxy `yaml:"proxy"`
	// Tokens are the personal API tokens of `strata-portal-api token create`.
	Tokens Tokens `yaml:"tokens"`
}

// OIDC verifies bearer ID tokens of one issuer; empty Issuer turns it off.
type OIDC struct {
	// Issuer is the issuer URL; its discovery document and JWKS are read
	// from it.
	Issuer string `yaml:"issuer"`
	// Audience is the client ID tokens must be issued to.
	Audience string `yaml:"audience"`
	// UserClaim holds the Slurm user name (as slurm.conf's
	// userclaimfield): preferred_username, email's local part is not
	// guessed.
	UserClaim string `yaml:"user_claim"`
}

// Enabled reports whether OIDC is configured.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// Proxy trusts a user header set by a reverse proxy, only on requests
// from its addresses.
type Proxy struct {
	// Trusted are the proxies' addresses or networks (10.0.0.5,
	// 10.0.0.0/24); empty turns the header off.
	Trusted []string `yaml:"trusted"`
	// Header carries the user name.
	Header string `yaml:"header"`
	// MinPrefixIPv4 and MinPrefixIPv6 bound how wide a trusted network
	// may be (defaults /24 and /64: one subnet, where a proxy tier
	// lives). Every host of a trusted network may name any user in the
	// header, a cluster admin included, so a wider network is refused
	// unless AllowAny is set.
	MinPrefixIPv4 int `yaml:"min_prefix_ipv4"`
	MinPrefixIPv6 int `yaml:"min_prefix_ipv6"`
	// AllowAny accepts trusted networks wider than the bounds above (an
	// operator's statement that every address in them is a proxy).
	AllowAny bool `yaml:"allow_any"`
	// TrustLoopback accepts a trusted network that holds a loopback
	// address: on a host where users log in, any of them could then send
	// the header. Set it only where the proxy runs on the portal's host
	// and no user logs in there.
	TrustLoopback bool `yaml:"trust_loopback"`
}

// Default bounds of a trusted proxy network (auth.proxy.min_prefix_ipv4
// and min_prefix_ipv6).
const (
	DefaultMinPrefixIPv4 = 24
	DefaultMinPrefixIPv6 = 64
)

// Tokens tunes personal API tokens.
type Tokens struct {
	// MaxLifetime bounds --expires of token create.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
}

// Limits bound what one caller may ask.
type Limits struct {
	// RatePerSecond and Burst are each user's request rate.
	RatePerSecond float64 `yaml:"rate_per_second"`
	Burst         int     `yaml:"burst"`
	// MaxBodyBytes caps a request body.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// Cluster is one Slurm cluster the portal serves.
type Cluster struct {
	// Name is how the API names the cluster (in /v1/jobs/{cluster}/...).
	Name string `yaml:"name"`
	// SlurmCluster is the cluster's Slurm ClusterName, which its
	// tenants.json must name; "" is Name.
	SlurmCluster string `yaml:"slurm_cluster"`
	// SlurmrestdURL reaches the cluster's slurmrestd.
	SlurmrestdURL string `yaml:"slurmrestd_url"`
	// SlurmrestdMaxAnswerMiB caps one answer of slurmrestd. Job listings
	// are read as a stream and cost the jobs kept, not their size; the cap
	// stops a runaway answer.
	SlurmrestdMaxAnswerMiB int `yaml:"slurmrestd_max_answer_mib"`
	// JWTKeyFile is the cluster's jwt_hs256.key: the portal mints
	// short-lived tokens for the poller's user and for every user it acts for.
	JWTKeyFile string `yaml:"jwt_key_file"`
	// PollUser is who the poller reads jobs, nodes and shares as: an
	// operator, to see every user's jobs.
	PollUser string `yaml:"poll_user"`
	// TokenLifetime of the minted tokens.
	TokenLifetime time.Duration `yaml:"token_lifetime"`
	// TenantsFile is the cluster's tenants.json (strata-policy render).
	TenantsFile string `yaml:"tenants_file"`
	// JobPolicyFile is the cluster's jobpolicy.json (strata-policy
	// render), against which a submission is checked as job_submit.lua
	// checks it; without it the cluster takes no submissions.
	JobPolicyFile string `yaml:"job_policy_file"`
	// WorkDir is a submitted job's working directory (Slurm requires
	// one) unless its template sets it; {user} is the user's name, as in
	// /home/{user}.
	WorkDir string `yaml:"work_dir"`
	// OutputRoots are the shared folders beneath which a job's standard
	// output and error and its working directory may be shown to those
	// who may read the job (only files the job's user owns); none: no
	// job's output is shown.
	OutputRoots []string `yaml:"output_roots"`
	// SessionRoot holds the sessions' folders (<root>/<id>, where a
	// session's job writes its connection file), on a file system the
	// portal's host shares with the nodes; {user} is the user's name.
	// "": <work_dir>/.strata/sessions.
	SessionRoot string `yaml:"session_root"`
	// SessionIdleLimit ends a session without GPUs whose server has been
	// idle this long, unless its template gives its own idle_limit.
	SessionIdleLimit time.Duration `yaml:"session_idle_limit"`
	// PollInterval between two polls.
	PollInterval time.Duration `yaml:"poll_interval"`
	// StaleAfter: a snapshot older than this is shown as stale.
	StaleAfter time.Duration `yaml:"stale_after"`
	// ReclaimdURL is the cluster's reclaimd API (its listen, port 9811 by
	// default); ReclaimdTokenFile holds the bearer token it wants (the
	// content of reclaimd's api.token_file), a secret held to
	// internal/secretfile's rule.
	ReclaimdURL       string `yaml:"reclaimd_url"`
	ReclaimdTokenFile string `yaml:"reclaimd_token_file"`
	// BridgeURL is the cluster's strata-bridge API; BridgeTokenFile holds
	// the bearer token it wants (the content of the bridge's
	// api.token_file), a secret held to internal/secretfile's rule.
	BridgeURL       string `yaml:"bridge_url"`
	BridgeTokenFile string `yaml:"bridge_token_file"`
	PrometheusURL   string `yaml:"prometheus_url"`
	// Scontrol is the path of scontrol for requeue on Slurm 25.11 and
	// older, whose slurmrestd has no requeue: the portal runs `scontrol
	// requeue` with the user's minted token in SLURM_JWT (Slurm's
	// auth/jwt; the host needs the cluster's slurm.conf, no munge
	// identity), so slurmctld checks the user's own permission. Empty
	// (the default): no scontrol, and a requeue there answers 501.
	Scontrol string `yaml:"scontrol"`
	// PriorityWeights are the cluster's slurm.conf settings of the
	// priority/multifactor plugin, which slurmrestd does not give: with
	// them GET /v1/queue shows each pending job's priority factors.
	PriorityWeights *PriorityWeights `yaml:"priority_weights"`
	// GPUMetrics says how prometheus_url holds dcgm-exporter's
	// utilisation, for a job's GPU history and the overview's GPUs in use.
	GPUMetrics GPUMetrics `yaml:"gpu_metrics"`
}

// GPUMetrics name dcgm-exporter's series in the cluster's Prometheus, as
// reclaimd's Prometheus source reads them, and bound what is asked.
type GPUMetrics struct {
	// NodeLabel names the Slurm node (default Hostname).
	NodeLabel string `yaml:"node_label"`
	// GPULabel holds the GPU index as Slurm numbers it (default gpu).
	GPULabel string `yaml:"gpu_label"`
	// UtilMetric is the utilisation in percent (default DCGM_FI_DEV_GPU_UTIL).
	UtilMetric string `yaml:"util_metric"`
	// Step is the finest step of a job's history; at least the scrape
	// interval (default 30s).
	Step time.Duration `yaml:"step"`
	// Window is what "now" means in the overview: the mean over it
	// (default 5m).
	Window time.Duration `yaml:"window"`
	// IdleBelowPercent: an allocated GPU at or below this utilisation is
	// idle (default 5), by the product's one definition (dcgmprom.Idle).
	IdleBelowPercent float64 `yaml:"idle_below_percent"`
}

// PriorityWeights copy slurm.conf's Priority* settings (`scontrol show
// config | grep ^Priority` shows them).
type PriorityWeights struct {
	Age       int64 `yaml:"age"`       // PriorityWeightAge
	Assoc     int64 `yaml:"assoc"`     // PriorityWeightAssoc
	Fairshare int64 `yaml:"fairshare"` // PriorityWeightFairshare
	JobSize   int64 `yaml:"job_size"`  // PriorityWeightJobSize
	Partition int64 `yaml:"partition"` // PriorityWeightPartition
	QOS       int64 `yaml:"qos"`       // PriorityWeightQOS
	// TRES is PriorityWeightTRES by TRES: cpu, mem, gres/gpu, ...
	TRES map[string]float64 `yaml:"tres"`
	// MaxAge is PriorityMaxAge (default 7d).
	MaxAge time.Duration `yaml:"max_age"`
	// CalcPeriod is PriorityCalcPeriod (default 5m).
	CalcPeriod time.Duration `yaml:"calc_period"`
	// FavorSmall is PriorityFavorSmall.
	FavorSmall bool `yaml:"favor_small"`
}

// DefaultSessionMaxConnections is sessions.max_connections when the file
// leaves it out (sessionproxy.DefaultMaxConns).
const DefaultSessionMaxConnections = 64

// MaxSessionMaxConnections bounds sessions.max_connections: each
// connection holds a socket to the session's server and one to the
// browser, and every session may hold this many.
const MaxSessionMaxConnections = 4096

// Default is the configuration used for keys the file leaves out. It is
// not valid alone: it names no cluster.
func Default() Config {
	return Config{
		APIVersion: APIVersion, Kind: Kind,
		Listen:       "127.0.0.1:8470",
		Database:     "/var/lib/strata/portal-api/portal.db",
		TemplatesDir: "/etc/strata/templates",
		Auth: Auth{
			OIDC: OIDC{UserClaim: "preferred_username"},
			Proxy: Proxy{Trusted: []string{}, Header: "X-Remote-User",
				MinPrefixIPv4: DefaultMinPrefixIPv4, MinPrefixIPv6: DefaultMinPrefixIPv6},
			Tokens: Tokens{MaxLifetime: 90 * 24 * time.Hour},
		},
		Limits:   Limits{RatePerSecond: 20, Burst: 40, MaxBodyBytes: 1 << 20},
		Pages:    Pages{SessionIdle: time.Hour, SessionMax: 12 * time.Hour, LoginLinkLifetime: 15 * time.Minute},
		Sessions: Sessions{MaxConnections: DefaultSessionMaxConnections},
	}
}

// ClusterDefaults fill what a cluster entry leaves out.
func ClusterDefaults() Cluster {
	return Cluster{PollUser: "root", SlurmrestdMaxAnswerMiB: 512, WorkDir: "/tmp", TokenLifetime: 5 * time.Minute, PollInterval: 15 * time.Second, StaleAfter: time.Minute,
		SessionIdleLimit: 2 * time.Hour}
}

// Load reads and validates a file.
func Load(path string) (*Config, error) {
	c, err := strictyaml.LoadWithDefaults(path, Default(), decodeOptions)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Parse decodes data over the defaults and validates it; name names the
// file in diagnostics.
func Parse(name string, data []byte) (*Config, error) {
	c, err := strictyaml.ParseWithDefaults(name, data, Default(), decodeOptions)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

var decodeOptions = strictyaml.Options{
	What: "a portal API config",
	Nouns: map[reflect.Type]string{
		reflect.TypeFor[Config]():  "the portal API config",
		reflect.TypeFor[Cluster](): "a cluster",
	},
	Example: "start with apiVersion: " + APIVersion + " and kind: " + Kind + " (see " + DefaultPath + ")",
}

// defaults fills what a cluster entry leaves out.
func (c *Cluster) defaults() {
	d := ClusterDefaults()
	if c.PollUser == "" {
		c.PollUser = d.PollUser
	}
	if c.SlurmCluster == "" {
		c.SlurmCluster = c.Name
	}
	if c.SlurmrestdMaxAnswerMiB == 0 {
		c.SlurmrestdMaxAnswerMiB = d.SlurmrestdMaxAnswerMiB
	}
	if c.TokenLifetime == 0 {
		c.TokenLifetime = d.TokenLifetime
	}
	if c.PollInterval == 0 {
		c.PollInterval = d.PollInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = d.StaleAfter
	}
	if c.WorkDir == "" {
		c.WorkDir = d.WorkDir
	}
	if c.SessionIdleLimit == 0 {
		c.SessionIdleLimit = d.SessionIdleLimit
	}
}

type problems strictyaml.Diagnostics

func (ps *problems) bad(path, hint, format string, args ...any) {
	*ps = append(*ps, strictyaml.Diagnostic{Path: path, Msg: path + ": " + fmt.Sprintf(format, args...), Hint: hint})
}

var clusterName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// Validate returns every problem with its key's path, after filling each
// cluster's defaults.
func (c *Config) Validate() strictyaml.Diagnostics {
	var ps problems
	if c.APIVersion != APIVersion {
		ps.bad("apiVersion", "use apiVersion: "+APIVersion, "%q is not supported", c.APIVersion)
	}
	if c.Kind != Kind {
		ps.bad("kind", "use kind: "+Kind, "%q is not a portal API config", c.Kind)
	}
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		ps.bad("listen", "write host:port, such as 127.0.0.1:8470", "%q is not host:port", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		ps.bad("listen", "give a port from 1 to 65535", "%q: port %q is not a port number", c.Listen, port)
	} else if host == "" {
		ps.bad("listen", fmt.Sprintf("write 0.0.0.0:%s if that is meant, or 127.0.0.1:%s", port, port), "%q listens on every address", c.Listen)
	} else if !c.TLS.Enabled() && !c.TLS.TerminatedByProxy && !c.ListenLoopback() {
		ps.bad("listen", fmt.Sprintf("give tls.cert_file and tls.key_file; or listen on 127.0.0.1:%s behind a TLS proxy on this host; "+
			"or, when a TLS-terminating proxy or load balancer is the only way in, set tls.terminated_by_proxy: true", port),
			"%q is reachable from other hosts without TLS: tokens, cookies and every answer would cross the network in clear", c.Listen)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		ps.bad("tls", "give both cert_file and key_file, or neither", "only one of cert_file and key_file is set")
	}
	if c.TLS.TerminatedByProxy && c.TLS.Enabled() {
		ps.bad("tls.terminated_by_proxy", "leave it out when the portal serves TLS itself (cert_file and key_file)",
			"set with cert_file: the portal serves TLS itself")
	}
	ps.absFile("tls.cert_file", c.TLS.CertFile, false, "")
	ps.absFile("tls.key_file", c.TLS.KeyFile, false, "")
	c.validateDatabase(&ps)
	ps.absFile("templates_dir", c.TemplatesDir, true, "the folder of the job templates")
	ps.absFile("sessions.cookie_key_file", c.Sessions.CookieKeyFile, false, "the file of the key that signs the sessions' cookies")

	switch c.Containers.Runtime {
	case templates.NoRuntime, templates.Pyxis, templates.Apptainer, templates.OCI:
	default:
		ps.bad("containers.runtime", "use pyxis, apptainer or oci; leave containers out when the portal runs no containers",
			"%q is not a container runtime", c.Containers.Runtime)
	}
	if b := c.Containers.Bundles; b != "" && (!filepath.IsAbs(b) || filepath.Clean(b) != b || b == "/") {
		ps.bad("containers.bundles", "give the policy's cluster.oci_bundles, such as /srv/strata/bundles", "%q is not an absolute, clean directory other than /", b)
	} else if b != "" && c.Containers.Runtime != templates.OCI {
		ps.bad("containers.bundles", "leave it out, or set runtime: oci", "the bundles are the oci runtime's; runtime is %q", c.Containers.Runtime)
	}
	c.validatePages(&ps)
	c.validateSessionOrigin(&ps)
	if n := c.Sessions.MaxConnections; n < 1 || n > MaxSessionMaxConnections {
		ps.bad("sessions.max_connections", fmt.Sprintf("give 1 to %d (%d is the default; a JupyterLab tab opens a handful)", MaxSessionMaxConnections, DefaultSessionMaxConnections),
			"%d is not a connection cap", n)
	}
	o := c.Auth.OIDC
	if o.Issuer != "" {
		if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			ps.bad("auth.oidc.issuer", "give the issuer URL, such as https://login.example.org/realms/hpc", "%q is not an http(s) URL", o.Issuer)
		}
		if o.Audience == "" {
			ps.bad("auth.oidc.audience", "give the client ID the portal's tokens are issued to", "required with an issuer")
		}
		if o.UserClaim == "" {
			ps.bad("auth.oidc.user_claim", "name the claim that holds the Slurm user name, such as preferred_username", "required with an issuer")
		}
	}
	c.Auth.Proxy.validate(&ps)
	if len(c.Auth.Proxy.Trusted) > 0 && c.Auth.Proxy.Header == "" {
		ps.bad("auth.proxy.header", "name the header the proxy sets, such as X-Remote-User", "required with trusted proxies")
	}
	if c.Auth.Tokens.MaxLifetime < time.Hour {
		ps.bad("auth.tokens.max_lifetime", "give 1h or more (90d is usual)", "%s is shorter than 1h", c.Auth.Tokens.MaxLifetime)
	}
	if c.Limits.RatePerSecond <= 0 {
		ps.bad("limits.rate_per_second", "give each user's request rate, such as 20", "%g is not a rate", c.Limits.RatePerSecond)
	}
	if c.Limits.Burst < 1 {
		ps.bad("limits.burst", "give 1 or more (twice the rate is usual)", "%d is too few", c.Limits.Burst)
	}
	if c.Limits.MaxBodyBytes < 1024 {
		ps.bad("limits.max_body_bytes", "give 1024 or more (1048576 is usual)", "%d is too small for a submission", c.Limits.MaxBodyBytes)
	}

	if len(c.Clusters) == 0 {
		ps.bad("clusters", "list the clusters the portal serves, each with name, slurmrestd_url, jwt_key_file and tenants_file", "required")
	}
	seen := map[string]int{}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		cl.defaults()
		p := fmt.Sprintf("clusters[%d]", i)
		if !clusterName.MatchString(cl.Name) {
			ps.bad(p+".name", "use lowercase letters, digits, '-' and '_', up to 40", "%q is not a cluster name", cl.Name)
		} else if j, dup := seen[cl.Name]; dup {
			ps.bad(p+".name", "give each cluster its own name", "%q is also clusters[%d]", cl.Name, j)
		} else {
			seen[cl.Name] = i
		}
		ps.url(p+".slurmrestd_url", cl.SlurmrestdURL, true, "slurmrestd's URL, such as http://127.0.0.1:6820")
		if cl.SlurmrestdMaxAnswerMiB < 1 || cl.SlurmrestdMaxAnswerMiB > 16384 {
			ps.bad(p+".slurmrestd_max_answer_mib", "give 1 to 16384 (512 is usual; a job listing takes some 7 KiB a job)",
				"%d is not a size in MiB from 1 to 16384", cl.SlurmrestdMaxAnswerMiB)
		}
		ps.absFile(p+".jwt_key_file", cl.JWTKeyFile, true, "the cluster's jwt_hs256.key, to mint tokens for users")
		ps.absFile(p+".tenants_file", cl.TenantsFile, true, "the cluster's tenants.json, which strata-policy render writes")
		ps.absFile(p+".job_policy_file", cl.JobPolicyFile, false, "")
		ps.absFile(p+".work_dir", strings.ReplaceAll(cl.WorkDir, "{user}", "user"), true, "a directory every user may work in, such as /home/{user}")
		for k, root := range cl.OutputRoots {
			ps.absFile(fmt.Sprintf("%s.output_roots[%d]", p, k), root, true, "a shared folder jobs write in, such as /home")
		}
		ps.absFile(p+".session_root", strings.ReplaceAll(cl.SessionRoot, "{user}", "user"), false, "a shared folder the portal reads, such as /home/{user}/.strata/sessions")
		if cl.SessionIdleLimit < 5*time.Minute {
			ps.bad(p+".session_idle_limit", "give 5m or more (2h is usual)", "%s is shorter than 5m", cl.SessionIdleLimit)
		}
		if cl.PollUser == "" {
			ps.bad(p+".poll_user", "give an operator, to see every user's jobs", "required")
		}
		if cl.TokenLifetime < time.Minute || cl.TokenLifetime > time.Hour {
			ps.bad(p+".token_lifetime", "give 1m to 1h (5m is usual): the tokens act for users", "%s is out of range", cl.TokenLifetime)
		}
		if cl.PollInterval < 2*time.Second {
			ps.bad(p+".poll_interval", "give 2s or more (15s is usual)", "%s is shorter than 2s", cl.PollInterval)
		}
		if cl.StaleAfter < cl.PollInterval {
			ps.bad(p+".stale_after", "give more than poll_interval (four polls is usual)", "%s is shorter than poll_interval %s", cl.StaleAfter, cl.PollInterval)
		}
		ps.url(p+".reclaimd_url", cl.ReclaimdURL, false, "reclaimd's API URL")
		ps.absFile(p+".reclaimd_token_file", cl.ReclaimdTokenFile, cl.ReclaimdURL != "",
			"the file of reclaimd's API token (its api.token_file), with reclaimd_url: reclaimd answers no read without it")
		if cl.ReclaimdTokenFile != "" && cl.ReclaimdURL == "" {
			ps.bad(p+".reclaimd_token_file", "give reclaimd_url too, or leave both out", "given without reclaimd_url")
		}
		ps.absFile(p+".scontrol", cl.Scontrol, false, "")
		ps.url(p+".bridge_url", cl.BridgeURL, false, "the bridge's API URL")
		ps.absFile(p+".bridge_token_file", cl.BridgeTokenFile, cl.BridgeURL != "", "the file of the bridge's API token (its api.token_file), with bridge_url")
		if cl.BridgeTokenFile != "" && cl.BridgeURL == "" {
			ps.bad(p+".bridge_token_file", "give bridge_url too, or leave both out", "given without bridge_url")
		}
		ps.url(p+".prometheus_url", cl.PrometheusURL, false, "Prometheus's URL")
		if g := cl.GPUMetrics; g != (GPUMetrics{}) {
			if cl.PrometheusURL == "" {
				ps.bad(p+".gpu_metrics", "give the cluster a prometheus_url, or leave gpu_metrics out", "set without a prometheus_url")
			}
			for k, v := range map[string]string{"node_label": g.NodeLabel, "gpu_label": g.GPULabel, "util_metric": g.UtilMetric} {
				if v != "" && !promName.MatchString(v) {
					ps.bad(p+".gpu_metrics."+k, "give a Prometheus label or metric name, such as Hostname", "%q is not a Prometheus name", v)
				}
			}
			if g.Step < 0 || (g.Step > 0 && g.Step < time.Second) {
				ps.bad(p+".gpu_metrics.step", "give at least dcgm-exporter's scrape interval, such as 30s", "%s is shorter than 1s", g.Step)
			}
			if g.Window < 0 || (g.Window > 0 && g.Window < time.Second) {
				ps.bad(p+".gpu_metrics.window", "give a few scrape intervals, such as 5m", "%s is shorter than 1s", g.Window)
			}
			if g.IdleBelowPercent < 0 || g.IdleBelowPercent > 100 {
				ps.bad(p+".gpu_metrics.idle_below_percent", "give a percentage, such as 5", "%g is not a percentage", g.IdleBelowPercent)
			}
		}
		if w := cl.PriorityWeights; w != nil {
			ps.priorityWeights(p+".priority_weights", w)
		}
	}
	return strictyaml.Diagnostics(ps)
}

func (ps *problems) url(path, value string, required bool, what string) {
	if value == "" {
		if required {
			ps.bad(path, "give "+what, "required")
		}
		return
	}
	if err := fieldcheck.HTTPURL(value); err != nil {
		ps.bad(path, "give "+what, "%v", err)
	}
}

func (ps *problems) absFile(path, value string, required bool, what string) {
	switch {
	case value == "" && required:
		ps.bad(path, "give "+what, "required")
	case value != "" && (!filepath.IsAbs(value) || filepath.Clean(value) != value || value == "/"):
		ps.bad(path, "write an absolute path without . or .. parts", "%q is not an absolute clean path", value)
	}
}

// validateDatabase: a SQLite file's absolute path, or a postgres:// URL
// without a password (the password is in database_password_file). The
// URL itself is never repeated in a message: it may hold a password.
func (c *Config) validateDatabase(ps *problems) {
	if !pgsql.IsURL(c.Database) {
		if strings.Contains(c.Database, "://") {
			ps.bad("database", "give a SQLite file's absolute path, or postgres://user@host/database", "not a path, and not a postgres:// URL")
			return
		}
		ps.absFile("database", c.Database, true, "the SQLite file of tokens, audit log and submissions, or postgres://user@host/database")
		if c.DatabasePasswordFile != "" {
			ps.bad("database_password_file", "leave it out with a SQLite database, or give database: postgres://...",
				"set, but database is a SQLite file")
		}
		return
	}
	if err := pgsql.CheckURL(c.Database); err != nil {
		ps.bad("database", "write postgres://user@host[:port]/database[?sslmode=verify-full], the password in database_password_file", "%v", err)
	}
	ps.absFile("database_password_file", c.DatabasePasswordFile, false, "the file of the PostgreSQL password")
}

// DatabaseIsPostgres says whether the portal keeps its state in PostgreSQL.
func (c *Config) DatabaseIsPostgres() bool { return pgsql.IsURL(c.Database) }

// Cluster returns the cluster named name.
func (c *Config) Cluster(name string) (*Cluster, bool) {
	for i := range c.Clusters {
		if c.Clusters[i].Name == name {
			return &c.Clusters[i], true
		}
	}
	return nil, false
}

// TrustedProxies are the parsed proxy networks (an address is a /32 or /128).
func (c *Config) TrustedProxies() []netip.Prefix {
	var out []netip.Prefix
	for _, t := range c.Auth.Proxy.Trusted {
		if p, ok := parseTrusted(t); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseTrusted reads an address (a network of one) or a network.
func parseTrusted(t string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(t); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(t); err == nil && a.Zone() == "" {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

var (
	loopback4 = netip.MustParsePrefix("127.0.0.0/8")
	loopback6 = netip.MustParsePrefix("::1/128")
)

// validate refuses trusted networks that let more than the proxies name
// a user: every host of a trusted network may send the header as anyone,
// a cluster admin included, and the portal mints Slurm tokens for whoever
// it names. A network wider than the bounds needs allow_any; one that
// holds loopback (every user logged in on this host) needs
// trust_loopback.
func (p Proxy) validate(ps *problems) {
	if p.MinPrefixIPv4 < 8 || p.MinPrefixIPv4 > 32 {
		ps.bad("auth.proxy.min_prefix_ipv4", fmt.Sprintf("give 8 to 32 (%d is usual); for a wider network set allow_any: true", DefaultMinPrefixIPv4),
			"%d is not an IPv4 prefix length from 8 to 32", p.MinPrefixIPv4)
	}
	if p.MinPrefixIPv6 < 16 || p.MinPrefixIPv6 > 128 {
		ps.bad("auth.proxy.min_prefix_ipv6", fmt.Sprintf("give 16 to 128 (%d is usual); for a wider network set allow_any: true", DefaultMinPrefixIPv6),
			"%d is not an IPv6 prefix length from 16 to 128", p.MinPrefixIPv6)
	}
	for i, t := range p.Trusted {
		path := fmt.Sprintf("auth.proxy.trusted[%d]", i)
		n, ok := parseTrusted(t)
		if !ok {
			ps.bad(path, "give an address or a network, such as 10.0.0.5 or 10.0.0.0/24", "%q is neither an address nor a network", t)
			continue
		}
		if n.Addr().Is4In6() {
			// Callers' IPv4-mapped addresses are compared as IPv4: such an
			// entry would never match, or match what was not meant.
			ps.bad(path, "write the IPv4 address or network itself, such as 10.0.0.5 or 10.0.0.0/24",
				"%q is an IPv4-mapped IPv6 network", t)
			continue
		}
		bound, family := p.MinPrefixIPv4, "min_prefix_ipv4"
		if n.Addr().Is6() {
			bound, family = p.MinPrefixIPv6, "min_prefix_ipv6"
		}
		if n.Bits() < bound && !p.AllowAny {
			ps.bad(path, fmt.Sprintf("list the proxies' own addresses, or a network of /%d or narrower (auth.proxy.%s); "+
				"only if every address in it is a proxy you run, set auth.proxy.allow_any: true", bound, family),
				"%q is wider than /%d: every host in it could send %s as any user, a cluster admin included", t, bound, p.headerName())
		}
		if (n.Overlaps(loopback4) || n.Contains(loopback6.Addr())) && !p.TrustLoopback {
			ps.bad(path, "leave loopback out; only if the proxy runs on this host and no user logs in here, set auth.proxy.trust_loopback: true",
				"%q holds loopback: every user logged in on this host could send %s as any user, a cluster admin included", t, p.headerName())
		}
	}
}

func (p Proxy) headerName() string {
	if p.Header == "" {
		return "the user header"
	}
	return p.Header
}

// ListenLoopback reports whether only local clients reach the API.
func (c *Config) ListenLoopback() bool {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

var tresKey = regexp.MustCompile(`^[a-z]+(/[a-z0-9_:.-]+)?$`)

var promName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (ps *problems) priorityWeights(p string, w *PriorityWeights) {
	for k, v := range map[string]int64{"age": w.Age, "assoc": w.Assoc, "fairshare": w.Fairshare, "job_size": w.JobSize, "partition": w.Partition, "qos": w.QOS} {
		if v < 0 || v > 1<<32-1 {
			ps.bad(p+"."+k, "copy the weight from slurm.conf: 0 to 4294967295", "%d is not a weight", v)
		}
	}
	for k, v := range w.TRES {
		if !tresKey.MatchString(strings.ToLower(k)) {
			ps.bad(p+".tres."+k, "name a TRES as slurm.conf's PriorityWeightTRES does: cpu, mem, gres/gpu", "%q is not a TRES", k)
		}
		if v < 0 {
			ps.bad(p+".tres."+k, "copy the weight from slurm.conf's PriorityWeightTRES", "%g is not a weight", v)
		}
	}
	if w.MaxAge < 0 || (w.MaxAge > 0 && w.MaxAge < time.Minute) {
		ps.bad(p+".max_age", "copy PriorityMaxAge from slurm.conf (7d is its default)", "%s is shorter than a minute", w.MaxAge)
	}
	if w.CalcPeriod < 0 || (w.CalcPeriod > 0 && w.CalcPeriod < time.Minute) {
		ps.bad(p+".calc_period", "copy PriorityCalcPeriod from slurm.conf, in minutes (5m is its default)", "%s is shorter than a minute", w.CalcPeriod)
	}
}

func (c *Config) validatePages(ps *problems) {
	p := c.Pages
	if p.PublicURL != "" {
		u, err := url.Parse(p.PublicURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || (u.Path != "" && u.Path != "/"):
			ps.bad("pages.public_url", "give the portal's address as browsers reach it, such as https://portal.example.org", "%q is not a site's URL", p.PublicURL)
		case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
			ps.bad("pages.public_url", "serve the pages over https: browsers keep the sign-in cookie (Secure, __Host-) only there", "%q is not https", p.PublicURL)
		}
	}
	if p.SessionIdle < time.Minute {
		ps.bad("pages.session_idle", "give a duration of a minute or more, such as 1h", "%s is too short", p.SessionIdle)
	}
	if p.SessionMax < p.SessionIdle {
		ps.bad("pages.session_max", "give at least pages.session_idle, such as 12h", "%s is shorter than the idle time %s", p.SessionMax, p.SessionIdle)
	}
	if p.LoginLinkLifetime < time.Minute || p.LoginLinkLifetime > 24*time.Hour {
		ps.bad("pages.login_link_lifetime", "give a short lifetime, such as 15m (at most 24h)", "%s is out of range", p.LoginLinkLifetime)
	}
	if p.OIDC.ClientID != "" {
		if c.Auth.OIDC.Issuer == "" {
			ps.bad("pages.oidc.client_id", "set auth.oidc.issuer, the provider the pages sign in with", "needs auth.oidc.issuer")
		}
		if p.PublicURL == "" {
			ps.bad("pages.oidc.client_id", "set pages.public_url: the redirect is <public_url>/signin/callback", "needs pages.public_url")
		}
	}
	ps.absFile("pages.oidc.client_secret_file", p.OIDC.ClientSecretFile, false, "the file of the pages' OIDC client secret")
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

// validateSessionOrigin checks sessions.origin: an https origin whose host
// is not the pages' (a cookie is bound to a host, not to a port, so a
// port of the pages' host would be sent the page session's cookie).
func (c *Config) validateSessionOrigin(ps *problems) {
	o := c.Sessions.Origin
	if o == "" {
		return
	}
	const key, hint = "sessions.origin", "give a host of its own, such as https://sessions.portal.example.org or https://*.sessions.portal.example.org"
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		ps.bad(key, hint, "%q is not an origin", o)
		return
	}
	host := strings.ToLower(u.Hostname())
	domain, perSession := strings.CutPrefix(host, "*.")
	switch {
	case u.Scheme != "https" && (u.Scheme != "http" || !isLoopbackHost(host)):
		ps.bad(key, "serve sessions over https (http only on loopback)", "%q is not https", o)
		return
	case domain == "" || strings.Contains(domain, "*") || (perSession && net.ParseIP(domain) != nil):
		ps.bad(key, hint, "%q: a host name, or *. and a domain", o)
		return
	}
	if c.Pages.PublicURL == "" {
		return
	}
	pu, err := url.Parse(c.Pages.PublicURL)
	if err != nil {
		return // pages.public_url has its own problem
	}
	pages := strings.ToLower(pu.Hostname())
	switch {
	case pages == domain && !perSession:
		ps.bad(key, hint+": browsers send the pages' cookie to every port of the pages' host", "%q is the pages' host %s", o, pages)
	case perSession && strings.HasSuffix(pages, "."+domain):
		ps.bad(key, hint+" under which the pages' host is not", "%q covers the pages' host %s", o, pages)
	}
}
