//go:build integration

package deploy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
)

// tieredBed is a bed whose tenant acme may use whole GPUs, mig-1g.10gb
// slices and MPS shares, and asks for isolation; its serving: block is at
// line 40 of the policy.
func tieredBed(t *testing.T, gpus, replicas, mig int, timeout time.Duration) *bed {
	t.Helper()
	b := newBed(t, gpus, replicas, timeout)
	acme := &b.serving.Tenants[0]
	acme.Isolation, acme.ServingLine = true, 40
	acme.Tiers = []servingquota.Tier{
		{Name: "mig-1g.10gb", Resource: "nvidia.com/mig-1g.10gb", Quota: mig, Line: 44},
		{Name: "mps", Resource: "nvidia.com/gpu.mps", Quota: 2, Line: 45},
	}
	if err := b.serving.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bed) pods(name string) []corev1.Pod {
	b.t.Helper()
	ps, err := b.core.Pods(b.ns).List(b.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	if err != nil {
		b.t.Fatal(err)
	}
	return ps.Items
}

func wantRefused(t *testing.T, err error, check string, want ...string) {
	t.Helper()
	var r *deploy.Refusal
	if !errors.As(err, &r) || r.Check != check {
		t.Fatalf("err = %v, want a refusal of the %s check", err, check)
	}
	for _, w := range want {
		if !strings.Contains(r.Reason, w) {
			t.Errorf("reason %q lacks %q", r.Reason, w)
		}
	}
}

// A tenant's mig-1g.10gb replicas request that MIG slice, run at the MIG
// tier's priority, and land on a node that advertises the slices (the
// bed's kwok-gpu-1, as the device plugin does with the mixed strategy).
func TestTierMIGReplicasLandOnMIGNode(t *testing.T) {
	b := tieredBed(t, 0, 4, 4, 2*time.Minute)
	res := b.deploy(b.job(9101, "embed-mig", "tier: mig-1g.10gb\ngpus: 1\nreplicas: 3\n"), false)
	if res.Outcome != "ready" {
		t.Fatalf("outcome %s: %s", res.Outcome, res.Message)
	}
	pods := b.pods("embed-mig")
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if q := c.Resources.Requests["nvidia.com/mig-1g.10gb"]; q.Value() != 1 || len(c.Resources.Requests) != 1 {
			t.Errorf("pod %s requests %v, want nvidia.com/mig-1g.10gb: 1 alone", p.Name, c.Resources.Requests)
		}
		if p.Spec.PriorityClassName != "strata-serving-mig" || p.Spec.Priority == nil || *p.Spec.Priority != 3000 {
			t.Errorf("pod %s priority class %q (%v), want strata-serving-mig (3000)", p.Name, p.Spec.PriorityClassName, p.Spec.Priority)
		}
		node, err := b.core.Nodes().Get(b.ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s on node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		if q := node.Status.Allocatable["nvidia.com/mig-1g.10gb"]; q.Value() < 1 {
			t.Errorf("pod %s landed on %s, which has no nvidia.com/mig-1g.10gb (allocatable %v)", p.Name, node.Name, node.Status.Allocatable)
		}
	}
}

// A tier the tenant may not use is refused before anything is created,
// with the policy line of its serving: block; over the tier's quota too.
func TestTierRefusals(t *testing.T) {
	b := tieredBed(t, 1, 8, 2, 2*time.Minute)
	for name, tc := range map[string]struct {
		job          int64
		extra, check string
		want         []string
	}{
		"a MIG profile not granted": {9201, "tier: mig-3g.40gb\ngpus: 1\n", deploy.CheckTier,
			[]string{"may not use GPU tier mig-3g.40gb", "at line 40 of the policy", "allows dedicated, mig-1g.10gb, mps"}},
		"time-sliced with isolation": {9202, "tier: time-sliced\ngpus: 1\n", deploy.CheckTier,
			[]string{"may not use GPU tier time-sliced", "asks for isolation"}},
		"over the MIG tier's quota": {9203, "tier: mig-1g.10gb\ngpus: 1\nreplicas: 3\n", deploy.CheckQuota,
			[]string{"2 nvidia.com/mig-1g.10gb (tier mig-1g.10gb, at line 44 of the policy)", "3 > 2"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.dep.Deploy(b.ctx, b.job(tc.job, "refused", tc.extra), deploy.Options{Reason: "test"})
			wantRefused(t, err, tc.check, tc.want...)
			if _, err := b.apps.Deployments(b.ns).Get(b.ctx, "refused", metav1.GetOptions{}); err == nil {
				t.Error("a refused deploy created its Deployment")
			}
		})
	}
}

// With the bridge's own quota check off, the apiserver's ResourceQuota
// admission refuses the pods over the tenant's GPU quota, and the
// bridge's outcome says so in words.
func TestApiserverEnforcesGPUQuota(t *testing.T) {
	b := tieredBed(t, 1, 4, 2, 8*time.Second)
	cfg := b.depConfig
	cfg.NoQuotaCheck = true
	var err error
	if b.dep, err = deploy.New(cfg); err != nil {
		t.Fatal(err)
	}
	res, err := b.dep.Deploy(b.ctx, b.job(9301, "too-big", "gpus: 2\n"), deploy.Options{Reason: "test"})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if res.Outcome != "timeout" {
		t.Fatalf("outcome %s (%s), want timeout", res.Outcome, res.Message)
	}
	for _, want := range []string{"the apiserver refuses the new version's pods", "ResourceQuota strata-serving", "exceeded quota",
		"requests.nvidia.com/gpu=2", "limited: requests.nvidia.com/gpu=1"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q lacks %q", res.Message, want)
		}
	}
	if n := len(b.pods("too-big")); n != 0 {
		t.Errorf("%d pods exist, want none: the apiserver should have refused them", n)
	}
}

// A rollout takes one surge replica where the tier's quota and the
// replicas leave room for it, so a one-replica model stays up; where they
// do not, the deploy says so before the rollout and replaces the replica.
func TestRolloutSurge(t *testing.T) {
	b := tieredBed(t, 2, 2, 2, 2*time.Minute)
	if res := b.deploy(b.job(9401, "one", "gpus: 1\n"), false); res.Outcome != "ready" {
		t.Fatalf("first version: %s: %s", res.Outcome, res.Message)
	}
	dry := b.deploy(b.job(9402, "one", "gpus: 1\n"), true)
	if !strings.Contains(dry.Rollout, "rolls out with one surge replica") {
		t.Errorf("dry run rollout %q, want one surge replica", dry.Rollout)
	}
	res := b.deploy(b.job(9402, "one", "gpus: 1\n"), false)
	if res.Outcome != "ready" || !strings.Contains(res.Rollout, "surge replica") {
		t.Fatalf("second version: %s (%s), rollout %q", res.Outcome, res.Message, res.Rollout)
	}
	d := b.deployment("one")
	if s := d.Spec.Strategy.RollingUpdate; s == nil || s.MaxSurge.IntValue() != 1 || s.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy %+v, want maxSurge 1, maxUnavailable 0", d.Spec.Strategy)
	}
	// One GPU of two used, so a second replica's GPU fits, but no replica
	// is left: the rollout replaces, and says so first.
	b.serving.Tenants[0].Replicas = 1
	res = b.deploy(b.job(9403, "one", "gpus: 1\n"), false)
	if res.Outcome != "ready" || !strings.Contains(res.Rollout, "no room in tenant acme's serving quota for a surge replica (replicas would need 2 of 1)") {
		t.Fatalf("third version: %s (%s), rollout %q", res.Outcome, res.Message, res.Rollout)
	}
	if s := b.deployment("one").Spec.Strategy.RollingUpdate; s == nil || s.MaxSurge.IntValue() != 0 || s.MaxUnavailable.IntValue() != 1 {
		t.Errorf("strategy %+v, want maxSurge 0, maxUnavailable 1", s)
	}
	// Said before the rollout, as an event that status shows; the update
	// with a surge replica needed none.
	events, err := b.store.Events(b.ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	var said []int64
	for _, e := range events {
		if e.Outcome == "rollout" {
			said = append(said, e.JobID)
			if !strings.Contains(e.Message, "no room") {
				t.Errorf("rollout event %q, want the reason", e.Message)
			}
		}
	}
	if !slices.Equal(said, []int64{9403}) {
		t.Errorf("rollout events for %v, want job-9403 alone", said)
	}
	i := slices.IndexFunc(events, func(e store.Event) bool { return e.Outcome == "rollout" })
	if i < 0 || i+1 >= len(events) || events[i+1].JobID != 9403 || events[i+1].Outcome != "ready" {
		t.Errorf("events %+v: want the rollout event of job-9403 before its outcome", events)
	}
}
