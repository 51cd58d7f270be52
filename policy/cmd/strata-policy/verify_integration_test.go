//go:build integration

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/testbed"
)

// A GPU type the beds do not track: their AccountingStorageTRES is
// gres/gpu,gres/gpu:h100 (test/testbed/slurm/etc/slurm.conf.in).
const untrackedPolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100, a100]
classes:
  - name: %[2]s-batch
    partition: gpu
tenants:
  - name: %[2]s
    limits:
      gpus: 16
      gpus_by_type:
        h100: 8
        a100: 8
    projects:
      - name: llm
        members:
          - user: alice
`

// TestApplyVerifies: slurmdbd answers 200 to a limit on a TRES it does not
// track and drops it (with the tenant's other typed limits); apply reads
// Slurm back and fails, naming what Slurm does not hold and why, instead
// of reporting success.
func TestApplyVerifies(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		tenant := testbed.Unique("vf")
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(fmt.Sprintf(untrackedPolicy, b.Cluster, tenant)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, u := range b.Users {
				_ = c.SetDefaultAccount(ctx, u, b.Account)
			}
			for _, a := range []string{tenant + "-llm", tenant} {
				_ = c.DeleteAccount(ctx, a)
			}
			_ = c.DeleteQOS(ctx, tenant+"-batch")
		})
		code, out := policyOn(t, b, file, "apply", "--apply")
		if code != exitFailure {
			t.Fatalf("apply of a limit on an untracked TRES: exit %d, want %d:\n%s", code, exitFailure, out)
		}
		for _, want := range []string{"does not hold 1 of them", "modify account     " + tenant, "gres/gpu:a100=8", "AccountingStorageTRES"} {
			if !strings.Contains(out, want) {
				t.Errorf("apply output lacks %q:\n%s", want, out)
			}
		}
	})
}
