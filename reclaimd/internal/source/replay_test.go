package source

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const minimalHeader = "offset_seconds,gpu,util,mem_activity,mem_used_mib\n"

// parseCases are the table of ParseRecording cases; the fuzz test starts
// from their inputs.
var parseCases = map[string]struct {
	in      string
	want    *Recording // nil when an error is wanted
	wantErr string     // the whole error text
}{
	"minimal columns, two frames": {
		in: minimalHeader + "0,0,97,41,30500\n0,1,0,0,0\n10,1,0,0,0\n10,0,95.5,39,30500.25\n",
		want: &Recording{Name: "t.csv", Frames: []Frame{
			{Offset: 0, Samples: []Sample{
				{GPU: 0, UtilPercent: ptr(97), MemActivityPercent: ptr(41), MemUsedMiB: 30500},
				{GPU: 1, UtilPercent: ptr(0), MemActivityPercent: ptr(0)},
			}},
			{Offset: 10 * time.Second, Samples: []Sample{
				{GPU: 0, UtilPercent: ptr(95.5), MemActivityPercent: ptr(39), MemUsedMiB: 30500.25},
				{GPU: 1, UtilPercent: ptr(0), MemActivityPercent: ptr(0)},
			}},
		}},
	},
	"every column, in another order, with comments, blanks, spaces and quotes": {
		in: "# recorded on gpu01\n\n" +
			"gpu, offset_seconds, jobs, pids, mig, nvlink_tx_kbs, nvlink_rx_kbs, pcie_tx_kbs, pcie_rx_kbs, mem_total_mib, mem_used_mib, sm_active, mem_activity, util, model, uuid\n" +
			`3, 12.5, 1002;1001;1002, 77 ; 66, true, 1.5, 2, 3, 4, 81559, 1024, 55.5, , , "NVIDIA H100 80GB HBM3, SXM", GPU-x` + "\n" +
			"# a comment between rows\n" +
			"0, 12.5, , , false, , , , , 81559, 0, , 0, 0, , \n",
		want: &Recording{Name: "t.csv", Frames: []Frame{{Offset: 12500 * time.Millisecond, Samples: []Sample{
			{GPU: 0, UtilPercent: ptr(0), MemActivityPercent: ptr(0), MemTotalMiB: 81559},
			{
				GPU: 3, UUID: "GPU-x", Model: "NVIDIA H100 80GB HBM3, SXM", SMActivePercent: ptr(55.5),
				MemUsedMiB: 1024, MemTotalMiB: 81559, PCIeRxKBs: ptr(4), PCIeTxKBs: ptr(3),
				NVLinkRxKBs: ptr(2), NVLinkTxKBs: ptr(1.5), MIG: true,
				PIDs: []int{66, 77}, JobIDs: []int64{1001, 1002},
			},
		}}}},
	},
	"offsets with nanoseconds": {
		in: minimalHeader + "0.000000001,0,1,1,1\n1.5,0,1,1,1\n",
		want: &Recording{Name: "t.csv", Frames: []Frame{
			{Offset: 1, Samples: []Sample{{GPU: 0, UtilPercent: ptr(1), MemActivityPercent: ptr(1), MemUsedMiB: 1}}},
			{Offset: 1500 * time.Millisecond, Samples: []Sample{{GPU: 0, UtilPercent: ptr(1), MemActivityPercent: ptr(1), MemUsedMiB: 1}}},
		}},
	},
	"empty file": {
		in:      "",
		wantErr: "t.csv: no header: the first line that is not a comment must name the columns, e.g. offset_seconds,gpu,util,mem_activity,mem_used_mib",
	},
	"header only": {
		in:      "# nothing yet\n" + minimalHeader,
		wantErr: "t.csv: no samples: the file has a header but no rows",
	},
	"unknown, repeated and missing columns": {
		in: "offset_seconds,gpu,util,util,memory\n",
		wantErr: "t.csv:1: column \"util\" named twice\n" +
			"t.csv:1: unknown column \"memory\"; the columns are offset_seconds, gpu, uuid, model, util, mem_activity, sm_active, mem_used_mib, mem_total_mib, pcie_rx_kbs, pcie_tx_kbs, nvlink_rx_kbs, nvlink_tx_kbs, mig, pids, jobs\n" +
			"t.csv:1: missing column \"mem_activity\"; the header needs at least offset_seconds,gpu,util,mem_activity,mem_used_mib\n" +
			"t.csv:1: missing column \"mem_used_mib\"; the header needs at least offset_seconds,gpu,util,mem_activity,mem_used_mib",
	},
	"every bad line reported with its number": {
		in: "# header next\n" + minimalHeader +
			"0,0,97,41,30500\n" +
			"0,1,101,0,0\n" + // line 4
			"0,2,-1,0,0\n" +
			"0,0,1,1,1\n" +
			"5,x,1,1,1\n" +
			"1h,0,1,1,1\n" +
			"-1,0,1,1,1\n" +
			"3,0,1,1\n" + // line 10
			"1,0,1,1,1\n" +
			"10,1024,1,1,1\n" +
			"10,0,NaN,1,1\n" +
			"10,0,1,1,1e99\n",
		wantErr: "t.csv:4: util \"101\": want a number from 0 to 100\n" +
			"t.csv:5: util \"-1\": want a number from 0 to 100\n" +
			"t.csv:6: gpu 0 appears twice at offset 0 (first on line 3)\n" +
			"t.csv:7: gpu \"x\": want an index from 0 to 1023\n" +
			"t.csv:8: offset_seconds \"1h\": want decimal seconds since the start, such as 0, 10 or 12.5\n" +
			"t.csv:9: offset_seconds \"-1\": want decimal seconds since the start, such as 0, 10 or 12.5\n" +
			"t.csv:10: 4 fields, but the header names 5 columns\n" +
			"t.csv:12: gpu \"1024\": want an index from 0 to 1023\n" +
			"t.csv:13: util \"NaN\": want a number from 0 to 100\n" +
			"t.csv:14: mem_used_mib \"1e99\": want a number from 0 to 1073741824",
	},
	"offsets going backwards": {
		in:      minimalHeader + "10,0,1,1,1\n5,0,1,1,1\n",
		wantErr: "t.csv:3: offset_seconds 5 comes after 10: offsets must not decrease",
	},
	"used above total, bad lists, bad mig, control character": {
		in: "offset_seconds,gpu,util,mem_activity,mem_used_mib,mem_total_mib,pids,jobs,mig,model\n" +
			"0,0,1,1,50000,40960,,,,\n" +
			"0,1,1,1,1,,0,,,\n" +
			"0,2,1,1,1,,,1;x,,\n" +
			"0,3,1,1,1,,,4294967296,,\n" +
			"0,4,1,1,1,,,,maybe,\n" +
			"0,5,1,1,1,,,,,\"A\tB\"\n",
		wantErr: "t.csv:2: mem_used_mib 50000 exceeds mem_total_mib 40960\n" +
			"t.csv:3: pids \"0\": want positive integers separated by \";\"\n" +
			"t.csv:4: jobs \"1;x\": want positive integers separated by \";\"\n" +
			"t.csv:5: jobs \"4294967296\": want positive integers separated by \";\"\n" +
			"t.csv:6: mig \"maybe\": want true or false\n" +
			"t.csv:7: model \"A\\tB\": control character at byte 1",
	},
	"CSV syntax error stops the parse": {
		in:      minimalHeader + "0,0,1,1,1\n0,1,\"1,1,1\n",
		wantErr: "t.csv:3:12: extraneous or missing \" in quoted-field",
	},
}

func TestParseRecording(t *testing.T) {
	for name, tt := range parseCases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRecording("t.csv", strings.NewReader(tt.in))
			if tt.want == nil {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseRecording() error =\n%v\nwant\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRecording() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRecording() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRecordingCapsErrors(t *testing.T) {
	in := minimalHeader + strings.Repeat("0,x,1,1,1\n", 30)
	_, err := ParseRecording("t.csv", strings.NewReader(in))
	if err == nil {
		t.Fatal("ParseRecording() = nil error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || lines[maxErrors] != "t.csv: and 10 more errors" {
		t.Errorf("got %d lines ending %q; want %d errors and a count of the rest", len(lines), lines[len(lines)-1], maxErrors)
	}
}

// The shared sample file: GPU 0 busy with job 1001, GPU 1 idle but held by
// job 1002, every 10 s for two minutes. Other packages' tests rely on this.
func TestTwoGPUsFile(t *testing.T) {
	rec, err := LoadRecording(filepath.Join("testdata", "two-gpus.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Frames) != 13 || rec.Frames[12].Offset != 120*time.Second {
		t.Fatalf("%d frames, the last at %s; want 13 every 10 s", len(rec.Frames), rec.Frames[len(rec.Frames)-1].Offset)
	}
	for _, f := range rec.Frames {
		if len(f.Samples) != 2 {
			t.Fatalf("offset %s: %d GPUs, want 2", f.Offset, len(f.Samples))
		}
		busy, idle := f.Samples[0], f.Samples[1]
		if *busy.UtilPercent < 90 || !cmp.Equal(busy.JobIDs, []int64{1001}) || busy.MemUsedMiB == 0 {
			t.Errorf("offset %s: GPU 0 %+v, want busy with job 1001", f.Offset, busy)
		}
		if *idle.UtilPercent != 0 || *idle.MemActivityPercent != 0 || !cmp.Equal(idle.JobIDs, []int64{1002}) {
			t.Errorf("offset %s: GPU 1 %+v, want idle and held by job 1002", f.Offset, idle)
		}
		if busy.Model != "NVIDIA A100-SXM4-40GB" || busy.MemTotalMiB != 40960 {
			t.Errorf("offset %s: GPU 0 model %q with %v MiB", f.Offset, busy.Model, busy.MemTotalMiB)
		}
	}
	if _, err := LoadRecording(filepath.Join("testdata", "missing.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadRecording(missing) error = %v, want os.ErrNotExist", err)
	}
}

func TestReplay(t *testing.T) {
	rec, err := ParseRecording("r.csv", strings.NewReader(minimalHeader+
		"5,0,10,0,0\n15,0,20,0,0\n15,1,21,0,0\n20,0,30,0,0\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Length: last offset 20 plus the step before it, 5: 25 s.
	tests := map[string]struct {
		loop     bool
		elapsed  []time.Duration // Sample calls, since the start
		wantUtil [][]float64     // utilisation of each GPU returned by each call
		wantErr  error           // of the last call
	}{
		"before, at and between frames": {
			elapsed:  []time.Duration{0, 5 * time.Second, 14 * time.Second, 15 * time.Second, 24 * time.Second},
			wantUtil: [][]float64{{10}, {10}, {10}, {20, 21}, {30}},
		},
		"no loop: over after its length": {
			elapsed:  []time.Duration{24 * time.Second, 25 * time.Second},
			wantUtil: [][]float64{{30}},
			wantErr:  ErrReplayEnded,
		},
		"loop: starts again from offset 0": {
			loop:     true,
			elapsed:  []time.Duration{25 * time.Second, 40 * time.Second, 72 * time.Second},
			wantUtil: [][]float64{{10}, {20, 21}, {30}},
		},
		"a clock that went back gives the first frame": {
			elapsed:  []time.Duration{-time.Minute},
			wantUtil: [][]float64{{10}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewReplay(rec, t0, tt.loop)
			for k, e := range tt.elapsed {
				now := t0.Add(e)
				got, err := r.Sample(t.Context(), now)
				if k == len(tt.elapsed)-1 && tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Sample(+%s) error = %v, want %v", e, err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Sample(+%s) error = %v", e, err)
				}
				var util []float64
				for _, s := range got {
					util = append(util, *s.UtilPercent)
					if !s.At.Equal(now) {
						t.Errorf("Sample(+%s): At %s, want now", e, s.At)
					}
				}
				if diff := cmp.Diff(tt.wantUtil[k], util); diff != "" {
					t.Errorf("Sample(+%s) utilisation (-want +got):\n%s", e, diff)
				}
			}
		})
	}
}

func TestReplayStartsAtFirstSample(t *testing.T) {
	rec, err := LoadRecording(filepath.Join("testdata", "two-gpus.csv"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplay(rec, time.Time{}, false)
	later := t0.Add(time.Hour)
	if _, err := r.Sample(t.Context(), later); err != nil {
		t.Fatalf("first Sample() error = %v", err)
	}
	got, err := r.Sample(t.Context(), later.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if *got[0].UtilPercent != 98 { // offset 30 of the file
		t.Errorf("30 s in: GPU 0 util %v, want 98 (offset 30)", *got[0].UtilPercent)
	}
	// What Sample returned belongs to the caller.
	*got[0].UtilPercent, got[0].JobIDs[0] = -1, -1
	again, _ := r.Sample(t.Context(), later.Add(30*time.Second))
	if *again[0].UtilPercent != 98 || again[0].JobIDs[0] != 1001 {
		t.Errorf("changing a returned sample changed the recording")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Sample(ctx, later); !errors.Is(err, context.Canceled) {
		t.Errorf("Sample(cancelled) error = %v, want context.Canceled", err)
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	rec, err := LoadRecording(filepath.Join("testdata", "two-gpus.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// Add what the file lacks: a MIG GPU with unknowns, rates, odd offsets.
	rec.Frames = append(rec.Frames, Frame{Offset: 130*time.Second + 7, Samples: []Sample{
		{GPU: 2, UUID: "GPU-z", Model: `Model "quoted", with comma`, MemUsedMiB: 1.5, MemTotalMiB: 2,
			SMActivePercent: ptr(12.25), PCIeRxKBs: ptr(1), PCIeTxKBs: ptr(0), NVLinkRxKBs: ptr(1e6), NVLinkTxKBs: ptr(3),
			MIG: true, PIDs: []int{1, 2}},
	}})
	var buf bytes.Buffer
	r := NewRecorder(&buf, t0)
	for _, f := range rec.Frames {
		samples := make([]Sample, len(f.Samples))
		for i, s := range f.Samples {
			samples[i] = s.Clone()
			samples[i].At = t0.Add(f.Offset)
		}
		if err := r.Record(samples); err != nil {
			t.Fatalf("Record(offset %s) = %v", f.Offset, err)
		}
	}
	if err := r.Record(nil); err != nil {
		t.Errorf("Record(nil) = %v", err)
	}
	back, err := ParseRecording(rec.Name, &buf)
	if err != nil {
		t.Fatalf("ParseRecording(recorded) = %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("recorded and read back (-want +got):\n%s", diff)
	}
}

func TestRecorderOutOfOrder(t *testing.T) {
	r := NewRecorder(&bytes.Buffer{}, time.Time{})
	if err := r.Record([]Sample{{At: t0.Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	err := r.Record([]Sample{{GPU: 1, At: t0}})
	if err == nil || !strings.Contains(err.Error(), "record samples in time order") {
		t.Fatalf("Record(earlier) error = %v, want one asking for time order", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRecorderWriteError(t *testing.T) {
	err := NewRecorder(failingWriter{}, t0).Record([]Sample{{At: t0}})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Record() error = %v, want the writer's error", err)
	}
}

// FuzzParseRecording checks that ParseRecording never panics, and that
// whatever it accepts a Recorder writes back to the same recording.
func FuzzParseRecording(f *testing.F) {
	for _, tt := range parseCases {
		f.Add(tt.in)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "two-gpus.csv")); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		rec, err := ParseRecording("f.csv", strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv:") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			return
		}
		var buf bytes.Buffer
		r := NewRecorder(&buf, t0)
		for _, fr := range rec.Frames {
			samples := make([]Sample, len(fr.Samples))
			for i, s := range fr.Samples {
				samples[i] = s
				samples[i].At = t0.Add(fr.Offset)
			}
			if err := r.Record(samples); err != nil {
				t.Fatalf("Record() = %v", err)
			}
		}
		back, err := ParseRecording("f.csv", &buf)
		if err != nil {
			t.Fatalf("ParseRecording(recorded) = %v\ninput:\n%q\nrecorded:\n%s", err, in, buf.String())
		}
		if diff := cmp.Diff(rec, back); diff != "" {
			t.Fatalf("round trip (-parsed +recorded and parsed):\n%s", diff)
		}
	})
}
