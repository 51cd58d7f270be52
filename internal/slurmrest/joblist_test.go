package slurmrest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/fuzzseed"
	gen "github.com/strata-hpc/strata/internal/slurmrest/v0045"
)

// refJobList is how job lists were read before the memo: the whole body
// decoded into the generated answer, every record converted. listJobs
// must give the same.
func refJobList(since time.Time, body []byte) (JobList, error) {
	if err := checkResponse("list jobs", "", http.StatusOK, body); err != nil {
		return JobList{}, err
	}
	var ans gen.V0045OpenapiJobInfoResp
	if err := json.Unmarshal(body, &ans); err != nil {
		return JobList{}, err
	}
	return jobList(since, noValTime(&ans.LastUpdate), ans.Jobs, jobV0045)
}

// jobList converts a decoded jobs answer. slurmrestd answers a
// conditional request with no change by an empty list, last_update 0 and
// a warning.
func jobList[T any](since, updated time.Time, in []T, conv func(T) (Job, error)) (JobList, error) {
	out := JobList{Updated: updated}
	if !since.IsZero() && len(in) == 0 && updated.IsZero() {
		return JobList{Unchanged: true, Updated: since}, nil
	}
	out.Jobs = make([]Job, 0, len(in))
	for _, j := range in {
		x, err := conv(j)
		if err != nil {
			out.Unreadable = append(out.Unreadable, UnreadableJob{ID: x.ID, Err: err})
			continue
		}
		out.Jobs = append(out.Jobs, x)
	}
	if out.Updated.IsZero() {
		out.Updated = since
	}
	return out, nil
}

// memoList reads body through m, counting the records converted.
func memoList(m *jobMemo, since time.Time, body []byte, converted *int) (JobList, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(body))}
	return listJobs(m, "list jobs", "", since, resp, func(b []byte) (time.Time, error) {
		var v gen.V0045Uint64NoValStruct
		err := json.Unmarshal(b, &v)
		return noValTime(&v), err
	}, func(j gen.V0045JobInfo) (Job, error) {
		*converted++
		return jobV0045(j)
	})
}

var cmpJobList = cmp.Options{cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })}

func capturedJobs(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "replay", "slurm-26.05", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Response
}

// manyJobs is the captured job list with the record repeated n times, job
// ids 1 to n; a record whose id is in odd gets an odd gres_detail.
func manyJobs(t testing.TB, n int, odd map[int]bool, comment string) []byte {
	t.Helper()
	var ans map[string]json.RawMessage
	if err := json.Unmarshal(capturedJobs(t, "jobs"), &ans); err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(ans["jobs"], &recs); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for i := 1; i <= n; i++ {
		b, _ := json.Marshal(recs[0])
		var r map[string]any
		_ = json.Unmarshal(b, &r)
		r["job_id"] = i
		if odd[i] {
			r["gres_detail"] = []string{"gpu:h100:2(IDX:0-1)", "gpu:h100:2(IDX:2-3)"}
		}
		if i == 2 {
			r["comment"] = comment
		}
		out = append(out, r)
	}
	ans["jobs"], _ = json.Marshal(out)
	body, _ := json.Marshal(ans)
	return body
}

// The memo gives what a whole decode gives, and converts only the records
// that changed since the last list: one unreadable record is unreadable
// again without being decoded, a changed one is decoded afresh.
func TestListJobsMemo(t *testing.T) {
	var m jobMemo
	converted := 0
	since := time.Unix(1795983000, 0)
	for i, tc := range []struct {
		body          []byte
		since         time.Time
		wantConverted int
	}{
		{body: capturedJobs(t, "jobs"), wantConverted: 1},
		{body: capturedJobs(t, "jobs-unchanged"), since: since, wantConverted: 0},
		{body: manyJobs(t, 50, map[int]bool{7: true}, "a"), wantConverted: 50},
		{body: manyJobs(t, 50, map[int]bool{7: true}, "a"), wantConverted: 0},
		{body: manyJobs(t, 51, map[int]bool{7: true}, "b"), wantConverted: 2}, // job 2 changed, job 51 new
		{body: manyJobs(t, 51, map[int]bool{7: true}, "a"), wantConverted: 1}, // job 2 as it was two lists ago
		{body: capturedJobs(t, "jobs"), wantConverted: 1},                     // job 1 as captured is not job 1 above
	} {
		converted = 0
		got, err := memoList(&m, tc.since, tc.body, &converted)
		want, werr := refJobList(tc.since, tc.body)
		if err != nil || werr != nil {
			t.Fatalf("list %d: %v; the whole decode: %v", i, err, werr)
		}
		if diff := cmp.Diff(want, got, cmpJobList); diff != "" {
			t.Errorf("list %d (-whole decode +memo):\n%s", i, diff)
		}
		if converted != tc.wantConverted {
			t.Errorf("list %d: %d records converted, want %d", i, converted, tc.wantConverted)
		}
	}
}

func TestListJobsErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not an object":   `[1]`,
		"jobs not array":  `{"jobs": 3}`,
		"bad record":      `{"jobs": [{"job_id": "x"}]}`,
		"unterminated":    `{"jobs": [{"job_id": 1}`,
		"trailing":        `{"jobs": []} x`,
		"bad errors":      `{"errors": 5, "jobs": []}`,
		"slurm error":     `{"errors": [{"error": "boom", "error_number": 2}], "jobs": []}`,
		"bad last_update": `{"last_update": "x", "jobs": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			var m jobMemo
			n := 0
			if got, err := memoList(&m, time.Time{}, []byte(body), &n); err == nil {
				t.Errorf("listJobs(%s) = %+v, want an error", body, got)
			}
		})
	}
}

// FuzzListJobs: whatever the body, listJobs does not panic, and where the
// whole decode reads a body, the memo reads it the same, twice in a row.
func FuzzListJobs(f *testing.F) {
	// The captured list's first record in pieces of 8 fields
	// (SeedPieces): whole, it kept the fuzzer minimizing (13 runs in
	// 10 s).
	for _, piece := range SeedPieces(capturedJobs(f, "jobs"), "jobs", 8) {
		f.Add(piece)
	}
	f.Add(fuzzseed.JSON(capturedJobs(f, "jobs-unchanged"), 1))
	for _, s := range []string{`null`, `{}`, `{"jobs":null}`, `{"JOBS":[{"job_id":1}]}`, `{"jo\u0062s":[{"job_id":2}]}`,
		`{"jobs":[{"job_id":1,"comment":"a\"]}"}],"meta":{"x":[1,{"y":"}"}]}}`, `{"jobs":[],"jobs":[{"job_id":3}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if HostsBeyond(body, 4096) {
			t.Skip("a host list of more than 4,096 hosts")
		}
		var m jobMemo
		n := 0
		got, err := memoList(&m, time.Time{}, body, &n)
		want, werr := refJobList(time.Time{}, body)
		if werr != nil {
			return
		}
		if err != nil {
			if json.Valid(body) {
				t.Fatalf("the whole decode reads %q, the memo fails: %v", body, err)
			}
			return
		}
		// cmp.Equal first: a Diff of a job with 4,096 GPUs, which a
		// mutation of an IDX range makes, takes a second.
		if !cmp.Equal(want, got, cmpJobList) {
			t.Fatalf("%q (-whole decode +memo):\n%s", body, cmp.Diff(want, got, cmpJobList))
		}
		again, err := memoList(&m, time.Time{}, body, &n)
		if err != nil || !cmp.Equal(want, again, cmpJobList) {
			t.Fatalf("%q read a second time: %v %+v", body, err, again)
		}
	})
}

// BenchmarkListJobs reads a list of 2,000 records of which one changed
// since the last, against the whole decode of the same list.
func BenchmarkListJobs(b *testing.B) {
	bodies := [][]byte{manyJobs(b, 2000, nil, "a"), manyJobs(b, 2000, nil, "b")}
	b.Run("memo", func(b *testing.B) {
		var m jobMemo
		n := 0
		b.SetBytes(int64(len(bodies[0])))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := memoList(&m, time.Time{}, bodies[i%2], &n); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(bodies[0])))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := refJobList(time.Time{}, bodies[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
