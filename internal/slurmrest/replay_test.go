package slurmrest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// record is one exchange with a real slurmrestd, as the capture test saved
// it under testdata/replay/slurm-<version>/.
type record struct {
	Seq      int             `json:"seq"` // order of capture
	Name     string          `json:"name"`
	User     string          `json:"user"` // X-SLURM-USER-NAME
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Query    string          `json:"query,omitempty"`
	Request  json.RawMessage `json:"request,omitempty"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response,omitempty"`
}

// replayInfo is what TestCapture saves of the test bed beside its records,
// in replayInfoFile: what the client negotiated there, and the cluster the
// records name.
type replayInfo struct {
	Parser  string `json:"parser"`
	Release string `json:"release"`
	Cluster string `json:"cluster"`
}

const replayInfoFile = "bed.json"

func (r record) key() string { return r.User + " " + r.Method + " " + r.Path + "?" + r.Query }

// replayServer serves saved exchanges: a request whose method, path and
// query match a record gets its status and body; when the record has a
// request body, the client must send the same JSON. Anything else is a 599
// so that a test sees it at once.
func replayServer(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay records in %s: run `make capture-slurmrest`", dir)
	}
	byKey := map[string][]record{}
	for _, f := range files {
		if filepath.Base(f) == replayInfoFile {
			continue
		}
		var rec record
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		byKey[rec.key()] = append(byKey[rec.key()], rec)
	}
	for _, recs := range byKey {
		sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The same request made twice (create, then create again) gets the
		// answers in the order they were captured; the last one repeats.
		mu.Lock()
		key := req.Header.Get("X-SLURM-USER-NAME") + " " + req.Method + " " + req.URL.Path + "?" + req.URL.RawQuery
		recs, ok := byKey[key]
		var rec record
		if ok {
			rec = recs[0]
			if len(recs) > 1 {
				byKey[key] = recs[1:]
			}
		}
		mu.Unlock()
		if !ok {
			var keys []string
			for k := range byKey {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Errorf("replay: no record for %s %s %s?%s (have: %s)", req.Header.Get("X-SLURM-USER-NAME"), req.Method, req.URL.Path, req.URL.RawQuery, strings.Join(keys, "; "))
			w.WriteHeader(599)
			return
		}
		if req.Header.Get("X-SLURM-USER-TOKEN") == "" {
			t.Errorf("replay: %s sent no token", rec.Name)
		}
		if len(rec.Request) > 0 {
			got, _ := io.ReadAll(req.Body)
			if !jsonEqual(got, rec.Request) {
				t.Errorf("replay %s: request body\n%s\ndiffers from the one slurmrestd accepted:\n%s", rec.Name, got, rec.Request)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Status)
		w.Write(rec.Response)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
