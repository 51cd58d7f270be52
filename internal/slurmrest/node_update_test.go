package slurmrest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// UpdateNode sends POST /node/{name} with the state and the reason, for
// every parser; the answer's envelope is read as any other's. The capture
// holds no node update: the envelope is cancel's, the only part read.
func TestUpdateNode(t *testing.T) {
	for version := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			ctx := context.Background()
			srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-"+version))
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
			if err != nil {
				t.Fatal(err)
			}
			env, _ := srv.Record("cancel")
			var bodies []map[string]any
			path := "/slurm/" + c.Info().Parser + "/node/gpu3"
			srv.Handle(http.MethodPost, path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Errorf("body %s: %v", b, err)
				}
				bodies = append(bodies, m)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(env.Response)
			}))
			reason := "strata: Xid 79 on GPU 3 (GPU fell off the bus)"
			if err := c.UpdateNode(ctx, "gpu3", slurmrest.NodeDrain, reason); err != nil {
				t.Fatal(err)
			}
			if err := c.UpdateNode(ctx, "gpu3", slurmrest.NodeResume, ""); err != nil {
				t.Fatal(err)
			}
			if len(bodies) != 2 {
				t.Fatalf("%d node updates sent, want 2", len(bodies))
			}
			if s, _ := json.Marshal(bodies[0]); string(s) != `{"reason":"`+reason+`","state":["DRAIN"]}` {
				t.Errorf("drain sent %s", s)
			}
			if s, _ := json.Marshal(bodies[1]); string(s) != `{"state":["RESUME"]}` {
				t.Errorf("resume sent %s", s)
			}
			srv.Handle(http.MethodPost, path, failWithStatus(http.StatusInternalServerError))
			if err := c.UpdateNode(ctx, "gpu3", slurmrest.NodeDrain, reason); err == nil || !strings.Contains(err.Error(), "update node gpu3") {
				t.Errorf("refused update: err = %v", err)
			}
		})
	}
}

func TestUpdateNodeRefusesBadArguments(t *testing.T) {
	c := &slurmrest.Client{}
	for name, args := range map[string][3]string{
		"no name":           {"", "DRAIN", "x"},
		"name with a slash": {"gpu/3", "DRAIN", "x"},
		"lower-case state":  {"gpu3", "drain", "x"},
		"drain, no reason":  {"gpu3", "DRAIN", ""},
		"down, no reason":   {"gpu3", "DOWN", ""},
		"name with a space": {"gpu 3", "RESUME", ""},
		"name with a comma": {"gpu3,gpu4", "RESUME", ""},
		"empty state":       {"gpu3", "", ""},
	} {
		if err := c.UpdateNode(context.Background(), args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: UpdateNode%q worked", name, args)
		}
	}
}

func failWithStatus(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"errors": [{"description": "injected failure", "error_number": 9000, "error": "Unspecified error"}], "warnings": []}`))
	})
}
