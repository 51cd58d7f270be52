package slurmrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// withAnswer is rec with its response's key set to value.
func withAnswer(t *testing.T, rec slurmresttest.Record, key, value string) slurmresttest.Record {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(rec.Response, &body); err != nil {
		t.Fatal(err)
	}
	body[key] = json.RawMessage(value)
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	rec.Response = b
	return rec
}

func withStatus(rec slurmresttest.Record, status int) slurmresttest.Record {
	rec.Status = status
	return rec
}

// A refused action is an error although slurmrestd answers it with HTTP
// 200 and no "errors": slurmctld's refusal is only in the per-job status
// of the answer (DELETE's and requeue's "status", POST's "results").
// Each parser's answer is the captured one with that list filled.
func TestRefusedActions(t *testing.T) {
	const (
		killRefused = `[{"error":{"string":"Access/permission denied","code":2002,"message":"Signal of JobId=1 failed"},` +
			`"step_id":"1","job_id":{"set":true,"infinite":false,"number":1},"federation":{"sibling":""}}]`
		killDone    = `[{"error":{"string":"Job/step already completing or completed","code":2021,"message":""},"step_id":"1","job_id":{"set":true,"infinite":false,"number":1}}]`
		arrayRefuse = `[{"job_id":1,"step_id":"1","error_code":2002,"error":"Access/permission denied","why":"update of JobId=1 refused"}]`
		arrayOK     = `[{"job_id":1,"step_id":"1","error_code":0,"error":"No error","why":""}]`
	)
	for version, bed := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-"+version))
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
			if err != nil {
				t.Fatal(err)
			}
			cancel, _ := srv.Record("cancel")
			jobPath := "/slurm/" + bed.Parser + "/job/1"
			type call struct {
				name          string
				method, path  string
				answer        slurmresttest.Record
				do            func() error
				wantErr       string // "" is success
				wantSentinels []error
			}
			calls := []call{
				{name: "cancel refused", method: http.MethodDelete, path: jobPath, answer: withAnswer(t, cancel, "status", killRefused),
					do:            func() error { return c.Cancel(ctx, 1) },
					wantErr:       "cancel job 1: Slurm refused it: job 1: Access/permission denied (Signal of JobId=1 failed) (slurm error 2002)",
					wantSentinels: []error{slurmrest.ErrRefused, slurmrest.ErrPermission}},
				{name: "signal refused", method: http.MethodDelete, path: jobPath, answer: withAnswer(t, cancel, "status", killRefused),
					do:            func() error { return c.Signal(ctx, 1, "USR1", false) },
					wantErr:       "signal job 1 with USR1: Slurm refused it: job 1: Access/permission denied (Signal of JobId=1 failed) (slurm error 2002)",
					wantSentinels: []error{slurmrest.ErrRefused, slurmrest.ErrPermission}},
				{name: "cancel of a job that ended", method: http.MethodDelete, path: jobPath, answer: withAnswer(t, cancel, "status", killDone),
					do:            func() error { return c.Cancel(ctx, 1) },
					wantErr:       "cancel job 1: Slurm refused it: job 1: Job/step already completing or completed (slurm error 2021)",
					wantSentinels: []error{slurmrest.ErrRefused, slurmrest.ErrAlreadyDone}},
				{name: "cancel done", method: http.MethodDelete, path: jobPath, answer: cancel,
					do: func() error { return c.Cancel(ctx, 1) }},
				{name: "hold refused", method: http.MethodPost, path: jobPath, answer: withAnswer(t, cancel, "results", arrayRefuse),
					do:            func() error { return c.Update(ctx, 1, slurmrest.JobUpdate{Hold: ptr(true)}) },
					wantErr:       "update job 1: Slurm refused it: job 1: Access/permission denied (update of JobId=1 refused) (slurm error 2002)",
					wantSentinels: []error{slurmrest.ErrRefused, slurmrest.ErrPermission}},
				{name: "hold refused as slurmctld refuses it (HTTP 422 or 500, error 2010)", method: http.MethodPost, path: jobPath,
					answer:        withStatus(withAnswer(t, cancel, "errors", `[{"description":"Job update requested failed","error_number":2010,"error":"Invalid user id","source":"_update_job"}]`), http.StatusUnprocessableEntity),
					do:            func() error { return c.Update(ctx, 1, slurmrest.JobUpdate{Hold: ptr(true)}) },
					wantErr:       "update job 1: slurmrestd answered HTTP 422: Job update requested failed: Invalid user id (slurm error 2010)",
					wantSentinels: []error{slurmrest.ErrPermission}},
				{name: "release done", method: http.MethodPost, path: jobPath, answer: withAnswer(t, cancel, "results", arrayOK),
					do: func() error { return c.Update(ctx, 1, slurmrest.JobUpdate{Hold: ptr(false)}) }},
			}
			if bed.restRequeue {
				calls = append(calls,
					call{name: "requeue refused", method: http.MethodGet, path: jobPath + "/requeue", answer: withAnswer(t, cancel, "status", arrayRefuse),
						do:            func() error { return c.Requeue(ctx, 1, slurmrest.RequeueOptions{}) },
						wantErr:       "requeue job 1: Slurm refused it: job 1: Access/permission denied (update of JobId=1 refused) (slurm error 2002)",
						wantSentinels: []error{slurmrest.ErrRefused, slurmrest.ErrPermission}},
					call{name: "requeue done", method: http.MethodGet, path: jobPath + "/requeue", answer: withAnswer(t, cancel, "status", arrayOK),
						do: func() error { return c.Requeue(ctx, 1, slurmrest.RequeueOptions{}) }})
			}
			// The refusal as captured from the test bed (TestRefusedByOwner
			// with -capture), where there is one: bob cancelling alice's job.
			if real, ok := srv.Record("cancel-refused"); ok {
				id, err := strconv.ParseInt(path.Base(real.Path), 10, 64)
				if err != nil {
					t.Fatalf("cancel-refused.json: %s is not a job's path", real.Path)
				}
				err = c.As(real.User).Cancel(ctx, id)
				var re *slurmrest.RefusedError
				if !errors.As(err, &re) || !errors.Is(err, slurmrest.ErrPermission) {
					t.Errorf("the captured refused cancel: err = %v, want a *RefusedError for permission", err)
				}
			}
			for _, tc := range calls {
				srv.Handle(tc.method, tc.path, slurmresttest.Reply(tc.answer))
				err := tc.do()
				srv.Handle(tc.method, tc.path, nil)
				if tc.wantErr == "" {
					if err != nil {
						t.Errorf("%s: %v", tc.name, err)
					}
					continue
				}
				var re *slurmrest.RefusedError
				if (!errors.As(err, &re) && slices.Contains(tc.wantSentinels, slurmrest.ErrRefused)) || err == nil || err.Error() != tc.wantErr {
					t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
					continue
				}
				for _, s := range tc.wantSentinels {
					if !errors.Is(err, s) {
						t.Errorf("%s: errors.Is(%v, %v) = false", tc.name, err, s)
					}
				}
				if errors.Is(err, slurmrest.ErrNotFound) {
					t.Errorf("%s: a refusal reads as not found", tc.name)
				}
			}
		})
	}
}

// Every answer is capped: one past the cap fails with a message that
// names the cap and the setting that raises it.
func TestAnswerCap(t *testing.T) {
	for version := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-"+version))
			nodes, _ := srv.Record("nodes")
			for _, tc := range []struct {
				limit   int64
				wantErr bool
			}{{int64(len(nodes.Response)), false}, {int64(len(nodes.Response)) - 1, true}} {
				c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token"),
					MaxAnswerBytes: tc.limit, MaxAnswerSetting: "clusters[].slurmrestd_max_answer_mib in the portal's configuration"})
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Nodes(ctx)
				if !tc.wantErr {
					if err != nil {
						t.Errorf("nodes with the cap at the answer's size: %v", err)
					}
					continue
				}
				var tooLarge *slurmrest.AnswerTooLargeError
				if !errors.As(err, &tooLarge) || !errors.Is(err, slurmrest.ErrAnswerTooLarge) ||
					!strings.Contains(err.Error(), "is larger than the cap of ") ||
					!strings.HasSuffix(err.Error(), "raise clusters[].slurmrestd_max_answer_mib in the portal's configuration") {
					t.Errorf("nodes one byte past the cap: %v, want an *AnswerTooLargeError naming the setting", err)
				}
			}
		})
	}
}
