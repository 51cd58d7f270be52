package slurmrest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestSubmitOptions: what Submit sends slurmrestd for the options job
// templates set (tasks per node, memory per node, an array, --switches,
// an OCI bundle as --container), on each data parser.
func TestSubmitOptions(t *testing.T) {
	probe := readResponse(t, filepath.Join("testdata", "replay", "slurm-26.05", "probe.json"))
	for _, parser := range []string{"v0.0.45", "v0.0.42"} {
		t.Run(parser, func(t *testing.T) {
			var mu sync.Mutex
			var sent map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if strings.HasSuffix(r.URL.Path, "/ping/") {
					_, _ = w.Write(probe)
					return
				}
				if r.URL.Path != "/slurm/"+parser+"/job/submit" {
					http.NotFound(w, r)
					return
				}
				var req struct {
					Job map[string]any `json:"job"`
				}
				b, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(b, &req); err != nil {
					t.Errorf("submit body: %v", err)
				}
				mu.Lock()
				sent = req.Job
				mu.Unlock()
				_, _ = w.Write([]byte(`{"job_id": 5, "step_id": "batch", "errors": [], "warnings": []}`))
			}))
			defer srv.Close()
			ctx := context.Background()
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Parser: parser, Tokens: slurmrest.StaticToken("t")})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Script: "#!/bin/sh\n", TasksPerNode: 8, MemoryPerNode: 65536,
				Array: "0-9%2", Switches: 1, Container: "/srv/strata/bundles/registry.example.com/acme/train:1"})
			if err != nil || res.JobID != 5 {
				t.Fatalf("submit = %+v, %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			got := map[string]any{}
			for _, k := range []string{"tasks_per_node", "memory_per_node", "array", "required_switches", "container"} {
				got[k] = sent[k]
			}
			want := map[string]any{"tasks_per_node": 8.0, "array": "0-9%2", "container": "/srv/strata/bundles/registry.example.com/acme/train:1",
				"memory_per_node":   map[string]any{"set": true, "number": 65536.0},
				"required_switches": map[string]any{"set": true, "number": 1.0}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
		})
	}
}
