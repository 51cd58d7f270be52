//go:build integration

package deploy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/ha"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/pgtest"
)

// bridge is one of two bridges on one PostgreSQL database: its own
// store connection, lease and deployer over the real apiserver.
type bridge struct {
	store *store.Store
	lease *store.Lease
	dep   *deploy.Deployer
}

// twoBridges opens the bed's PostgreSQL database for two bridges, a and
// b, each with a lease of ttl, deploying into the bed's namespace.
func (b *bed) twoBridges(ttl time.Duration) (a, s *bridge) {
	b.t.Helper()
	db := pgtest.New(b.t)
	one := func(name string) *bridge {
		st, err := store.OpenDatabase(b.ctx, store.Database{URL: db.URL, PasswordFile: db.PasswordFile})
		if err != nil {
			b.t.Fatal(err)
		}
		b.t.Cleanup(func() { st.Close() })
		l := st.NewLease(name, ttl)
		st.SetLease(l)
		cfg := b.depConfig
		cfg.Store, cfg.Lease, cfg.Metrics = st, l, deploy.NewMetrics(prometheus.NewRegistry())
		dep, err := deploy.New(cfg)
		if err != nil {
			b.t.Fatal(err)
		}
		return &bridge{store: st, lease: l, dep: dep}
	}
	return one("bridge-a"), one("bridge-b")
}

// TestStandbyFinishesADeployOnce: two bridges on one database; the active
// one is stopped (its context cancelled and its database connections
// closed, as kill -9 leaves them) once its Deployment is in the cluster
// and before its rollout is recorded. The standby takes the lease over
// within the lease's time and a third, finishes the deploy, and each
// thing happens once: the Deployment is the one the first bridge
// created (same UID, generation 1), the version has one outcome, the
// deployment's history one deploy event, and the job one verdict.
func TestStandbyFinishesADeployOnce(t *testing.T) {
	b := newBed(t, 4, 4, 2*time.Minute)
	const ttl = 3 * time.Second
	a, s := b.twoBridges(ttl)
	if ok, err := a.lease.Acquire(b.ctx); !ok || err != nil {
		t.Fatalf("a takes the lease: %v, %v", ok, err)
	}
	if ok, err := s.lease.Acquire(b.ctx); ok || err != nil {
		t.Fatalf("the standby takes a held lease: %v, %v", ok, err)
	}
	job := b.job(7001, "llama", "gpus: 1\nreplicas: 2\n")

	// a deploys; the test watches the cluster and kills a as soon as
	// the Deployment exists.
	actx, kill := context.WithCancel(b.ctx)
	var aErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, aErr = a.dep.Deploy(actx, job, deploy.Options{Reason: "test"})
	}()
	var uid string
	for uid == "" {
		d, err := b.apps.Deployments(b.ns).Get(b.ctx, "llama", metav1.GetOptions{})
		switch {
		case err == nil:
			uid = string(d.UID)
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatalf("a finished before it could be stopped in the middle: %v", aErr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	kill()
	a.store.Close()
	killed := time.Now()
	<-done
	t.Logf("a stopped in the middle: %v", aErr)
	v, err := s.store.Version(b.ctx, 7001)
	if err != nil || v.Outcome != store.OutcomeApplying {
		t.Fatalf("after the stop the version is %q, %v; want it left applying (the test stopped a too late)", v.Outcome, err)
	}

	// The standby renews as the daemon does, takes over and resumes.
	co := ha.New(ha.Config{Lease: s.lease, Deployer: s.dep, Store: s.store, Every: ttl / 3})
	cctx, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = co.Run(cctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	for !co.Active() {
		if time.Since(killed) > 2*time.Minute {
			t.Fatal("the standby did not become active")
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("the standby took over and finished the deploy %s after a stopped", took)
	if gen := s.lease.Generation(); gen != 2 {
		t.Errorf("the standby holds generation %d; want 2", gen)
	}
	v, err = s.store.Version(b.ctx, 7001)
	if err != nil || v.Outcome != store.OutcomeReady {
		t.Fatalf("the version after the take-over: %q %q, %v; want ready", v.Outcome, v.Message, err)
	}
	d := b.deployment("llama")
	if string(d.UID) != uid || d.Generation != 1 {
		t.Errorf("Deployment uid %s generation %d; want a's (%s), applied once (generation 1)", d.UID, d.Generation, uid)
	}
	svcs, err := b.core.Services(b.ns).List(b.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=llama"})
	if err != nil || len(svcs.Items) != 1 {
		t.Errorf("services of llama: %d, %v; want 1", len(svcs.Items), err)
	}
	ev, err := s.store.Events(b.ctx, "llama")
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Action != "deploy" || ev[0].Outcome != store.OutcomeReady || ev[0].JobID != 7001 {
		t.Errorf("history %+v; want one deploy of job 7001, ready", ev)
	}
	dep, err := s.store.Deployment(b.ctx, "llama")
	if err != nil || dep.Current != 7001 {
		t.Errorf("current version %d, %v; want 7001", dep.Current, err)
	}
	seen, err := s.store.Seen(b.ctx, 7001)
	if err != nil || !seen.Done || seen.Attempts != 1 || seen.Outcome != store.OutcomeReady {
		t.Errorf("the job's verdict %+v, %v; want settled once, ready", seen, err)
	}
	// Resumed once: a second renewal finds nothing left.
	if pending, err := s.store.Applying(b.ctx); err != nil || len(pending) != 0 {
		t.Errorf("left applying after the take-over: %+v, %v", pending, err)
	}
	time.Sleep(ttl)
	if ev, _ := s.store.Events(b.ctx, "llama"); len(ev) != 1 {
		t.Errorf("history after more renewals: %+v", ev)
	}
	// The bound: the lease ran out (ttl after a's last renewal) and the
	// standby's next try came within a third of it; the rest is the
	// rollout the standby waited for.
	if took > ttl+ttl/3+30*time.Second {
		t.Errorf("the standby took %s to take over and finish", took)
	}
}

// TestPausedBridgeMakesNoCall: a bridge paused past its lease (it stops
// renewing) while the standby took over makes no call to the apiserver
// when it wakes, and writes nothing; the new holder deploys.
func TestPausedBridgeMakesNoCall(t *testing.T) {
	b := newBed(t, 4, 4, time.Minute)
	const ttl = 2 * time.Second
	a, s := b.twoBridges(ttl)
	if ok, err := a.lease.Acquire(b.ctx); !ok || err != nil {
		t.Fatalf("a takes the lease: %v, %v", ok, err)
	}
	// The standby is refused before it calls anything.
	if _, err := s.dep.Deploy(b.ctx, b.job(7101, "early", "gpus: 1\n"), deploy.Options{Reason: "test"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the standby's deploy: %v; want refused, the lease being a's", err)
	}
	// a is paused: it renews no more; the standby takes over.
	deadline := time.Now().Add(3 * ttl)
	for {
		ok, err := s.lease.Acquire(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby did not take over")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// a wakes and goes on with a deploy, and with a delete.
	_, err := a.dep.Deploy(b.ctx, b.job(7102, "stale", "gpus: 1\n"), deploy.Options{Reason: "test"})
	var lost *store.LostError
	if !errors.As(err, &lost) {
		t.Fatalf("the paused bridge's deploy: %v; want a *store.LostError", err)
	}
	for _, name := range []string{"early", "stale"} {
		if _, err := b.apps.Deployments(b.ns).Get(b.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment %s: %v; want none, nothing was applied", name, err)
		}
	}
	if _, err := s.store.Version(b.ctx, 7102); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the paused bridge's version: %v; want none recorded", err)
	}
	// The holder deploys, and the paused bridge cannot delete it.
	if res, err := s.dep.Deploy(b.ctx, b.job(7103, "fresh", "gpus: 1\n"), deploy.Options{Reason: "test"}); err != nil || res.Outcome != store.OutcomeReady {
		t.Fatalf("the holder's deploy: %v, %v", res, err)
	}
	if _, err := a.dep.Delete(b.ctx, "fresh", deploy.Options{Reason: "test"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the paused bridge's delete: %v; want refused", err)
	}
	if d := b.deployment("fresh"); d.DeletionTimestamp != nil {
		t.Error("the paused bridge deleted the holder's Deployment")
	}
	if ev, err := s.store.Events(b.ctx, "stale"); err != nil || len(ev) != 0 {
		t.Errorf("events of the paused bridge's deploy: %+v, %v; want none", ev, err)
	}
}
