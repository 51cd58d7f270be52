package decide_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// TestEvidenceIsTheContract: the evidence reclaimd keeps with a decision
// (decide.Evidence as JSON) reads strictly as reclaimapi.Evidence, the
// type the portal reads it with, and writes back the same bytes, with and
// without a time limit (JobEnd is left out when zero).
func TestEvidenceIsTheContract(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	full := decide.Evidence{WindowStart: at.Add(-time.Hour), WindowEnd: at, JobStart: at.Add(-2 * time.Hour), JobEnd: at.Add(10 * time.Hour),
		GPUs: []decide.GPUEvidence{{GPU: decide.GPUKey{Node: "gpu1", Index: 3}, Samples: 120, Coverage: 0.98, Newest: at,
			MaxUtilPercent: 1.5, MaxMemActivityPercent: 0.5, MaxMemUsedMiB: 1024, Idle: true}},
		IdleGPUs: 1, TotalGPUs: 1}
	noLimit := full
	noLimit.JobEnd, noLimit.GPUs = time.Time{}, nil
	for name, ev := range map[string]decide.Evidence{"full": full, "no limit": noLimit} {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var c reclaimapi.Evidence
			if err := dec.Decode(&c); err != nil {
				t.Fatalf("decide.Evidence %s does not decode into reclaimapi.Evidence: %v", raw, err)
			}
			back, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(back) != string(raw) {
				t.Errorf("reclaimapi.Evidence writes\n%s\nreclaimd wrote\n%s", back, raw)
			}
			if !c.JobEnd.Equal(ev.JobEnd) {
				t.Errorf("JobEnd = %s, want %s", c.JobEnd, ev.JobEnd)
			}
		})
	}
}
