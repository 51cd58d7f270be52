package agent

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// twoGPUs is the replay file the source package keeps for every user: GPU 0
// busy with job 1001, GPU 1 idle but held by job 1002, every 10 s.
var twoGPUs = filepath.Join("..", "source", "testdata", "two-gpus.csv")

// Agents must satisfy the interface with the sources they are given.
var (
	_ Source   = (*source.NVML)(nil)
	_ Source   = (*source.Replay)(nil)
	_ Recorder = (*source.Recorder)(nil)
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// replayAgent is an agent over the two-GPU replay, on a clock at t0, with
// no processes in its proc tree (the replay's jobs column gives the jobs).
func replayAgent(t *testing.T, loop bool) (*Agent, *clock) {
	t.Helper()
	rec, err := source.LoadRecording(twoGPUs)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	a, err := New(Config{
		Node: "gpu01", Source: source.NewReplay(rec, t0, loop),
		Window: time.Minute, Procs: ProcFS{Root: t.TempDir()}, Logger: discard(), Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

// The processes of the NVML agent's node and their jobs: 100 (job 4242 by
// cgroup v1), 200 (job 555 by its environment), 400 (no job), 102 (job 1001
// by cgroup v2).
func nvmlProcs(t *testing.T) ProcFS {
	return ProcFS{Root: procTree(t, map[int]map[string]string{
		100: {"cgroup": cgroupV1},
		200: {"cgroup": cgroupNoJob, "environ": environ("SLURM_JOB_ID=555")},
		400: {"cgroup": cgroupNoJob},
		102: {"cgroup": cgroupV2},
	})}
}

// nvmlServer is two A100s seen through go-nvml's mock server: GPU 0 busy
// with processes 200, 100 and 400; GPU 1 in MIG mode with process 102 on
// its first MIG device and none on its second. Optional calls answer
// ERROR_NOT_SUPPORTED but PCIe on GPU 0.
func nvmlServer() *server.Server {
	s := dgxa100.NewWithGPUs(gpus.Multiple(2, gpus.A100_SXM4_40GB)...)
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = "GPU-00000000-0000-0000-0000-00000000000" + string(rune('0'+i))
		dev.GetPcieThroughputFunc = func(c gonvml.PcieUtilCounter) (uint32, gonvml.Return) {
			if i == 0 {
				return 1000 + 1000*uint32(c), gonvml.SUCCESS
			}
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		dev.GetFieldValuesFunc = func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
		dev.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) { return gonvml.GpmSupport{}, gonvml.SUCCESS }
		dev.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		dev.GetRetiredPagesPendingStatusFunc = func() (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 0, false, false, gonvml.ERROR_NOT_SUPPORTED }
	}
	busy := s.Devices[0].(*server.Device)
	busy.MemoryInfo.Used = 30500 << 20
	busy.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 97, Memory: 42}, gonvml.SUCCESS
	}
	busy.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 200}, {Pid: 100}, {Pid: 400}}, gonvml.SUCCESS
	}
	mig := s.Devices[1].(*server.Device)
	mig.MigMode = gonvml.DEVICE_MIG_ENABLE
	mig.MemoryInfo.Used = 5000 << 20
	mig.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
	mig.GetMigDeviceHandleByIndexFunc = func(k int) (gonvml.Device, gonvml.Return) {
		if k > 1 {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		pids := []gonvml.ProcessInfo{{Pid: 102}}
		if k == 1 {
			pids = nil
		}
		return &mock.Device{
			GetUUIDFunc: func() (string, gonvml.Return) {
				return "MIG-00000000-0000-0000-0000-00000000000" + string(rune('1'+k)), gonvml.SUCCESS
			},
			GetGpuInstanceIdFunc:     func() (int, gonvml.Return) { return k + 1, gonvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, gonvml.Return) { return 0, gonvml.SUCCESS },
			GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
				return gonvml.Memory{Total: 19968 << 20, Used: uint64(5000*(1-k)) << 20}, gonvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]gonvml.ProcessInfo, gonvml.Return) { return pids, gonvml.SUCCESS },
		}, gonvml.SUCCESS
	}
	return s
}

// nvmlAgent is an agent over nvmlServer with nvmlProcs, on a clock at t0.
func nvmlAgent(t *testing.T, rec Recorder) (*Agent, *clock) {
	t.Helper()
	src, err := source.NewNVML(nvmlServer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	c := &clock{t: t0}
	a, err := New(Config{
		Node: "dgx01", Source: src, Procs: nvmlProcs(t), Recorder: rec, Logger: discard(), Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

func TestNewChecksConfig(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		wantErr string
	}{
		"empty": {
			cfg: Config{},
			wantErr: "agent config: node: empty; give the node's name as Slurm knows it\n" +
				"source: none; give an NVML or replay source",
		},
		"bad durations and bounds": {
			cfg: Config{Node: "n", Source: &source.Replay{}, Interval: time.Minute, Window: time.Second, MaxSamples: -1, StaleAfter: time.Second},
			wantErr: "agent config: window: 1s is shorter than the interval 1m0s\n" +
				"max_samples: -1; want at least 1\n" +
				"stale_after: 1s is shorter than the interval 1m0s, so every sample would be stale",
		},
		"negative interval": {
			cfg:     Config{Node: "n", Source: &source.Replay{}, Interval: -time.Second},
			wantErr: "agent config: interval: -1s is negative\nmax_samples: 0; want at least 1\nstale_after: -3s is shorter than the interval -1s, so every sample would be stale",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("New() error =\n%v\nwant\n%s", err, tt.wantErr)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	a, err := New(Config{Node: "n", Source: &source.Replay{}})
	if err != nil {
		t.Fatal(err)
	}
	got := a.cfg
	if got.Interval != DefaultInterval || got.Window != DefaultWindow || got.MaxSamples != 61 ||
		got.StaleAfter != 30*time.Second || got.Procs != (ProcFS{}) || got.Now == nil || got.Logger == nil {
		t.Errorf("defaults: %+v", got)
	}
}

// The agent maps every process of the NVML mock to its job (counting the
// one in no job as unattributed), for whole GPUs and MIG devices, and
// keeps what NVML could not measure as null.
func TestAgentNVML(t *testing.T) {
	a, c := nvmlAgent(t, nil)
	for range 2 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatalf("SampleOnce() = %v", err)
		}
		c.Add(10 * time.Second)
	}
	c.Add(-10 * time.Second)
	got := a.Snapshot()
	ptr := func(v float64) *float64 { return &v }
	at := t0.Add(10 * time.Second)
	want := Snapshot{
		Node: "dgx01", TakenAt: at, IntervalSeconds: 10, WindowSeconds: 600, SourceOK: true, LastSampleAt: &at, StartedAt: &t0,
		Version: SnapshotVersion, Cursor: strconv.FormatInt(t0.UnixNano(), 36) + ".2", Full: true, MaxSamples: 61,
		Faults: []FaultEvent{},
		GPUs: []GPUWindow{
			{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", Model: "Mock NVIDIA A100-SXM4-40GB", MemTotalMiB: 40960},
			{Index: 1, UUID: "GPU-00000000-0000-0000-0000-000000000001", Model: "Mock NVIDIA A100-SXM4-40GB", MemTotalMiB: 40960, MIG: true},
		},
	}
	for k := range 2 {
		at := t0.Add(time.Duration(k) * 10 * time.Second)
		want.GPUs[0].Samples = append(want.GPUs[0].Samples, Point{
			At: at, Util: ptr(97), MemActivity: ptr(42), MemUsedMiB: 30500, PCIeRxKBs: ptr(2000), PCIeTxKBs: ptr(1000),
			Processes: 3, JobIDs: []int64{555, 4242}, Unattributed: 1, // 400 is in no job
		})
		want.GPUs[1].Samples = append(want.GPUs[1].Samples, Point{
			At: at, MemUsedMiB: 5000, Processes: 1, JobIDs: []int64{1001},
			MIGInstances: []MIGPoint{
				{GPUInstance: 1, UUID: "MIG-00000000-0000-0000-0000-000000000001", MemUsedMiB: 5000, MemTotalMiB: 19968, Processes: 1, JobIDs: []int64{1001}},
				{GPUInstance: 2, UUID: "MIG-00000000-0000-0000-0000-000000000002", MemTotalMiB: 19968, JobIDs: []int64{}},
			},
		})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Snapshot() mismatch (-want +got):\n%s", diff)
	}
}

// What the agent records replays with the jobs it found: the processes of
// a recorded node do not exist where it is replayed.
func TestAgentRecordsForReplay(t *testing.T) {
	var buf bytes.Buffer
	a, c := nvmlAgent(t, source.NewRecorder(&buf, time.Time{}))
	for range 3 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	rec, err := source.ParseRecording("recorded", &buf)
	if err != nil {
		t.Fatalf("ParseRecording(recorded) = %v", err)
	}
	if len(rec.Frames) != 3 || rec.Frames[2].Offset != 20*time.Second {
		t.Fatalf("recorded %d frames, want 3 over 20 s", len(rec.Frames))
	}
	replayed, err := New(Config{
		Node: "dgx01", Source: source.NewReplay(rec, t0, false), Procs: ProcFS{Root: t.TempDir()},
		Logger: discard(), Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := replayed.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := replayed.Snapshot()
	if got := [][]int64{s.GPUs[0].Samples[0].JobIDs, s.GPUs[1].Samples[0].JobIDs}; !cmp.Equal(got, [][]int64{{555, 4242}, {1001}}) {
		t.Errorf("replayed job ids %v, want [[555 4242] [1001]]", got)
	}
}

func TestAgentSourceEnds(t *testing.T) {
	var logs bytes.Buffer
	rec, err := source.LoadRecording(twoGPUs)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	replay := source.NewReplay(rec, t0.Add(-125*time.Second), false) // ends at 130 s: 5 s left
	a, err := New(Config{
		Node: "gpu01", Source: replay, Procs: ProcFS{Root: t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.Add(10 * time.Second)
		if err := a.SampleOnce(t.Context()); !errors.Is(err, source.ErrReplayEnded) {
			t.Fatalf("SampleOnce() past the end = %v, want ErrReplayEnded", err)
		}
	}
	s := a.Snapshot()
	if s.SourceOK || !strings.Contains(s.LastError, "the recording is over") || s.LastSampleAt == nil || !s.LastSampleAt.Equal(t0) {
		t.Errorf("snapshot after failures: ok %v, error %q, last sample %v", s.SourceOK, s.LastError, s.LastSampleAt)
	}
	if len(s.GPUs) != 2 || len(s.GPUs[0].Samples) != 1 {
		t.Errorf("snapshot after failures lost the window: %+v", s.GPUs)
	}
	if n := strings.Count(logs.String(), "sample failed"); n != 3 {
		// Each failure's message differs (the elapsed time is in it).
		t.Errorf("%d failures logged, want 3:\n%s", n, logs.String())
	}
}

// A GPU whose UUID changes at an index is another GPU: its window restarts.
func TestAgentGPUReplaced(t *testing.T) {
	text := "offset_seconds,gpu,uuid,util,mem_activity,mem_used_mib\n0,0,GPU-a,1,1,1\n10,0,GPU-b,2,2,2\n"
	rec, err := source.ParseRecording("swap.csv", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	a, err := New(Config{Node: "n", Source: source.NewReplay(rec, t0, false), Logger: discard(), Now: c.Now, Procs: ProcFS{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	g := a.Snapshot().GPUs[0]
	if g.UUID != "GPU-b" || len(g.Samples) != 1 || *g.Samples[0].Util != 2 {
		t.Errorf("window after a swap: %+v", g)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update to accept):\n%s", path, diff)
	}
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSamplesStampedToTheMillisecond: a sample taken at a time of
// nanoseconds is stamped to the millisecond, as Prometheus stamps its
// samples, so the controller keeps its time in 4 bytes.
func TestSamplesStampedToTheMillisecond(t *testing.T) {
	a, c := replayAgent(t, true)
	c.mu.Lock()
	c.t = t0.Add(1234567891 * time.Nanosecond)
	c.mu.Unlock()
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := t0.Add(1234 * time.Millisecond)
	for _, g := range a.Snapshot().GPUs {
		if len(g.Samples) == 0 {
			t.Fatalf("GPU %d: no sample", g.Index)
		}
		if at := g.Samples[len(g.Samples)-1].At; !at.Equal(want) {
			t.Errorf("GPU %d: sample at %s, want %s (the millisecond)", g.Index, at.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	}
}
