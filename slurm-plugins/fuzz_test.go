package slurmplugins

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/internal/luatest"
)

// gpuSeeds are the GPU request strings of TestRules.
var gpuSeeds = []string{
	"gres/gpu:4", "gres/gpu:2", "gres:gpu:3", "gpu:5", "gres/gpu:h100:2,gres/nic:1", "gres/gpu:h100:1,gres/gpu:a100:2",
	"gres/gpu:1", "cpu=2,gres/gpu:h100=1", "gres/gpu=2", "gres/gpu:3", "gres/gpu:1k", "gres/gpu:1g.10gb:3", "gres/gpu:h100",
	"gres/gpumem:80G,gres/shard:4", "gres/gpu:99999999999999999999", "gres/gpu:9223372036854775807", "gres/gpu:h100=8p",
	"gres/gpu:2147483647", "gres/gpu:a100:8", "gres/gpu", "gres/gpu(IDX:0-1):2", "", ",", "gres/gpu:-1", "gres/gpu:1.5",
}

// asksFor is the count a refusal for GPUs names.
var asksFor = regexp.MustCompile(`asks for (\S+)`)

// FuzzGPURequest submits a job whose GPU request is the fuzzed string,
// as --gpus (tres_per_job), --gpus-per-node on 2 nodes or --gpus-per-task
// with 3 tasks, through job_submit.lua in the Lua harness. The plugin
// never fails (an error inside it would let every such job through), it
// either passes the job or refuses it for GPUs, and a count it prints is
// a whole number from 0 to the most a job may ask (never a wrapped
// -9223372036854775808, an exponent or inf).
//
// Each fuzzing process keeps one harness running (gpuHarness) that has
// loaded the plugin and the example's data (exampleDataFile) once and
// submits one job per input: building strata-policy in each process, and
// starting Lua, writing the plugin and loading the data per input, kept
// the target from getting past its seeds. What the plugin answered is
// turned into Go branches (gpuFeedback), the only coverage the fuzzer
// sees, so an input that makes the plugin answer anew is kept.
func FuzzGPURequest(f *testing.F) {
	for i, s := range gpuSeeds {
		f.Add(s, uint8(i%3))
	}
	var h gpuHarness
	defer h.close()
	f.Fuzz(func(t *testing.T, req string, field uint8) {
		job := map[string]any{"user_name": "alice", "partition": "interactive"}
		switch field % 3 {
		case 0:
			job["tres_per_job"] = req
		case 1:
			job["tres_per_node"], job["min_nodes"] = req, 2
		default:
			job["tres_per_task"], job["num_tasks"] = req, 3
		}
		r := h.submit(t, job)
		gpuFeedback(r)
		if strings.Contains(r.Logs, "job_submit.lua failed") {
			t.Fatalf("the plugin failed on %q: %s", req, r.Logs)
		}
		switch r.RC {
		case "0":
			return
		case strconv.Itoa(rcPolicy):
		default:
			t.Fatalf("%q: rc %s (%s); want 0 or a refusal for GPUs", req, r.RC, r.User)
		}
		if strings.Contains(r.User, "more than 2147483647 GPUs") {
			return
		}
		m := asksFor.FindStringSubmatch(r.User)
		if m == nil {
			t.Fatalf("%q: refused without a count: %s", req, r.User)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n < 0 || n > 2147483647 {
			t.Fatalf("%q: refused for %q GPUs: %s", req, m[1], r.User)
		}
	})
}

// exampleDataFile is the example policy's data as strata-policy renders
// it, for FuzzGPURequest: building strata-policy in each fuzzing process
// kept the fuzzer from its seeds for minutes. TestExampleDataFile holds
// it to a fresh render (-update rewrites it).
const exampleDataFile = "testdata/example-policy.lua"

var update = flag.Bool("update", false, "rewrite "+exampleDataFile+" from the example policy (review the diff)")

// TestExampleDataFile: exampleDataFile is what strata-policy renders from
// the example policy today.
func TestExampleDataFile(t *testing.T) {
	data := readExampleData(t)
	if *update {
		if err := os.WriteFile(exampleDataFile, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(exampleDataFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != data {
		t.Errorf("%s is not what strata-policy renders from %s: go test ./slurm-plugins -run TestExampleDataFile -update", exampleDataFile, exampleFile)
	}
}

// gpuHarness is the Lua harness left running (harness.lua's serve mode)
// on cluster "gpu" with the example policy's data loaded: each submit is
// one step on its standard input. The clock never moves and the data is
// never written again, so nothing one job does is seen by the next but
// what the plugin keeps itself, as slurmctld's interpreter would.
type gpuHarness struct {
	mu   sync.Mutex
	data string
	proc *luatest.Proc
}

func (h *gpuHarness) submit(t *testing.T, job map[string]any) result {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil {
		lua := luatest.Require(t)
		if h.data == "" {
			data, err := os.ReadFile(exampleDataFile)
			if err != nil {
				t.Fatal(err)
			}
			h.data = string(data)
		}
		script, err := os.ReadFile("job_submit.lua")
		if err != nil {
			t.Fatal(err)
		}
		harness, err := os.ReadFile("testdata/harness.lua")
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{"job_submit.lua": script, "steps.lua": stepsLua("gpu", []step{{name: "data", write: h.data}})}
		if h.proc, err = lua.Start(string(harness), files, "serve"); err != nil {
			t.Fatal(err)
		}
		if line, err := h.proc.ReadLine(); err != nil || !strings.HasPrefix(line, "data\t") {
			h.close()
			t.Fatalf("harness: %q, %v", line, err)
		}
	}
	chunk := "return " + step{name: "job", job: job}.lua()
	if err := h.proc.Write([]byte(strconv.Itoa(len(chunk)) + "\n" + chunk)); err != nil {
		h.close()
		t.Fatal(err)
	}
	line, err := h.proc.ReadLine()
	if err != nil {
		h.close() // the next input starts a new one
		t.Fatalf("harness: %v", err)
	}
	name, r := parseResult(t, line)
	if name != "job" {
		t.Fatalf("harness answered step %q", name)
	}
	return r
}

func (h *gpuHarness) close() {
	if h.proc != nil {
		_ = h.proc.Close()
		h.proc = nil
	}
}

// gpuFeedback branches on what the plugin answered: its code, the kind
// of message, how long the count it names is, and how many log lines it
// wrote.
func gpuFeedback(r result) {
	switch r.RC {
	case "0":
		feedbackSink++
	case strconv.Itoa(rcPolicy):
		feedbackSink += 2
	default:
		feedbackSink += 3
	}
	for _, kind := range []string{"asks for", "more than", "per node", "per task", "per job", "type", "GPUs of", "class", "tenant"} {
		if strings.Contains(r.User, kind) {
			feedbackSink += len(kind)
		}
	}
	if m := asksFor.FindStringSubmatch(r.User); m != nil {
		switch len(m[1]) {
		case 1:
			feedbackSink++
		case 2, 3:
			feedbackSink += 2
		case 4, 5, 6, 7, 8, 9:
			feedbackSink += 3
		default:
			feedbackSink += 4
		}
	}
	for range strings.Count(r.Logs, " | ") {
		feedbackSink++
	}
}

// feedbackSink keeps the feedback functions' branches from being
// compiled away.
var feedbackSink int
