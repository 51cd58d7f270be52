package config

import (
	"flag"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/strictyaml/strictyamltest"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/*.bad.yaml")

// TestFiles: each testdata/*.good.yaml loads; each *.bad.yaml fails with
// the diagnostics of its .golden file, all at once (-update rewrites them).
func TestFiles(t *testing.T) {
	strictyamltest.Files(t, "testdata", *update, func(path string) error {
		_, err := Load(path)
		return err
	})
}

// TestMinimal: a file that names one cluster gets every other value from
// the defaults, the cluster's included.
func TestMinimal(t *testing.T) {
	cfg, err := Load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	cl := ClusterDefaults()
	cl.Name, cl.SlurmCluster, cl.SlurmrestdURL = "gpu1", "gpu1", "http://127.0.0.1:6820"
	cl.JWTKeyFile, cl.TenantsFile = "/etc/strata/clusters/gpu1/jwt_hs256.key", "/etc/strata/clusters/gpu1/tenants.json"
	want.Clusters = []Cluster{cl}
	if diff := cmp.Diff(&want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if cfg.Auth.OIDC.Enabled() || cfg.TLS.Enabled() || len(cfg.TrustedProxies()) != 0 || !cfg.ListenLoopback() {
		t.Errorf("a minimal config enables OIDC, TLS or a proxy, or listens beyond loopback: %+v", cfg)
	}
	if cl.PollInterval != 15*time.Second || cl.StaleAfter != time.Minute || cl.PollUser != "root" {
		t.Errorf("cluster defaults = %+v", cl)
	}
}

// TestTrustedProxies: an address is a network of one.
func TestTrustedProxies(t *testing.T) {
	cfg, err := Load("testdata/two-clusters.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"), netip.MustParsePrefix("10.1.0.0/24")}
	if diff := cmp.Diff(want, cfg.TrustedProxies(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if c, ok := cfg.Cluster("gpu2"); !ok || c.SlurmrestdURL != "https://10.0.1.10:6820" {
		t.Errorf("Cluster(gpu2) = %+v, %v", c, ok)
	}
}

// TestShippedExample: etc/strata/portal-api.yaml loads.
func TestShippedExample(t *testing.T) {
	cfg, err := Load("../../../etc/strata/portal-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) < 2 {
		t.Errorf("the example serves %d clusters; it shows two", len(cfg.Clusters))
	}
}

// TestContainers: containers: gives the runtime templates with an image
// render with; left out, none (such a template is refused at render).
func TestContainers(t *testing.T) {
	cfg, err := Load("testdata/containers.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (templates.Containers{Runtime: templates.OCI, Bundles: "/srv/strata/bundles"}); cfg.Containers != want {
		t.Errorf("containers = %+v, want %+v", cfg.Containers, want)
	}
	if cfg, err = Load("testdata/minimal.good.yaml"); err != nil || cfg.Containers.Runtime != templates.NoRuntime {
		t.Errorf("a config without containers: %+v, %v; want no runtime", cfg.Containers, err)
	}
}

// TestSessionMaxConnections: sessions.max_connections is read as written;
// left out, it is the default (the bounds are testdata/session-max-*.bad.yaml).
func TestSessionMaxConnections(t *testing.T) {
	for path, want := range map[string]int{"testdata/session-max-connections.good.yaml": 256, "testdata/minimal.good.yaml": DefaultSessionMaxConnections} {
		cfg, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Sessions.MaxConnections != want {
			t.Errorf("%s: sessions.max_connections = %d, want %d", path, cfg.Sessions.MaxConnections, want)
		}
	}
}
