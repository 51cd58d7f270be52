package core

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestSlurmStatus: what Slurm said becomes an answer the caller can act on.
func TestSlurmStatus(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		code int
	}{
		"refused":              {&slurmrest.APIError{Op: "submit job", Status: 422}, 422},
		"auth":                 {&slurmrest.AuthError{Op: "cancel"}, 403},
		"not found":            {fmt.Errorf("cancel: %w", slurmrest.ErrNotFound), 404},
		"unsupported":          {fmt.Errorf("requeue: %w", slurmrest.ErrUnsupported), 501},
		"down":                 {errors.New("dial tcp: connection refused"), 502},
		"server":               {&slurmrest.APIError{Op: "submit job", Status: 503}, 502},
		"refused for the user": {&slurmrest.RefusedError{Op: "cancel job 4", Items: []slurmrest.ItemError{{Job: "4", Code: 2002, Error: "Access/permission denied"}}}, 403},
		"update refused":       {&slurmrest.APIError{Op: "update job 4", Status: 500, Errors: []slurmrest.ErrorEntry{{Number: 2010, Error: "Invalid user id"}}}, 403},
		"ended":                {&slurmrest.RefusedError{Op: "cancel job 4", Items: []slurmrest.ItemError{{Job: "4", Code: 2021, Error: "Job/step already completing or completed"}}}, 409},
	} {
		if code, _, _ := slurmStatus(c.err); code != c.code {
			t.Errorf("%s: %d, want %d", name, code, c.code)
		}
	}
}

// TestUserText: what the caller reads of an error is Slurm's words, not
// slurmrestd's address nor the operators' hints.
func TestUserText(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"refused": {&slurmrest.RefusedError{Op: "cancel job 4", Items: []slurmrest.ItemError{{Job: "4", Code: 2002, Error: "Access/permission denied"}}},
			"Access/permission denied"},
		"api": {&slurmrest.APIError{Op: "update job 4", Status: 422, Errors: []slurmrest.ErrorEntry{{Description: "Job update requested failed", Number: 2010, Error: "Invalid user id"}}},
			"Job update requested failed: Invalid user id (slurm error 2010)"},
		"auth": {&slurmrest.AuthError{Op: "cancel", User: "alice", Status: 401},
			"slurmrestd did not accept the portal's credentials for your user (the portal's operators see why in its log)"},
		"transport": {fmt.Errorf(`cancel job 4: Delete "http://10.0.0.10:6820/slurm/v0.0.45/job/4": dial tcp 10.0.0.10:6820: connect: connection refused`),
			"the cluster's slurmrestd did not answer (the portal's operators see why in its log)"},
		"too large": {fmt.Errorf("list jobs: %w", &slurmrest.AnswerTooLargeError{Method: "GET", Path: "/slurm/v0.0.45/jobs/", Limit: 1, Setting: "clusters[0].slurmrestd_max_answer_mib"}),
			"slurmrestd's answer was larger than the portal reads (the portal's operators see which setting raises it in its log)"},
	} {
		if got := userText(c.err); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}
