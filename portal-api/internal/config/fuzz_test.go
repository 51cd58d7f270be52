package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: whatever the bytes, Parse does not panic, and what it accepts
// validates again and holds to the rules that keep the portal's doors
// shut: no trusted proxy network wider than its bound without allow_any,
// none that holds loopback without trust_loopback, and no listen other
// hosts reach without TLS or tls.terminated_by_proxy. Seeded from every
// .good and .bad file of testdata and the shipped example.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	files = append(files, "../../../etc/strata/portal-api.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Errorf("refusal without the file's name: %v", err)
			}
			return
		}
		if ds := cfg.Validate(); len(ds) > 0 {
			t.Errorf("Parse accepted a config that does not validate: %v", ds)
		}
		p := cfg.Auth.Proxy
		if len(cfg.TrustedProxies()) != len(p.Trusted) {
			t.Errorf("trusted %q parse to %v", p.Trusted, cfg.TrustedProxies())
		}
		for _, n := range cfg.TrustedProxies() {
			bound := p.MinPrefixIPv4
			if n.Addr().Is6() {
				bound = p.MinPrefixIPv6
			}
			if n.Bits() < bound && !p.AllowAny {
				t.Errorf("accepted trusted network %s wider than /%d without allow_any", n, bound)
			}
			if (n.Contains(netip.MustParseAddr("127.0.0.1")) || n.Contains(netip.IPv6Loopback())) && !p.TrustLoopback {
				t.Errorf("accepted trusted network %s holding loopback without trust_loopback", n)
			}
		}
		if !cfg.ListenLoopback() && !cfg.TLS.Enabled() && !cfg.TLS.TerminatedByProxy {
			t.Errorf("accepted listen %q without TLS", cfg.Listen)
		}
	})
}
