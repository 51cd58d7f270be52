// Package config reads /etc/strata/reclaimd.yaml: strict YAML (unknown
// keys are errors with their line), defaults in code, and a Validate that
// reports every problem with its path. The reclaim rules themselves are a
// separate JSON file in the format strata-policy renders
// (internal/reclaimrules).
package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/yamlconf"
)

// Config of reclaimd (controller and agent).
type Config struct {
	APIVersion string        `yaml:"apiVersion"`
	Kind       string        `yaml:"kind"`
	Listen     string        `yaml:"listen"`
	StateFile  string        `yaml:"state_file"`
	Interval   time.Duration `yaml:"interval"`
	RulesFile  string        `yaml:"rules_file"`
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
}

// Slurm reaches slurmrestd.
type Slurm struct {
	URL       string `yaml:"url"`
	User      string `yaml:"user"`
	TokenFile string `yaml:"token_file"`
	// Scontrol requeues on Slurm 25.11 and older, which have no REST requeue.
	Scontrol string `yaml:"scontrol"`
	// SignalBatchOnly sends checkpoint signals to the batch shell only.
	SignalBatchOnly bool `yaml:"signal_batch_only"`
}

// Agents reaches the node agents.
type Agents struct {
	URLTemplate string        `yaml:"url_template"`
	Timeout     time.Duration `yaml:"timeout"`
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
}

// Notify says how owners are told.
type Notify struct {
	Webhook      string `yaml:"webhook"`
	Mail         bool   `yaml:"mail"`
	Sendmail     string `yaml:"sendmail"`
	MailFrom     string `yaml:"mail_from"`
	MailDomain   string `yaml:"mail_domain"`
	MailTemplate string `yaml:"mail_template"`
}

// Agent configures `reclaimd agent`.
type Agent struct {
	Listen   string        `yaml:"listen"`
	Node     string        `yaml:"node"` // default: the short host name
	Interval time.Duration `yaml:"interval"`
	Window   time.Duration `yaml:"window"`
	// Replay plays a recording instead of reading NVML (demos, tests).
	Replay string `yaml:"replay"`
	// Record appends every sample to this file, for a later replay.
	Record string `yaml:"record"`
	// ProcRoot is where /proc is (for job mapping).
	ProcRoot string `yaml:"proc_root"`
}

// Default is the configuration used for keys the file leaves out.
func Default() Config {
	return Config{
		APIVersion: "strata/v1", Kind: "ReclaimdConfig",
		Listen: "127.0.0.1:9811", StateFile: "/var/lib/strata/reclaimd/reclaimd.db", Interval: 30 * time.Second,
		RulesFile: "/etc/strata/reclaim-rules.json", TenantsFile: "/etc/strata/tenants.json",
		Slurm: Slurm{URL: "http://127.0.0.1:6820", User: "reclaimd", TokenFile: "/etc/strata/reclaimd.jwt",
			Scontrol: "scontrol", SignalBatchOnly: true},
		Source: "agents",
		Agents: Agents{URLTemplate: "http://{node}:9810", Timeout: 5 * time.Second},
		Prometheus: Prometheus{URL: "http://127.0.0.1:9090", Step: 30 * time.Second, Window: time.Hour, NodeLabel: "Hostname",
			MemActivityMetric: "DCGM_FI_PROF_DRAM_ACTIVE", Timeout: 30 * time.Second},
		Notify: Notify{Sendmail: "/usr/sbin/sendmail", MailFrom: "reclaimd"},
		Agent:  Agent{Listen: "0.0.0.0:9810", Interval: 10 * time.Second, Window: 15 * time.Minute, ProcRoot: "/proc"},
	}
}

// Load reads and validates a file.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return Parse(path, data)
}

// Parse decodes data strictly over the defaults and validates it; an
// empty file means the defaults.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	if err := yamlconf.Decode(name, data, &cfg, func() []error { return cfg.Validate() }); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate returns every problem with its key's path.
func (c Config) Validate() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != "strata/v1" {
		bad("apiVersion", "%q is not supported: use strata/v1", c.APIVersion)
	}
	if c.Kind != "ReclaimdConfig" {
		bad("kind", "%q: want ReclaimdConfig", c.Kind)
	}
	if c.Interval < 5*time.Second {
		bad("interval", "%s is shorter than 5s: slurmctld would answer a poll every few seconds for nothing", c.Interval)
	}
	if c.StateFile == "" {
		bad("state_file", "required")
	}
	if c.RulesFile == "" {
		bad("rules_file", "required: the reclaim rules (strata-policy render writes /etc/strata/reclaim-rules.json)")
	}
	if c.TenantsFile == "" {
		bad("tenants_file", "required: the tenant map (strata-policy render writes /etc/strata/tenants.json)")
	}
	if c.Slurm.URL == "" || c.Slurm.TokenFile == "" {
		bad("slurm", "url and token_file are required")
	}
	if c.Source != "agents" && c.Source != "prometheus" {
		bad("source", "%q: want agents or prometheus", c.Source)
	}
	if c.Source == "prometheus" && (c.Prometheus.URL == "" || c.Prometheus.Step <= 0 || c.Prometheus.Window < c.Prometheus.Step) {
		bad("prometheus", "url, a positive step and a window of at least one step are required")
	}
	if !strings.Contains(c.Agents.URLTemplate, "{node}") {
		bad("agents.url_template", "%q has no {node}", c.Agents.URLTemplate)
	}
	if c.Notify.Mail && c.Notify.Sendmail == "" {
		bad("notify.sendmail", "required when mail is on")
	}
	if c.Agent.Interval < time.Second {
		bad("agent.interval", "%s: at least 1s", c.Agent.Interval)
	}
	if c.Agent.Window < 2*c.Agent.Interval {
		bad("agent.window", "%s keeps fewer than two samples of %s", c.Agent.Window, c.Agent.Interval)
	}
	return errs
}
