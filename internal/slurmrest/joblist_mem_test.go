package slurmrest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gen "github.com/strata-hpc/strata/internal/slurmrest/v0045"
)

// listingReader is a job listing of n records made from the captured job
// (testdata/replay/slurm-26.05/jobs.json), job ids 1 to n, produced as it
// is read: the test's own memory does not hold the listing.
type listingReader struct {
	head, tail []byte // the answer before and after the records
	recA, recB []byte // the record before and after its job id
	n, next    int
	chunk      []byte
	tailSent   bool
}

const placeholderID = 987654321

func newListingReader(tb testing.TB, bytesWanted int) *listingReader {
	tb.Helper()
	var ans map[string]json.RawMessage
	if err := json.Unmarshal(capturedJobs(tb, "jobs"), &ans); err != nil {
		tb.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(ans["jobs"], &recs); err != nil {
		tb.Fatal(err)
	}
	recs[0]["job_id"] = placeholderID
	rec, err := json.Marshal(recs[0])
	if err != nil {
		tb.Fatal(err)
	}
	a, b, ok := bytes.Cut(rec, []byte(strconv.Itoa(placeholderID)))
	if !ok {
		tb.Fatal("no job id in the captured record")
	}
	ans["jobs"] = json.RawMessage(`["RECORDS"]`)
	whole, err := json.Marshal(ans)
	if err != nil {
		tb.Fatal(err)
	}
	head, tail, _ := bytes.Cut(whole, []byte(`"RECORDS"`))
	return &listingReader{head: head, tail: tail, recA: a, recB: b, n: max(1, bytesWanted/(len(rec)+1))}
}

func (r *listingReader) Read(p []byte) (int, error) {
	for len(r.chunk) == 0 {
		switch {
		case r.head != nil:
			r.chunk, r.head = r.head, nil
		case r.next < r.n:
			r.next++
			var c []byte
			if r.next > 1 {
				c = append(c, ',')
			}
			c = append(c, r.recA...)
			c = strconv.AppendInt(c, int64(r.next), 10)
			r.chunk = append(c, r.recB...)
		case !r.tailSent:
			r.chunk, r.tailSent = r.tail, true
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.chunk)
	r.chunk = r.chunk[n:]
	return n, nil
}

// size is the listing's length in bytes.
func (r *listingReader) size() int64 {
	n, _ := io.Copy(io.Discard, &listingReader{head: r.head, tail: r.tail, recA: r.recA, recB: r.recB, n: r.n})
	return n
}

// peakHeap runs fn and returns the most heap its objects held at once
// above what they held before it began, sampled every 100 µs.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	read := func() uint64 { // a sample of its own: each goroutine reads with one
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var (
		mu   sync.Mutex
		peak = base
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			v := read()
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	last := read()
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	peak = max(peak, last)
	if peak < base {
		return 0
	}
	return peak - base
}

// listBuffered reads the listing as listJobs read it before it streamed:
// the whole answer into one buffer, then its records.
func listBuffered(tb testing.TB, body io.Reader) JobList {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		tb.Fatal(err)
	}
	l, err := listStream(tb, bytes.NewReader(buf.Bytes()))
	runtime.KeepAlive(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func listStream(_ testing.TB, body io.Reader) (JobList, error) {
	var m jobMemo
	n := 0
	resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(body)}
	return listJobs(&m, "list jobs", "", time.Time{}, resp, func(b []byte) (time.Time, error) {
		var v struct {
			Number int64 `json:"number"`
		}
		err := json.Unmarshal(b, &v)
		return time.Unix(v.Number, 0), err
	}, func(j gen.V0045JobInfo) (Job, error) { n++; return jobV0045(j) })
}

// measureListing reads a listing of about size bytes both ways and
// returns the peak heap of each and the jobs read.
func measureListing(tb testing.TB, size int) (buffered, stream uint64, jobs int) {
	r := newListingReader(tb, size)
	var lb, ls JobList
	buffered = peakHeap(func() {
		lb = listBuffered(tb, &listingReader{head: r.head, tail: r.tail, recA: r.recA, recB: r.recB, n: r.n})
	})
	runtime.KeepAlive(lb)
	lb = JobList{}
	stream = peakHeap(func() {
		var err error
		if ls, err = listStream(tb, &listingReader{head: r.head, tail: r.tail, recA: r.recA, recB: r.recB, n: r.n}); err != nil {
			tb.Fatal(err)
		}
	})
	if len(ls.Jobs) != r.n || ls.Jobs[r.n-1].ID != int64(r.n) {
		tb.Fatalf("read %d jobs, want %d", len(ls.Jobs), r.n)
	}
	return buffered, stream, len(ls.Jobs)
}

// TestListJobsMemoryFollowsJobs: reading a listing costs the jobs kept,
// not the answer: at most a quarter of what reading it whole cost.
func TestListJobsMemoryFollowsJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 40 MB listing twice")
	}
	buffered, stream, jobs := measureListing(t, 40<<20)
	t.Logf("%d jobs: peak heap %d MiB read whole, %d MiB streamed", jobs, buffered>>20, stream>>20)
	if stream*4 > buffered {
		t.Errorf("streaming a 40 MB listing peaked at %d MiB, more than a quarter of the %d MiB of reading it whole", stream>>20, buffered>>20)
	}
}

// BenchmarkListJobsPeakHeap reads a 200 MB listing (some 30,000 jobs
// of the captured one's size) as listJobs did before it streamed and as
// it does now, and reports the peak heap of each.
func BenchmarkListJobsPeakHeap(b *testing.B) {
	for b.Loop() {
		buffered, stream, jobs := measureListing(b, 200<<20)
		b.ReportMetric(float64(buffered)/(1<<20), "peak-MiB-buffered")
		b.ReportMetric(float64(stream)/(1<<20), "peak-MiB-stream")
		b.ReportMetric(float64(jobs), "jobs")
	}
}

// One byte past the cap fails the listing with the cap's message; a
// listing of exactly the cap is read.
func TestListJobsCapped(t *testing.T) {
	r := newListingReader(t, 1<<20)
	size := r.size()
	for _, tc := range []struct {
		limit   int64
		wantErr bool
	}{{limit: size, wantErr: false}, {limit: size - 1, wantErr: true}} {
		for _, known := range []bool{false, true} {
			resp := &http.Response{StatusCode: http.StatusOK, ContentLength: -1,
				Body: io.NopCloser(&listingReader{head: r.head, tail: r.tail, recA: r.recA, recB: r.recB, n: r.n})}
			if known {
				resp.ContentLength = size
			}
			tr := &capTransport{base: roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }),
				limit: tc.limit, setting: "slurm.max_answer_mib in reclaimd's configuration"}
			req, _ := http.NewRequest(http.MethodGet, "http://slurmrestd.internal:6820/slurm/v0.0.45/jobs/", nil)
			capped, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer capped.Body.Close()
			_, err = listStream(t, capped.Body)
			if !tc.wantErr {
				if err != nil {
					t.Errorf("a listing of exactly the cap (known length %t): %v", known, err)
				}
				continue
			}
			var tooLarge *AnswerTooLargeError
			if !errors.As(err, &tooLarge) || !errors.Is(err, ErrAnswerTooLarge) {
				t.Fatalf("a listing one byte past the cap (known length %t): %v, want an *AnswerTooLargeError", known, err)
			}
			want := "slurmrestd's answer to GET /slurm/v0.0.45/jobs/ is larger than the cap of " +
				strconv.FormatInt(size-1, 10) + " bytes: if answers this large are expected (a cluster with this many jobs, " +
				"nodes or associations), raise slurm.max_answer_mib in reclaimd's configuration"
			if tooLarge.Error() != want || !strings.HasPrefix(err.Error(), "list jobs: ") || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error:\n%s\nwant:\nlist jobs: ...%s", err, want)
			}
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
