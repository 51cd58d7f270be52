package controller_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
)

// TestAnswersAreTheContract: every answer in testdata/api (what reclaimd
// serves, TestAPIAnswersForThePortal) decodes strictly into its type of
// internal/reclaimapi, the contract the portal reads, and encodes back to
// the very same bytes: nothing reclaimd serves is unknown to the contract,
// and nothing the contract holds is lost or spelled otherwise.
func TestAnswersAreTheContract(t *testing.T) {
	for file, v := range map[string]any{
		"decisions.json":       &reclaimapi.Decisions{},
		"failures.json":        &reclaimapi.Failures{},
		"nodes-health.json":    &reclaimapi.NodesHealth{},
		"attempts-910101.json": &reclaimapi.Attempts{},
		"worth.json":           &reclaimapi.Worth{},
	} {
		t.Run(file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "api", file))
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s does not decode into %T: %v", file, v, err)
			}
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			if out.String() != string(body) {
				t.Errorf("%T encodes %s otherwise:\n%s", v, file, out.String())
			}
		})
	}
}

// TestJobReclaimIsTheContract: a job's reclaim record as reclaimd serves
// it (GET /v1/jobs/{id}/reclaim, after a real warn and cancel) decodes
// strictly into reclaimapi.JobReclaim, the type the portal reads it with,
// its evidence into reclaimapi.Evidence, and encodes back the same bytes.
func TestJobReclaimIsTheContract(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Minute)))
	defer srv.Close()
	for range 4 {
		b.mustTick()
	}
	code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, jobID))
	if code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/%d/reclaim = %d %s", jobID, code, body)
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var jr reclaimapi.JobReclaim
	if err := dec.Decode(&jr); err != nil {
		t.Fatalf("the answer does not decode into reclaimapi.JobReclaim: %v\n%s", err, body)
	}
	if len(jr.Records) != 2 || len(jr.State) == 0 {
		t.Fatalf("decoded %+v", jr)
	}
	for _, r := range jr.Records {
		if ev, err := r.ParseEvidence(); err != nil || ev.TotalGPUs == 0 {
			t.Errorf("record %d's evidence = %+v, %v", r.ID, ev, err)
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jr); err != nil {
		t.Fatal(err)
	}
	if out.String() != body {
		t.Errorf("reclaimapi.JobReclaim encodes otherwise:\n%s\nreclaimd served:\n%s", out.String(), body)
	}
}

// TestJobReclaimUpcoming: reclaimd's answer says the next step if the
// job's GPUs stay idle: after its warning, the rule's cancel once the
// rule's 10 s warning time has passed; once cancelled, none.
func TestJobReclaimUpcoming(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Minute)))
	defer srv.Close()
	var warnedAt time.Time
	for range 4 {
		if k := b.mustTick(); slices.Contains(k, "warn") {
			warnedAt = b.clock()
			break
		}
	}
	if warnedAt.IsZero() {
		t.Fatal("no warning in 4 cycles")
	}
	read := func() reclaimapi.JobReclaim {
		code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, jobID))
		var jr reclaimapi.JobReclaim
		if code != http.StatusOK || json.Unmarshal([]byte(body), &jr) != nil {
			t.Fatalf("GET reclaim = %d %s", code, body)
		}
		return jr
	}
	jr := read()
	if jr.Upcoming == nil || jr.Upcoming.Action != "cancel" || !jr.Upcoming.At.Equal(warnedAt.Add(10*time.Second)) {
		t.Errorf("after the warning at %s, upcoming = %+v; want cancel 10s later", warnedAt, jr.Upcoming)
	}
	// A standby reads the step the acting controller saved.
	standby := httptest.NewServer(withToken(controller.ReadAPI(controller.Config{Store: b.st, APIToken: apiTokenFunc, Now: b.clock})))
	defer standby.Close()
	readStandby := func() reclaimapi.JobReclaim {
		code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", standby.URL, jobID))
		var jr reclaimapi.JobReclaim
		if code != http.StatusOK || json.Unmarshal([]byte(body), &jr) != nil {
			t.Fatalf("GET reclaim of the standby = %d %s", code, body)
		}
		return jr
	}
	if sj := readStandby(); sj.Upcoming == nil || *sj.Upcoming != *jr.Upcoming || len(sj.Records) != len(jr.Records) {
		t.Errorf("the standby's answer: upcoming %+v, %d records; the acting one's: %+v, %d", sj.Upcoming, len(sj.Records), jr.Upcoming, len(jr.Records))
	}
	for range 3 {
		if k := b.mustTick(); slices.Contains(k, "cancel") {
			break
		}
	}
	if jr := read(); jr.Upcoming != nil {
		t.Errorf("after the cancel, upcoming = %+v", jr.Upcoming)
	}
	if sj := readStandby(); sj.Upcoming != nil {
		t.Errorf("after the cancel, the standby's upcoming = %+v", sj.Upcoming)
	}
}
