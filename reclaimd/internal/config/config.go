// Package config reads /etc/strata/reclaimd.yaml with internal/strictyaml:
// strict YAML (an unknown key is an error with its line and column and
// the key it is closest to), defaults in code, durations in the grammar of
// internal/duration ("30s", "1h", "1d"), and a Validate whose problems
// carry their key's path, so that every problem of a file comes at once as
// "file:line:col: message (hint: ...)". The reclaim rules themselves are a
// separate JSON file in the format strata-policy renders
// (internal/reclaimrules).
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/fieldcheck"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/strictyaml"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// Config of reclaimd (controller and agent).
type Config struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Listen     string `yaml:"listen"`
	API        API    `yaml:"api"`
	// StateFile is the SQLite database of job states, intents and
	// decisions: the default store, used unless Database is set.
	StateFile string `yaml:"state_file"`
	// Database, when set, is where the controller keeps its state
	// instead: a SQLite file's absolute path, or the URL of a PostgreSQL
	// database (postgres://user@host:port/database?sslmode=verify-full)
	// without a password, which a standby controller on another host
	// shares (Standby).
	Database string `yaml:"database"`
	// DatabasePasswordFile holds the PostgreSQL password (a secret file,
	// held to internal/secretfile's rule; read again at every new
	// connection). Only with a postgres:// database.
	DatabasePasswordFile string `yaml:"database_password_file"`
	// Standby is active/standby on a PostgreSQL database.
	Standby   Standby       `yaml:"standby"`
	Interval  time.Duration `yaml:"interval"`
	RulesFile string        `yaml:"rules_file"`
	// TenantsFile is the tenant map strata-policy render writes
	// (internal/tenantmap): each account's tenant, the metrics' only label
	// and what rules match by tenant. An account not in it is its own
	// tenant.
	TenantsFile string `yaml:"tenants_file"`
	Slurm       Slurm  `yaml:"slurm"`
	// Source of GPU samples: "agents" (reclaimd agent on every GPU node)
	// or "prometheus" (sites that already run dcgm-exporter).
	Source     string     `yaml:"source"`
	Agents     Agents     `yaml:"agents"`
	Prometheus Prometheus `yaml:"prometheus"`
	Notify     Notify     `yaml:"notify"`
	Agent      Agent      `yaml:"agent"`
	Health     Health     `yaml:"health"`
	Recovery   Recovery   `yaml:"recovery"`
}

// Standby: controllers of one cluster on several hosts share one
// PostgreSQL database, and one of them at a time, the holder of the
// controller lease, acts.
type Standby struct {
	// TakeoverWithin bounds how long after the active controller's last
	// renewal of the lease (its death, a cut network, a pause) a standby
	// acts: the lease lasts three quarters of it, and a standby tries
	// every quarter.
	TakeoverWithin time.Duration `yaml:"takeover_within"`
}

// LeaseTTL is how long the controller lease lasts without renewal.
func (s Standby) LeaseTTL() time.Duration { return s.TakeoverWithin * 3 / 4 }

// DatabaseSetting is the database the controller keeps its state in:
// database, or state_file when database is not set.
func (c Config) DatabaseSetting() string {
	if c.Database != "" {
		return c.Database
	}
	return c.StateFile
}

// DatabaseIsPostgres says whether the controller keeps its state in
// PostgreSQL (and so may have a standby).
func (c Config) DatabaseIsPostgres() bool { return pgsql.IsURL(c.Database) }

// API is the controller's read API on listen.
type API struct {
	// TokenFile holds the bearer token every /v1 request must carry (the
	// portal's clusters[].reclaimd_token_file is the same file): the
	// answers name every tenant's jobs and users. A secret held to
	// internal/secretfile's rule.
	TokenFile string `yaml:"token_file"`
}

// DefaultAPITokenFile is where the controller finds its API's token.
const DefaultAPITokenFile = "/etc/strata/reclaimd-api.token"

// Health is GPU node health: drain a node whose GPU reports a fatal
// fault, resume it once a health command passes on it, and never hold
// more than a share of a partition drained.
type Health struct {
	Enabled bool `yaml:"enabled"`
	// FatalXids are the Xids that drain a node; DrainOn the other fault
	// kinds that do (ecc_uncorrectable, retired_pages_pending,
	// row_remap_failure).
	FatalXids []int    `yaml:"fatal_xids"`
	DrainOn   []string `yaml:"drain_on"`
	// ApplicationXids are the Xids the job's own program causes
	// (failure.DefaultApplicationXids): they never drain a node, and a
	// job whose only Xids are these is no gpu_fault (recovery classes it
	// by the rest of its evidence, user_error for a non-zero exit). Read
	// with health on or off: recovery classifies either way.
	ApplicationXids []int `yaml:"application_xids"`
	// MaxDrainedShare is the most of a partition's nodes Strata holds
	// drained at once (0.1: one node in ten); a drain past it is not
	// made, and admins are told.
	MaxDrainedShare float64 `yaml:"max_drained_share"`
	// MaxFaultAge is how old a fault may be and still drain a node.
	MaxFaultAge time.Duration `yaml:"max_fault_age"`
	// CheckCommand is argv with {node} for the node (no shell), run by the
	// controller on a drained node once its jobs have ended, and every
	// check_interval until it passes (exit 0), which resumes the node.
	// Empty: Strata never resumes a node itself.
	CheckCommand  []string      `yaml:"check_command"`
	CheckInterval time.Duration `yaml:"check_interval"`
	CheckTimeout  time.Duration `yaml:"check_timeout"`
	// DryRun logs and records each drain it would make, and makes none.
	DryRun bool `yaml:"dry_run"`
}

// Slurm reaches slurmrestd.
type Slurm struct {
	URL       string `yaml:"url"`
	User      string `yaml:"user"`
	TokenFile string `yaml:"token_file"`
	// Scontrol requeues on Slurm 25.11 and older, which have no REST requeue.
	Scontrol string `yaml:"scontrol"`
	// SignalBatchOnly sends checkpoint signals to the batch shell only,
	// under rules whose signal.mode is skip-unless-requested (the jobs
	// that asked); false sends them to every process of the job.
	SignalBatchOnly bool `yaml:"signal_batch_only"`
	// MaxAnswerMiB caps one answer of slurmrestd. Job listings are read
	// as a stream and cost the jobs kept, not their size; the cap stops a
	// runaway answer.
	MaxAnswerMiB int `yaml:"max_answer_mib"`
}

// Agents reaches the node agents.
type Agents struct {
	URLTemplate string        `yaml:"url_template"`
	Timeout     time.Duration `yaml:"timeout"`
	// TokenFile holds the secret the agents sign their snapshots with
	// (the same file as agent.token_file on every GPU node): a snapshot
	// not signed with it is refused.
	TokenFile string `yaml:"token_file"`
}

// Prometheus reads dcgm-exporter's metrics.
type Prometheus struct {
	URL string `yaml:"url"`
	// Step must be at least the scrape interval; each sample is the
	// maximum over one step.
	Step time.Duration `yaml:"step"`
	// Window is how far back each cycle asks: the longest rule window.
	Window    time.Duration `yaml:"window"`
	NodeLabel string        `yaml:"node_label"`
	// MemActivityMetric: DCGM_FI_PROF_DRAM_ACTIVE (a ratio, needs DCGM
	// profiling) or DCGM_FI_DEV_MEM_COPY_UTIL (a percentage).
	MemActivityMetric string        `yaml:"mem_activity_metric"`
	Timeout           time.Duration `yaml:"timeout"`
	// MaxResponseMiB bounds one query_range answer read. Only the first
	// read of a node's window is large (about 10 KiB per GPU and hour at
	// a 30s step); an answer over the bound is asked again in halves of
	// its time range, so the bound limits memory, not the cluster's size.
	MaxResponseMiB int `yaml:"max_response_mib"`
}

// Notify says how owners are told.
type Notify struct {
	Webhook      string `yaml:"webhook"`
	Mail         bool   `yaml:"mail"`
	Sendmail     string `yaml:"sendmail"`
	MailFrom     string `yaml:"mail_from"`
	MailDomain   string `yaml:"mail_domain"`
	MailTemplate string `yaml:"mail_template"`
	// AdminMail are the addresses of the admins' notices (node drained,
	// resumed, the drain cap hit), sent when mail is on.
	AdminMail []string `yaml:"admin_mail"`
}

// Agent configures `reclaimd agent`.
type Agent struct {
	Listen   string        `yaml:"listen"`
	Node     string        `yaml:"node"` // default: the short host name
	Interval time.Duration `yaml:"interval"`
	Window   time.Duration `yaml:"window"`
	// Replay plays a recording instead of reading NVML (demos, tests).
	Replay string `yaml:"replay"`
	// FaultsFile, beside a replay, is read every round for GPU faults
	// injected by hand (source.FaultFile: lines "gpu,kind[,code]", such
	// as "3,xid,79"), for demos and the test beds. With NVML the faults
	// come from the driver's events, and this key is refused.
	FaultsFile string `yaml:"faults_file"`
	// Record appends every sample to this file, for a later replay.
	Record string `yaml:"record"`
	// ProcRoot is where /proc is (for job mapping).
	ProcRoot string `yaml:"proc_root"`
	// TokenFile holds the secret shared with the controller
	// (agents.token_file): every snapshot is signed with it.
	TokenFile string `yaml:"token_file"`
}

// DefaultAgentTokenFile is where the controller and the agents find the
// secret they share.
const DefaultAgentTokenFile = "/etc/strata/reclaimd-agent.token"

// drainKinds are the fault kinds other than xid that health.drain_on
// takes.
var drainKinds = []string{string(source.FaultECC), string(source.FaultRetiredPages), string(source.FaultRowRemap)}

// Default is the configuration used for keys the file leaves out.
func Default() Config {
	return Config{
		APIVersion: "strata/v1", Kind: "ReclaimdConfig",
		Listen: "127.0.0.1:9811", API: API{TokenFile: DefaultAPITokenFile}, StateFile: "/var/lib/strata/reclaimd/reclaimd.db", Interval: 30 * time.Second,
		Standby:   Standby{TakeoverWithin: 30 * time.Second},
		RulesFile: "/etc/strata/rendered/reclaim-rules.json", TenantsFile: "/etc/strata/rendered/tenants.json",
		Slurm: Slurm{URL: "http://127.0.0.1:6820", User: "reclaimd", TokenFile: "/etc/strata/reclaimd.jwt",
			Scontrol: "scontrol", SignalBatchOnly: true, MaxAnswerMiB: 512},
		Source: "agents",
		Agents: Agents{URLTemplate: "http://{node}:9810", Timeout: 5 * time.Second, TokenFile: DefaultAgentTokenFile},
		Prometheus: Prometheus{URL: "http://127.0.0.1:9090", Step: 30 * time.Second, Window: 2 * time.Hour, NodeLabel: "Hostname",
			MemActivityMetric: "DCGM_FI_PROF_DRAM_ACTIVE", Timeout: 30 * time.Second, MaxResponseMiB: 64},
		Notify: Notify{Sendmail: "/usr/sbin/sendmail", MailFrom: "reclaimd", AdminMail: []string{}},
		Agent: Agent{Listen: "0.0.0.0:9810", Interval: 10 * time.Second, Window: 2 * time.Hour, ProcRoot: "/proc",
			TokenFile: DefaultAgentTokenFile},
		Health: Health{FatalXids: slices.Clone(controller.DefaultFatalXids), DrainOn: slices.Clone(drainKinds),
			ApplicationXids: slices.Clone(failure.DefaultApplicationXids),
			MaxDrainedShare: 0.1, MaxFaultAge: 24 * time.Hour, CheckCommand: []string{}, CheckInterval: 10 * time.Minute, CheckTimeout: 15 * time.Minute},
		Recovery: defaultRecovery(),
	}
}

// Load reads and validates a file. A file that cannot be read is an
// error wrapping the os error; a file with problems is
// strictyaml.Diagnostics, every problem at once.
func Load(path string) (Config, error) {
	return strictyaml.LoadWithDefaults(path, Default(), decodeOptions)
}

// Parse decodes data strictly over the defaults and validates it; an
// empty file means the defaults. name names the file in diagnostics.
func Parse(name string, data []byte) (Config, error) {
	return strictyaml.ParseWithDefaults(name, data, Default(), decodeOptions)
}

var decodeOptions = strictyaml.Options{What: "a reclaimd config", AllowEmpty: true,
	Nouns:   map[reflect.Type]string{reflect.TypeFor[Config](): "the reclaimd config"},
	Example: "start with apiVersion: strata/v1 and kind: ReclaimdConfig (see /etc/strata/reclaimd.yaml)"}

// Validate returns every problem with its key's path.
func (c Config) Validate() strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	bad := func(path, hint, format string, args ...any) {
		ds = append(ds, strictyaml.Diagnostic{Path: path, Msg: path + ": " + fmt.Sprintf(format, args...), Hint: hint})
	}
	if c.APIVersion != "strata/v1" {
		bad("apiVersion", "use apiVersion: strata/v1", "%q is not supported", c.APIVersion)
	}
	if c.Kind != "ReclaimdConfig" {
		bad("kind", "use kind: ReclaimdConfig", "%q is not a reclaimd config", c.Kind)
	}
	if c.Interval < 5*time.Second {
		bad("interval", "give 5s or more (30s is usual): slurmctld would answer a poll every few seconds for nothing",
			"%s is shorter than 5s", c.Interval)
	}
	if c.StateFile == "" && c.Database == "" {
		bad("state_file", "give the SQLite database of job states, such as /var/lib/strata/reclaimd/reclaimd.db", "required")
	}
	absClean := func(v string) bool { return filepath.IsAbs(v) && filepath.Clean(v) == v && v != "/" }
	switch {
	case pgsql.IsURL(c.Database):
		// The URL itself is never repeated: it may hold a password.
		if err := pgsql.CheckURL(c.Database); err != nil {
			bad("database", "write postgres://user@host[:port]/database[?sslmode=verify-full], the password in database_password_file", "%v", err)
		}
		if c.DatabasePasswordFile != "" && !absClean(c.DatabasePasswordFile) {
			bad("database_password_file", "write an absolute path without . or .. parts", "%q is not an absolute clean path", c.DatabasePasswordFile)
		}
	case strings.Contains(c.Database, "://"):
		bad("database", "give a SQLite file's absolute path, or postgres://user@host/database", "not a path, and not a postgres:// URL")
	default:
		if c.Database != "" && !absClean(c.Database) {
			bad("database", "write an absolute path without . or .. parts, or postgres://user@host/database", "%q is not an absolute clean path", c.Database)
		}
		if c.DatabasePasswordFile != "" {
			bad("database_password_file", "leave it out with a SQLite database, or give database: postgres://...", "set, but the database is a SQLite file")
		}
	}
	if w := c.Standby.TakeoverWithin; w < 4*time.Second || w > 10*time.Minute {
		bad("standby.takeover_within", "give 4s to 10m (30s is usual): shorter renews the lease too often for a busy database, longer leaves the cluster without reclaim and recovery that long",
			"%s is out of range", w)
	}
	if c.RulesFile == "" {
		bad("rules_file", "give the reclaim rules: strata-policy render writes /etc/strata/rendered/reclaim-rules.json", "required")
	}
	if c.TenantsFile == "" {
		bad("tenants_file", "give the tenant map: strata-policy render writes /etc/strata/rendered/tenants.json", "required")
	}
	if c.Slurm.URL == "" || c.Slurm.TokenFile == "" {
		bad("slurm", "set slurm.url and slurm.token_file: reclaimd acts through slurmrestd", "url and token_file are required")
	} else if err := fieldcheck.HTTPURL(c.Slurm.URL); err != nil {
		bad("slurm.url", "give slurmrestd's URL, such as http://127.0.0.1:6820", "%v", err)
	}
	if c.Source == "prometheus" && c.Prometheus.URL != "" {
		if err := fieldcheck.HTTPURL(c.Prometheus.URL); err != nil {
			bad("prometheus.url", "give Prometheus's URL, such as http://127.0.0.1:9090", "%v", err)
		}
	}
	if c.Notify.Webhook != "" {
		if err := fieldcheck.HTTPURL(c.Notify.Webhook); err != nil {
			bad("notify.webhook", "give the URL notices are POSTed to, such as https://chat.example.org/hooks/reclaim, or leave it out", "%v", err)
		}
	}
	if c.Health.Enabled && c.Source != "agents" {
		bad("health.enabled", "set source: agents: the GPU faults come from the node agents", "node health needs source: agents, not %s", c.Source)
	}
	if c.Source != "agents" && c.Source != "prometheus" {
		hint := "agents reads reclaimd agent on every GPU node; prometheus reads dcgm-exporter's metrics"
		if g := strictyaml.Closest(c.Source, []string{"agents", "prometheus"}); g != "" {
			hint = "did you mean " + g + "?"
		}
		bad("source", hint, "want agents or prometheus, got %q", c.Source)
	}
	if c.Source == "prometheus" && (c.Prometheus.URL == "" || c.Prometheus.Step <= 0 || c.Prometheus.Window < c.Prometheus.Step) {
		bad("prometheus", "set prometheus.url, a step of at least the scrape interval, and a window of the longest rule window",
			"url, a positive step and a window of at least one step are required")
	}
	for _, f := range []struct{ path, value string }{{"api.token_file", c.API.TokenFile}, {"agents.token_file", c.Agents.TokenFile}, {"agent.token_file", c.Agent.TokenFile}} {
		switch {
		case f.value == "" && f.path == "api.token_file":
			bad(f.path, "give the file of the API's bearer token, such as "+DefaultAPITokenFile+" (the portal's reclaimd_token_file)",
				"required: the API answers only requests that carry it")
		case f.value == "":
			bad(f.path, "give the file of the secret the agents and the controller share, such as "+DefaultAgentTokenFile,
				"required: the controller believes only snapshots signed with it")
		case !filepath.IsAbs(f.value) || filepath.Clean(f.value) != f.value:
			bad(f.path, "write an absolute path without . or .. parts", "%q is not an absolute clean path", f.value)
		}
	}
	if !strings.Contains(c.Agents.URLTemplate, "{node}") {
		bad("agents.url_template", "write {node} where the Slurm node name goes, such as http://{node}:9810",
			"%q has no {node}", c.Agents.URLTemplate)
	} else if err := fieldcheck.HTTPURL(strings.ReplaceAll(c.Agents.URLTemplate, "{node}", "gpu01")); c.Source == "agents" && err != nil {
		bad("agents.url_template", "write an http:// URL with {node} where the Slurm node name goes, such as http://{node}:9810",
			"with {node} as gpu01, %v", err)
	}
	checkListen := func(path, addr, example string) {
		if addr == "" {
			return
		}
		hint := "give host:port, such as " + example + " (an IPv6 host in brackets: [::1]:9811)"
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			why := err.Error()
			if ae := (*net.AddrError)(nil); errors.As(err, &ae) {
				why = ae.Err
			}
			bad(path, hint, "%q is not host:port: %s", addr, why)
			return
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
			bad(path, hint, "port %q is not a number from 0 to 65535", port)
		}
	}
	checkListen("listen", c.Listen, "127.0.0.1:9811")
	checkListen("agent.listen", c.Agent.Listen, "0.0.0.0:9810")
	if c.Source == "agents" && c.Agents.Timeout <= 0 {
		// http.Client reads a zero timeout as none: one silent agent
		// would stall every cycle.
		bad("agents.timeout", "give a bound well under the interval, such as 5s", "%s: an agent that does not answer would stall every cycle", c.Agents.Timeout)
	} else if c.Source == "agents" && c.Interval >= 5*time.Second && c.Agents.Timeout >= c.Interval {
		bad("agents.timeout", "give a bound well under the interval, such as 5s", "%s is not shorter than the interval (%s): one slow agent would make every cycle late", c.Agents.Timeout, c.Interval)
	}
	if c.Slurm.MaxAnswerMiB < 1 || c.Slurm.MaxAnswerMiB > 16384 {
		bad("slurm.max_answer_mib", "give 1 to 16384 (512 is usual; a job listing takes some 7 KiB a job)",
			"%d is not a size in MiB from 1 to 16384", c.Slurm.MaxAnswerMiB)
	}
	if c.Source == "prometheus" && (c.Prometheus.MaxResponseMiB < 1 || c.Prometheus.MaxResponseMiB > 16384) {
		bad("prometheus.max_response_mib", "give 1 to 16384 (64 is usual): answers over it are asked again in smaller pieces",
			"%d is not a size in MiB from 1 to 16384", c.Prometheus.MaxResponseMiB)
	}
	if c.Source == "prometheus" && c.Prometheus.Timeout <= 0 {
		bad("prometheus.timeout", "give a bound under the interval, such as 30s", "%s: a Prometheus that does not answer would stall every cycle", c.Prometheus.Timeout)
	}
	if c.Notify.Mail && c.Notify.MailTemplate != "" {
		// Read here so that check-config, not the first mail hours later,
		// says the template is missing or broken.
		if text, err := os.ReadFile(c.Notify.MailTemplate); err != nil {
			bad("notify.mail_template", "give a readable template file, or leave mail_template out for the built-in one", "%v", err)
		} else if _, err := notify.ParseTemplate(string(text)); err != nil {
			bad("notify.mail_template", "fix the template (Go text/template syntax), or leave mail_template out for the built-in one", "%s: %v", c.Notify.MailTemplate, err)
		}
	}
	if c.Notify.Mail && c.Notify.Sendmail == "" {
		bad("notify.sendmail", "give the sendmail program, such as /usr/sbin/sendmail, or set mail: false", "required when mail is on")
	}
	if c.Agent.FaultsFile != "" && c.Agent.Replay == "" {
		bad("agent.faults_file", "leave it out: on a GPU node the faults come from NVML's events; faults_file is for a replay (agent.replay)",
			"set without agent.replay")
	} else if f := c.Agent.FaultsFile; f != "" && (!filepath.IsAbs(f) || filepath.Clean(f) != f) {
		bad("agent.faults_file", "write an absolute path without . or .. parts, such as /run/strata/faults.csv", "%q is not an absolute clean path", f)
	}
	for i, a := range c.Notify.AdminMail {
		if a == "" || strings.ContainsAny(a, ", \t\r\n<>") {
			bad(fmt.Sprintf("notify.admin_mail[%d]", i), "give one address a list item, such as ops@example.org", "%q is not a mail address", a)
		}
	}
	c.Health.validate(bad)
	if c.Agent.Interval < time.Second {
		bad("agent.interval", "give 1s or more (10s is usual)", "%s is shorter than 1s", c.Agent.Interval)
	}
	if c.Agent.Window < 2*c.Agent.Interval {
		bad("agent.window", "keep at least the longest rule window, and two samples or more",
			"%s keeps fewer than two samples of %s", c.Agent.Window, c.Agent.Interval)
	}
	c.validateRecovery(bad)
	return ds
}

// validate reports the problems of the health section.
func (h Health) validate(bad func(path, hint, format string, args ...any)) {
	seen := map[int]bool{}
	for i, x := range h.FatalXids {
		path := fmt.Sprintf("health.fatal_xids[%d]", i)
		switch {
		case x < 1 || x > source.MaxFaultCode:
			bad(path, "give Xid codes from NVIDIA's Xid catalogue, such as 79 (GPU fell off the bus)", "%d is not an Xid", x)
		case seen[x]:
			bad(path, "list each Xid once", "Xid %d listed twice", x)
		}
		seen[x] = true
	}
	apps := map[int]bool{}
	for i, x := range h.ApplicationXids {
		path := fmt.Sprintf("health.application_xids[%d]", i)
		switch {
		case x < 1 || x > source.MaxFaultCode:
			bad(path, "give Xid codes from NVIDIA's Xid catalogue, such as 13 (graphics engine exception)", "%d is not an Xid", x)
		case apps[x]:
			bad(path, "list each Xid once", "Xid %d listed twice", x)
		case seen[x]:
			bad(path, "an Xid the job's program causes is not the GPU's fault: take it out of one of the two lists",
				"Xid %d is in health.fatal_xids too", x)
		}
		apps[x] = true
	}
	kinds := map[string]bool{}
	for i, k := range h.DrainOn {
		path := fmt.Sprintf("health.drain_on[%d]", i)
		switch {
		case k == string(source.FaultXid):
			bad(path, "list the Xids that drain a node under health.fatal_xids", "xid is not a kind for drain_on")
		case !slices.Contains(drainKinds, k):
			hint := "the kinds are " + strings.Join(drainKinds, ", ")
			if g := strictyaml.Closest(k, drainKinds); g != "" {
				hint = "did you mean " + g + "?"
			}
			bad(path, hint, "%q is not a fault kind", k)
		case kinds[k]:
			bad(path, "list each kind once", "%s listed twice", k)
		}
		kinds[k] = true
	}
	if h.MaxDrainedShare <= 0 || h.MaxDrainedShare > 1 || h.MaxDrainedShare != h.MaxDrainedShare {
		bad("health.max_drained_share", "give a share above 0 and at most 1, such as 0.1 (one node in ten of a partition)",
			"%g is not a share of a partition's nodes", h.MaxDrainedShare)
	}
	if h.MaxFaultAge < time.Minute {
		bad("health.max_fault_age", "give 1m or more (1d is usual): a fault older than it drains nothing", "%s is shorter than 1m", h.MaxFaultAge)
	}
	if len(h.CheckCommand) > 0 {
		switch {
		case h.CheckCommand[0] == "":
			bad("health.check_command", "start with the program, such as [ssh, \"{node}\", dcgmi, diag, -r, \"1\"]", "the program is empty")
		case !slices.ContainsFunc(h.CheckCommand, func(a string) bool { return strings.Contains(a, "{node}") }):
			bad("health.check_command", "write {node} where the node's name goes, such as [ssh, \"{node}\", dcgmi, diag, -r, \"1\"]: "+
				"the controller runs the command, so without {node} it checks its own host", "no {node} in %q", strings.Join(h.CheckCommand, " "))
		}
	}
	if h.CheckInterval < time.Minute {
		bad("health.check_interval", "give 1m or more (10m is usual)", "%s is shorter than 1m", h.CheckInterval)
	}
	if h.CheckTimeout < 10*time.Second || h.CheckTimeout > 6*time.Hour {
		bad("health.check_timeout", "give 10s to 6h (dcgmi diag -r 1 takes about a minute, -r 3 up to half an hour)",
			"%s is not from 10s to 6h", h.CheckTimeout)
	}
}
