package slurmrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// rawFinished is what a test reads of a captured slurmdbd job by itself,
// to check the conversion against: the record's own numbers.
type rawFinished struct {
	JobID   int64  `json:"job_id"`
	User    string `json:"user"`
	Account string `json:"account"`
	State   struct {
		Current []string `json:"current"`
	} `json:"state"`
	Time struct {
		Elapsed, Start, End, Submission int64
	} `json:"time"`
	TRES struct {
		Allocated []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Count int64  `json:"count"`
		} `json:"allocated"`
	} `json:"tres"`
}

func (r rawFinished) gpus() int64 {
	for _, t := range r.TRES.Allocated {
		if t.Type == "gres" && t.Name == "gpu" {
			return t.Count
		}
	}
	return 0
}

// TestHistoryReplay replays slurmdbd's answers captured by TestHistory on
// each release: the history of a window (its query as captured), one
// finished job, and a job slurmdbd never saw. The two-GPU job's GPU-hours
// are its elapsed seconds times its allocated gres/gpu, as the captured
// record has them.
func TestHistoryReplay(t *testing.T) {
	for version := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-"+version))
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
			if err != nil {
				t.Fatal(err)
			}
			hist, ok := srv.Record("history")
			if !ok {
				t.Fatal("no history.json: run TestHistory with -capture")
			}
			q, err := url.ParseQuery(hist.Query)
			if err != nil {
				t.Fatal(err)
			}
			unix := func(k string) time.Time {
				n, err := strconv.ParseInt(q.Get(k), 10, 64)
				if err != nil {
					t.Fatalf("history.json: %s=%q: %v", k, q.Get(k), err)
				}
				return time.Unix(n, 0)
			}
			f := slurmrest.HistoryFilter{Users: strings.Split(q.Get("users"), ","), From: unix("start_time"), To: unix("end_time")}
			jobs, err := c.History(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Jobs []rawFinished `json:"jobs"`
			}
			if err := json.Unmarshal(hist.Response, &raw); err != nil {
				t.Fatal(err)
			}
			if len(jobs) != len(raw.Jobs) || len(jobs) == 0 {
				t.Fatalf("History gave %d jobs, the answer holds %d", len(jobs), len(raw.Jobs))
			}
			byID := map[int64]slurmrest.FinishedJob{}
			for _, j := range jobs {
				byID[j.ID] = j
			}
			for _, r := range raw.Jobs {
				j, ok := byID[r.JobID]
				if !ok {
					t.Fatalf("job %d of the answer is not in History", r.JobID)
				}
				want := float64(r.gpus()) * float64(r.Time.Elapsed) / 3600
				if j.User != r.User || j.Account != r.Account || j.GPUs() != r.gpus() || j.GPUHours() != want ||
					j.Elapsed != time.Duration(r.Time.Elapsed)*time.Second || j.State.String() != strings.Join(r.State.Current, ",") ||
					j.EndTime.Unix() != r.Time.End || j.StartTime.Unix() != r.Time.Start || j.SubmitTime.Unix() != r.Time.Submission {
					t.Errorf("job %d: %+v (%v GPU-hours), the answer has %+v (%v GPU-hours)", r.JobID, j, j.GPUHours(), r, want)
				}
				if r.gpus() == 0 || !j.Ended() {
					t.Errorf("job %d: %d GPUs, ended %t: TestHistory captures an ended GPU job", r.JobID, r.gpus(), j.Ended())
				}
			}

			one, ok := srv.Record("finished-job")
			if !ok {
				t.Fatal("no finished-job.json")
			}
			id, err := strconv.ParseInt(filepath.Base(one.Path), 10, 64)
			if err != nil {
				t.Fatalf("finished-job.json: %s is not a job's path", one.Path)
			}
			got, err := c.FinishedJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if h := byID[id]; got.ID != id || got.GPUHours() != h.GPUHours() || !got.EndTime.Equal(h.EndTime) {
				t.Errorf("FinishedJob(%d) = %+v, History has %+v", id, got, h)
			}
			if _, err := c.FinishedJob(ctx, 999999); !errors.Is(err, slurmrest.ErrNotFound) {
				t.Errorf("FinishedJob(999999) = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestHistoryFilterRefused(t *testing.T) {
	now := time.Now()
	for name, tc := range map[string]struct {
		f    slurmrest.HistoryFilter
		want string
	}{
		"a window backwards": {slurmrest.HistoryFilter{From: now, To: now.Add(-time.Hour)}, "the window ends"},
		"a comma":            {slurmrest.HistoryFilter{Users: []string{"alice,bob"}}, `name "alice,bob"`},
		"an empty account":   {slurmrest.HistoryFilter{Accounts: []string{""}}, `name ""`},
		"a space":            {slurmrest.HistoryFilter{Accounts: []string{"a b"}}, `name "a b"`},
	} {
		t.Run(name, func(t *testing.T) {
			// No server: a refused filter never reaches slurmrestd.
			c := replayClient(t)
			_, err := c.History(context.Background(), tc.f)
			if !errors.Is(err, slurmrest.ErrBadFilter) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("History(%+v) = %v, want ErrBadFilter with %q", tc.f, err, tc.want)
			}
		})
	}
}

func replayClient(t *testing.T) *slurmrest.Client {
	t.Helper()
	srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-26.05"))
	c, err := slurmrest.New(context.Background(), slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
