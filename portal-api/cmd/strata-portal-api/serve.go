package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/service"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// pagesHandler makes the pages, over the same store and authenticator as
// the API.
func pagesHandler(log *slog.Logger, cfg *config.Config, st *store.Store, a *auth.Authenticator, src web.Source) (*web.Handler, error) {
	var oidc *web.OIDC
	if p := cfg.Pages; p.OIDC.ClientID != "" {
		secret := ""
		if p.OIDC.ClientSecretFile != "" {
			b, warning, _, err := secretfile.Rule{}.Read(p.OIDC.ClientSecretFile)
			if err != nil {
				return nil, fmt.Errorf("pages.oidc.client_secret_file: %w", err)
			}
			if warning != "" {
				log.Warn("pages' OIDC client secret readable by another group", "file", p.OIDC.ClientSecretFile, "warning", warning)
			}
			secret = strings.TrimSpace(string(b))
		}
		oidc = &web.OIDC{Issuer: cfg.Auth.OIDC.Issuer, ClientID: p.OIDC.ClientID, ClientSecret: secret,
			RedirectURL: strings.TrimRight(p.PublicURL, "/") + "/signin/callback", UserClaim: cfg.Auth.OIDC.UserClaim}
	}
	return web.New(web.Config{Store: st, Auth: a, OIDC: oidc, IdleTimeout: cfg.Pages.SessionIdle, MaxAge: cfg.Pages.SessionMax, Log: log,
		Source: src})
}

// checkKey holds a cluster's jwt key to the rule of every secret file
// (internal/secretfile): others may not read or write it.
func checkKey(log *slog.Logger, path string) error {
	warning, err := secretfile.Rule{}.Verify(path)
	if err != nil {
		return fmt.Errorf("jwt_key_file: %w", err)
	}
	if warning != "" && log != nil {
		log.Warn("jwt key readable by another group", "file", path, "warning", warning)
	}
	return nil
}

func cmdServe(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	// Every file the configuration names, checked as check-config checks
	// them, before anything is opened.
	warnings, err := preflight(cfg)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w)
	}
	st, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // after daemon.Run has waited for every loop and request
	reg := prometheus.NewRegistry()
	buildinfo.Register(reg, "portal-api")
	metrics := cluster.NewMetrics(reg)

	holder := leaseHolder()
	var clusters []service.Cluster
	var pollers []*cluster.Poller
	var reload []daemon.Reloader
	for i, cl := range cfg.Clusters {
		if err := checkKey(log, cl.JWTKeyFile); err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		signer, err := slurmrest.NewKeySigner(cl.JWTKeyFile, cl.TokenLifetime)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		tenants, err := daemon.Load(ctx, "tenant map of "+cl.Name, func(context.Context) (*tenantmap.Map, error) {
			return loadTenants(cl)
		})
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		name, file := cl.Name, cl.TenantsFile
		tenants.OnReload(func(m *tenantmap.Map) {
			log.Info("tenant map reloaded", "cluster", name, "file", file, "tenants", len(m.Tenants))
		})
		reload = append(reload, tenants)
		policy := func() *jobpolicy.Policy { return nil }
		if cl.JobPolicyFile != "" {
			pv, err := daemon.Load(ctx, "job policy of "+cl.Name, func(context.Context) (*jobpolicy.Policy, error) {
				return jobpolicy.Load(cl.JobPolicyFile)
			})
			if err != nil {
				return fmt.Errorf("cluster %s: %w", cl.Name, err)
			}
			reload = append(reload, pv)
			policy = pv.Get
		} else {
			log.Warn("cluster takes no submissions through the portal: no job_policy_file", "cluster", cl.Name)
		}
		bridge, err := bridgeClient(log, cl)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		if bridge != nil {
			reload = append(reload, bridge.token)
		}
		// reclaimd's API token: read again when it changes and on SIGHUP.
		var reclaimdToken func() ([]byte, error)
		if cl.ReclaimdTokenFile != "" {
			f := &secretfile.File{Path: cl.ReclaimdTokenFile, What: "reclaimd_token_file", Rule: secretRule, Log: log}
			if _, err := f.Get(); err != nil {
				return fmt.Errorf("cluster %s: reclaimd_token_file: %w", cl.Name, err)
			}
			reload, reclaimdToken = append(reload, f), f.Get
		}
		sc := slurmrest.Config{URL: cl.SlurmrestdURL, User: cl.PollUser, Tokens: signer,
			MaxAnswerBytes:   int64(cl.SlurmrestdMaxAnswerMiB) << 20,
			MaxAnswerSetting: fmt.Sprintf("clusters[%d].slurmrestd_max_answer_mib (cluster %s) in the portal's configuration", i, cl.Name)}
		if cl.Scontrol != "" {
			// Requeue where slurmrestd has none, as the user: the client
			// hands scontrol the token it minted for them.
			sc.Requeuer = slurmrest.ScontrolRequeuer{Path: cl.Scontrol}
		}
		pc := cluster.Config{Name: cl.Name, Interval: cl.PollInterval, StaleAfter: cl.StaleAfter, Log: log, Metrics: metrics, Slurm: sc}
		if st.Dialect() == store.DialectPostgres {
			// Portals sharing a database poll each cluster once between
			// them: slurmctld's load does not grow with the portals.
			pc.Lease = st.PollLease(cl.Name, holder, pollLeaseTTL(cl.PollInterval))
		}
		p := cluster.New(pc)
		pollers = append(pollers, p)
		clusters = append(clusters, service.Cluster{Poller: p, Tenants: tenants.Get, Policy: policy,
			ReclaimdURL: strings.TrimRight(cl.ReclaimdURL, "/"), ReclaimdToken: reclaimdToken, WorkDir: cl.WorkDir, OutputRoots: cl.OutputRoots, Bridge: bridge.client(),
			SessionRoot: cl.SessionRoot, SessionIdleLimit: cl.SessionIdleLimit,
			Priority: priorityWeights(cl.PriorityWeights), Prometheus: prometheusOf(cl)})
	}
	tmpl, err := daemon.Load(ctx, "job templates", func(context.Context) (*templates.Set, error) {
		set, err := templates.Load(cfg.TemplatesDir)
		if errors.Is(err, fs.ErrNotExist) {
			log.Warn("no job templates: the folder does not exist", "templates_dir", cfg.TemplatesDir)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		// Templates with an image render with the site's runtime.
		return set.WithContainers(cfg.Containers), nil
	})
	if err != nil {
		return err
	}
	reload = append(reload, tmpl)
	key, err := cookieKey(log, cfg.Sessions)
	if err != nil {
		return err
	}
	if key == nil {
		log.Info("sessions' cookies signed with a key of this process: after a restart browsers ask for new ones", "hint", "set sessions.cookie_key_file")
	}
	origin, err := sessionOrigin(log, cfg.Sessions)
	if err != nil {
		return err
	}
	a := auth.New(auth.Config{Issuer: cfg.Auth.OIDC.Issuer, Audience: cfg.Auth.OIDC.Audience, UserClaim: cfg.Auth.OIDC.UserClaim,
		Tokens: st, TokenPrefix: store.TokenPrefix, Proxies: cfg.TrustedProxies(), Header: cfg.Auth.Proxy.Header})
	srv := service.New(service.Config{Clusters: clusters, Auth: a, Store: st, Templates: tmpl.Get, RatePerSecond: cfg.Limits.RatePerSecond,
		Burst: cfg.Limits.Burst, MaxBodyBytes: cfg.Limits.MaxBodyBytes, Registry: reg,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Sessions: service.SessionConfig{CookieKey: key, Origin: origin, MaxConns: cfg.Sessions.MaxConnections, Transport: sessionTransport},
		Log: log})

	// This process names itself on every audit record it opens and beats
	// while it runs; the records a stopped portal left open get what
	// Slurm now says, before the portal serves (the log never claims a
	// stopped portal's action is still under way), and periodically
	// after, for the portals sharing the database that stop meanwhile.
	if err := st.Register(ctx, holder); err != nil {
		return err
	}
	defer func() {
		if err := st.Deregister(context.Background()); err != nil {
			log.Warn("the portal's stop was not recorded: other portals settle its open audit records once its beat is old", "err", err)
		}
	}()
	settleCtx, cancelSettle := context.WithTimeout(ctx, time.Minute)
	err = srv.Core().SettleUnfinished(settleCtx)
	cancelSettle()
	if err != nil {
		return fmt.Errorf("settle the audit records left open: %w", err)
	}

	pages, err := pagesHandler(log, cfg, st, a, web.CoreSessionSource(srv.Core(), srv.SessionLaunchURL))
	if err != nil {
		return err
	}

	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	if !cfg.TLS.Enabled() && !cfg.ListenLoopback() {
		log.Warn("API reachable from other hosts without TLS: tokens cross the network in clear", "listen", cfg.Listen)
	}
	log.Info("strata-portal-api starting", "listen", cfg.Listen, "tls", cfg.TLS.Enabled(), "clusters", len(cfg.Clusters),
		"oidc", cfg.Auth.OIDC.Issuer, "database", cfg.Database, "database_kind", st.Dialect())
	loops := append(cluster.NewSet(pollers...).Loops(), srv.IdleLoop(), srv.InstanceLoop())
	return daemon.Run(ctx, daemon.Config{Log: log, Listener: ln, Handler: web.Mount(srv, pages, ""), Loops: loops,
		Reload: reload, ShutdownTimeout: 20 * time.Second})
}

func listen(cfg *config.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if !cfg.TLS.Enabled() {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
	if err != nil {
		_ = ln.Close() // nothing was served on it
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// priorityWeights are a cluster's weights as the service takes them.
func priorityWeights(w *config.PriorityWeights) *service.PriorityWeights {
	if w == nil {
		return nil
	}
	out := &service.PriorityWeights{Age: float64(w.Age), Assoc: float64(w.Assoc), Fairshare: float64(w.Fairshare),
		JobSize: float64(w.JobSize), Partition: float64(w.Partition), QOS: float64(w.QOS), TRES: map[string]float64{},
		MaxAge: w.MaxAge, CalcPeriod: w.CalcPeriod, FavorSmall: w.FavorSmall}
	for k, v := range w.TRES {
		out.TRES[strings.ToLower(k)] = v
	}
	return out
}

// prometheusOf is a cluster's Prometheus as the service takes it; nil
// without a prometheus_url.
func prometheusOf(cl config.Cluster) *service.Prometheus {
	if cl.PrometheusURL == "" {
		return nil
	}
	g := cl.GPUMetrics
	return &service.Prometheus{URL: strings.TrimRight(cl.PrometheusURL, "/"), NodeLabel: g.NodeLabel, GPULabel: g.GPULabel,
		UtilMetric: g.UtilMetric, Step: g.Step, Window: g.Window, IdleBelow: g.IdleBelowPercent}
}

// noOriginWarning is said by serve and check-config without sessions.origin.
const noOriginWarning = "sessions.origin is not set: browsers cannot open sessions (JupyterLab, code-server, terminals run their owner's script, " +
	"which on the pages' host would act with the page session); API clients reach them with a bearer token. " +
	"Set sessions.origin to a host apart from the pages', such as https://sessions.portal.example.org"

// sessionTransport reaches the sessions' servers; nil (the proxy's own)
// in the product. The tests on the Slurm beds set it: a bed's node names
// resolve inside its root only, not on the host the portal runs on.
var sessionTransport *http.Transport

// sessionOrigin is sessions.origin as the service takes it; nil, with a
// warning, when it is not set.
func sessionOrigin(log *slog.Logger, s config.Sessions) (*service.SessionOrigin, error) {
	if s.Origin == "" {
		if log != nil {
			log.Warn(noOriginWarning)
		}
		return nil, nil
	}
	o, err := service.ParseSessionOrigin(s.Origin)
	if err != nil {
		return nil, fmt.Errorf("sessions.origin: %w", err)
	}
	return o, nil
}
