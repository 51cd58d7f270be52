package slurmrest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// finishJob fills what every parser derives alike: nodes, GPUs and TRES.
func finishJob(j Job, tresAlloc, tresReq string, gresDetail []string) (Job, error) {
	var err error
	if j.NodeList != "" {
		if j.Nodes, err = hostlist.Expand(j.NodeList); err != nil {
			return j, fmt.Errorf("job %d: %w", j.ID, err)
		}
	}
	if j.GPUs, err = JobGPUs(j.NodeList, gresDetail); err != nil {
		return j, fmt.Errorf("job %d: %w", j.ID, err)
	}
	if j.TRESAlloc, err = ParseTRES(tresAlloc); err != nil {
		return j, fmt.Errorf("job %d: %w", j.ID, err)
	}
	if j.TRESReq, err = ParseTRES(tresReq); err != nil {
		return j, fmt.Errorf("job %d: %w", j.ID, err)
	}
	return j, nil
}

// shareTRES adds one TRES value of a shares row; zeros are left out.
func shareTRES[V int64 | float64](m map[string]V, key string, v V) map[string]V {
	if key == "" || v == 0 {
		return m
	}
	if m == nil {
		m = map[string]V{}
	}
	m[key] = v
	return m
}

// oneJob picks job id from an answer about it. slurmrestd answers a job
// array's ID with every task of the array, and a heterogeneous job's
// leader with every component: only the record with the ID is the job.
func oneJob[T any](op string, id int64, in []T, conv func(T) (Job, error)) (Job, error) {
	for _, raw := range in {
		j, err := conv(raw)
		if j.ID == id {
			return j, err
		}
	}
	return Job{}, &APIError{Op: op, Status: http.StatusNotFound}
}

// escapePlus sends a '+' of the request path as %2B: slurmrestd reads a
// bare '+' as a space, so "4300+1" (a heterogeneous job's component)
// would name no job.
func escapePlus(_ context.Context, req *http.Request) error {
	if strings.Contains(req.URL.Path, "+") {
		req.URL.RawPath = strings.ReplaceAll(req.URL.EscapedPath(), "+", "%2B")
	}
	return nil
}

func finishNode(n Node) Node {
	n.GPUs, n.GPUType = countGPUs(n.GRES)
	n.GPUsUsed, _ = countGPUs(n.GRESUsed)
	return n
}

// shareRow places a row of the sshare tree: user rows carry the account in
// parent; account rows carry it in name.
func shareRow(s Share, name string, typ []string) Share {
	isUser := false
	for _, t := range typ {
		if strings.EqualFold(t, "USER") {
			isUser = true
		}
	}
	if isUser {
		s.User, s.Account = name, s.Parent
	} else {
		s.Account = name
	}
	if s.LevelFS >= math.MaxUint64/2 { // "infinite" is sent as uint64 max
		s.LevelFS = math.Inf(1)
	}
	return s
}

// environment returns env with a PATH: slurmrestd refuses a submission
// without an environment (HTTP 500, "I/O error writing script/environment").
func environment(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string(nil), env...), "PATH=/usr/local/bin:/usr/bin:/bin")
}

func minutesUp(d time.Duration) int64 { return int64((d + time.Minute - 1) / time.Minute) }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// tresJSON renders a TRES list for nested limit objects; a nil list is
// "null", which leaves the list out of the request (on an association
// write, slurmdbd then clears that limit); a TRES with Count -1 clears that
// limit.
func tresJSON(l TRESList) string {
	if l == nil {
		return "null"
	}
	type w struct {
		Type  string `json:"type"`
		Name  string `json:"name,omitempty"`
		Count int64  `json:"count"`
	}
	out := make([]w, 0, len(l))
	for _, t := range l {
		out = append(out, w(t))
	}
	return mustJSON(out)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with plain data
	}
	return string(b)
}

// jsonInto fills a generated anonymous struct from JSON, which is shorter and
// safer than naming its nested types.
func jsonInto(raw string, dst any) error {
	if err := json.Unmarshal([]byte(raw), dst); err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	return nil
}

// created maps slurmdbd's "already exists" (HTTP 304) to ErrExists.
func created(op, user string, status int, body []byte) error {
	if status == http.StatusNotModified {
		return fmt.Errorf("%s: %w", op, ErrExists)
	}
	return checkResponse(op, user, status, body)
}
