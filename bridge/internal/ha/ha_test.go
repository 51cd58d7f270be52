package ha

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
)

// On SQLite the lease is held at the first renewal; a version a crash
// left applying is finished before the bridge acts (here as failed: its
// account is in no tenant any more, so nothing is applied), its job's
// verdict settled, and a second renewal finishes nothing again.
func TestTakeOverFinishesLeftOvers(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := store.Version{JobID: 42, Name: "llama", Namespace: "strata-acme", Tenant: "acme", Account: "acme-llm", User: "alice", GPUs: 1,
		MaxReplicas: 1, ModelPath: "/shared/llama", Spec: json.RawMessage(`{"name":"llama"}`), CreatedAt: time.Now()}
	if err := st.StartVersion(ctx, v, "deploy"); err != nil {
		t.Fatal(err)
	}
	kube, err := deploy.NewKube(&rest.Config{Host: "https://127.0.0.1:1"}, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	lease := st.NewLease("test", 15*time.Second)
	st.SetLease(lease)
	empty := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Lease: lease, Serving: func() *servingquota.File { return empty }})
	if err != nil {
		t.Fatal(err)
	}
	co := New(Config{Lease: lease, Deployer: dep, Store: st})
	if co.Active() {
		t.Fatal("active before the first renewal")
	}
	var wg sync.WaitGroup
	co.Step(ctx, &wg)
	wg.Wait()
	if !co.Active() {
		t.Fatal("not active after the first renewal on SQLite")
	}
	got, err := st.Version(ctx, 42)
	if err != nil || got.Outcome != store.OutcomeFailed || !strings.Contains(got.Message, "not resumed after the lease changed hands") {
		t.Errorf("the left-over version: %q %q, %v; want failed, saying why", got.Outcome, got.Message, err)
	}
	if seen, err := st.Seen(ctx, 42); err != nil || !seen.Done {
		t.Errorf("the job's verdict: %+v, %v; want settled", seen, err)
	}
	co.Step(ctx, &wg)
	wg.Wait()
	if ev, err := st.Events(ctx, "llama"); err != nil || len(ev) != 1 {
		t.Errorf("events after a second renewal: %+v, %v; want the one", ev, err)
	}
	if s, err := co.State(ctx); err != nil || s.Role != store.RoleActive || s.Generation != 1 {
		t.Errorf("state %+v, %v", s, err)
	}
}
