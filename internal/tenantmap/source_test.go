package tenantmap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

// TestSourceReload: a good reload takes effect; a bad one keeps the map
// in force and says why; a missing file at start is an error.
func TestSourceReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.json")
	if _, err := tenantmap.Open(path); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(mustMarshal(t, full()))
	src, err := tenantmap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Map().TenantOf("acme-llm"); got != "acme" {
		t.Fatalf("TenantOf(acme-llm) = %q", got)
	}

	moved := full()
	moved.Tenants[0].Projects[0].Account = "acme-lm"
	write(mustMarshal(t, moved))
	if _, err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := src.Map().TenantOf("acme-llm"); got != "acme-llm" {
		t.Errorf("after reload, TenantOf(acme-llm) = %q, want the account itself", got)
	}

	write([]byte(`{"apiVersion": "strata/v1", "kind": "TenantMap", "clustr": "x"}`))
	_, err = src.Reload()
	if err == nil || !strings.Contains(err.Error(), "keeping the map in force") || !strings.Contains(err.Error(), path+":1:") {
		t.Errorf("Reload of a bad file = %v", err)
	}
	if got := src.Map().TenantOf("acme-lm"); got != "acme" {
		t.Errorf("after a bad reload, TenantOf(acme-lm) = %q, want acme (the map in force)", got)
	}
}
