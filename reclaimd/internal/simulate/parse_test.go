package simulate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// jobCase is a jobs file and what ParseJobs makes of it.
type jobCase struct {
	in      string
	want    []Job
	wantErr string
}

var jobCases = map[string]jobCase{
	"the required columns": {
		in:   "job_id,start,end,gpus\n1,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n",
		want: []Job{{ID: 1, Start: at(0), End: at(time.Hour), GPUs: []decide.GPUKey{{Node: "n1", Index: 0}}}},
	},
	// Any column order, comments, blank lines, spaces, Unix seconds with
	// decimals, an offset, a byte-order mark; sorted by start.
	"every column": {
		in: "\ufeff# exported from sacct\n" +
			"gpus,end,start,partition,qos,class,tenant,account,user,job_id\n" +
			"\n" +
			"n2:3 ; n3:0, 1795957200.5, 1795953600, gpu, normal, train, research, ml, alice, 7\n" +
			`n1:1,2026-11-29T14:00:00+01:00,2026-11-29T11:00:00Z,gpu,,,,,"bob",6` + "\n",
		want: []Job{
			{ID: 6, User: "bob", Partition: "gpu", Start: at(-time.Hour), End: at(time.Hour), GPUs: []decide.GPUKey{{Node: "n1", Index: 1}}},
			{ID: 7, User: "alice", Account: "ml", Tenant: "research", Class: "train", QOS: "normal", Partition: "gpu",
				Start: time.Unix(1795953600, 0), End: time.Unix(1795957200, 5e8),
				GPUs: []decide.GPUKey{{Node: "n2", Index: 3}, {Node: "n3", Index: 0}}},
		},
	},
	"two runs of a requeued job": {
		in: "job_id,start,end,gpus\n" +
			"5,2026-11-29T13:00:00Z,2026-11-29T14:00:00Z,n1:0\n" +
			"5,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n",
		want: []Job{
			{ID: 5, Start: at(0), End: at(time.Hour), GPUs: []decide.GPUKey{{Node: "n1", Index: 0}}},
			{ID: 5, Start: at(time.Hour), End: at(2 * time.Hour), GPUs: []decide.GPUKey{{Node: "n1", Index: 0}}},
		},
	},
	"empty": {
		in:      "# nothing\n",
		wantErr: "j.csv: no header: the first line that is not a comment must name the columns, e.g. job_id,user,account,tenant,class,qos,partition,start,end,gpus",
	},
	"header only": {
		in:      "job_id,start,end,gpus\n",
		wantErr: "j.csv: no jobs: the file has a header but no rows",
	},
	"bad header": {
		in: "job_id,start,start,gpus,node\n",
		wantErr: `j.csv:1: column "start" named twice` + "\n" +
			`j.csv:1: unknown column "node"; the columns are job_id, user, account, tenant, class, qos, partition, start, end, gpus` + "\n" +
			`j.csv:1: missing column "end"; the header needs at least job_id,start,end,gpus`,
	},
	"every bad line at once": {
		in: "job_id,user,start,end,gpus\n" +
			"123_4,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n" +
			"2,a,2026-11-29T13:00:00Z,2026-11-29T12:00:00Z,n1:0\n" +
			"3,a,yesterday,2026-11-29T13:00:00Z,n1:0\n" +
			"4,a,1795953600000,1795957200,n1:0\n" +
			"5,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,\n" +
			"6,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1\n" +
			"7,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:1024\n" +
			"8,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0;n1:0\n" +
			"9,a\tb,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n" +
			"10,a,2026-11-29T12:00:00Z\n" +
			"11,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n 1:0\n" +
			"12,a,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n" +
			"12,a,2026-11-29T12:30:00Z,2026-11-29T14:00:00Z,n1:0\n",
		wantErr: `j.csv:2: job_id "123_4": want Slurm's numeric job id, a whole number above 0 (sacct's JobIDRaw)` + "\n" +
			"j.csv:3: end 2026-11-29T12:00:00Z is not after start 2026-11-29T13:00:00Z\n" +
			`j.csv:4: start "yesterday": want an RFC 3339 time ("2026-11-29T12:00:00Z") or Unix seconds ("1795953600")` + "\n" +
			`j.csv:5: start "1795953600000": Unix seconds after the year 9999 (milliseconds? write seconds)` + "\n" +
			`j.csv:6: gpus is empty: list the run's GPUs as node:index, separated by ";" (a run without GPUs has nothing to reclaim: leave it out)` + "\n" +
			`j.csv:7: gpus "n1": "n1" is not node:index` + "\n" +
			`j.csv:8: gpus "n1:1024": gpu index "1024" on n1: want a whole number from 0 to 1023 (the NVML index Slurm reports)` + "\n" +
			`j.csv:9: gpus "n1:0;n1:0": n1:0 is listed twice` + "\n" +
			`j.csv:10: user "a\tb": control character at byte 1` + "\n" +
			"j.csv:11: 3 fields, but the header names 5 columns\n" +
			`j.csv:12: gpus "n 1:0": node "n 1": space, control character, ':' or ';' at byte 1` + "\n" +
			"j.csv:14: job_id 12 runs from 2026-11-29T12:30:00Z to 2026-11-29T14:00:00Z, overlapping its run on line 13: two runs of one job cannot overlap; give them their own ids if they are different jobs",
	},
	"bad CSV": {
		in:      "job_id,start,end,gpus\n1,20\"26,x,y\n",
		wantErr: `j.csv:2:5: bare " in non-quoted-field`,
	},
	"at most 20 errors": {
		in:      "job_id,start,end,gpus\n" + strings.Repeat("x,2026-11-29T12:00:00Z,2026-11-29T13:00:00Z,n1:0\n", 25),
		wantErr: strings.Repeat(`j.csv:N: job_id "x": want Slurm's numeric job id, a whole number above 0 (sacct's JobIDRaw)`+"\n", 20) + "j.csv: and 5 more errors",
	},
}

// lineNumbers replaces the line numbers of "j.csv:12: " with N, for tests
// of many identical lines.
func lineNumbers(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		name, rest, ok := strings.Cut(l, ":")
		num, msg, ok2 := strings.Cut(rest, ":")
		if ok && ok2 && num != "" && strings.Trim(num, "0123456789") == "" {
			l = name + ":N:" + msg
		}
		b.WriteString(l)
	}
	return b.String()
}

func TestParseJobs(t *testing.T) {
	for name, tt := range jobCases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseJobs("j.csv", strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseJobs() = %v, want an error", got)
				}
				msg := err.Error()
				if strings.Contains(tt.wantErr, ":N:") {
					msg = lineNumbers(msg)
				}
				if diff := cmp.Diff(tt.wantErr, msg); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseJobs() (-want +got):\n%s", diff)
			}
		})
	}
}

// sampleCase is a samples file and what ParseSamples makes of it.
type sampleCase struct {
	in      string
	want    map[decide.GPUKey][]decide.Sample
	wantErr string
}

var sampleCases = map[string]sampleCase{
	// Out of order in the file, in order per GPU; mem_used_mib optional.
	"required columns": {
		in: "time,node,gpu,util,mem_activity\n" +
			"2026-11-29T12:01:00Z,n1,0,3,1.5\n" +
			"1795953600,n1,0,2,1\n" +
			"2026-11-29T12:00:00Z,n1,1,0,0\n",
		want: map[decide.GPUKey][]decide.Sample{
			{Node: "n1", Index: 0}: {{At: time.Unix(1795953600, 0), UtilPercent: 2, MemActivityPercent: 1}, {At: at(time.Minute), UtilPercent: 3, MemActivityPercent: 1.5}},
			{Node: "n1", Index: 1}: {{At: at(0)}},
		},
	},
	"mem_used_mib": {
		in: "mem_used_mib,mem_activity,util,gpu,node,time\n" +
			"30500,0.3,0,7,gpu-001,2026-11-29T12:00:30Z\n" +
			",0.3,0,7,gpu-001,2026-11-29T12:01:00Z\n",
		want: map[decide.GPUKey][]decide.Sample{
			{Node: "gpu-001", Index: 7}: {{At: at(30 * time.Second), MemActivityPercent: 0.3, MemUsedMiB: 30500}, {At: at(time.Minute), MemActivityPercent: 0.3}},
		},
	},
	"missing columns": {
		in:      "time,node,util\n",
		wantErr: "s.csv:1: missing column \"gpu\"; the header needs at least time,node,gpu,util,mem_activity\ns.csv:1: missing column \"mem_activity\"; the header needs at least time,node,gpu,util,mem_activity",
	},
	"every bad line at once": {
		in: "time,node,gpu,util,mem_activity,mem_used_mib\n" +
			"2026-11-29T12:00:00Z,n1,0,101,0,\n" +
			"2026-11-29T12:00:00Z,n1,0,NaN,0,\n" +
			"2026-11-29T12:00:00Z,n1,0,,0,\n" +
			"2026-11-29T12:00:00Z,n1,0,0,-1,\n" +
			"2026-11-29T12:00:00Z,n1,0,0,0,1e20\n" +
			"2026-11-29T12:00:00Z,,0,0,0,\n" +
			"2026-11-29T12:00:00Z,n1,x,0,0,\n" +
			"12:00,n1,0,0,0,\n" +
			"2026-11-29T12:00:00Z,n1,0,0,0,\n" +
			"1795953600,n1,0,0,0,\n",
		wantErr: `s.csv:2: util "101": want a number from 0 to 100` + "\n" +
			`s.csv:3: util "NaN": want a number from 0 to 100` + "\n" +
			"s.csv:4: util is empty: leave the sample out where there is no value\n" +
			`s.csv:5: mem_activity "-1": want a number from 0 to 100` + "\n" +
			`s.csv:6: mem_used_mib "1e20": want a number from 0 to 1073741824` + "\n" +
			"s.csv:7: empty node name\n" +
			`s.csv:8: gpu index "x" on n1: want a whole number from 0 to 1023 (the NVML index Slurm reports)` + "\n" +
			`s.csv:9: time "12:00": want an RFC 3339 time ("2026-11-29T12:00:00Z") or Unix seconds ("1795953600")` + "\n" +
			"s.csv:11: n1:0 has two samples at 2026-11-29T12:00:00Z (the other on line 10): one sample per GPU and time",
	},
}

func TestParseSamples(t *testing.T) {
	for name, tt := range sampleCases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSamples("s.csv", strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseSamples() = %v, want an error", got)
				}
				if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseSamples() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadTrace reads both files at once: their problems come together,
// and the sample interval is the commonest gap.
func TestReadTrace(t *testing.T) {
	tests := map[string]struct {
		jobs, samples string
		wantInterval  time.Duration
		wantErr       string
	}{
		"interval": {
			jobs: "job_id,start,end,gpus\n1,0,600,n:0\n",
			// Gaps of 10s (twice) and 60s (once) on n:0, 10s on n:1.
			samples:      "time,node,gpu,util,mem_activity\n10,n,0,0,0\n20,n,0,0,0\n30,n,0,0,0\n90,n,0,0,0\n10,n,1,0,0\n20,n,1,0,0\n",
			wantInterval: 10 * time.Second,
		},
		"one sample: no interval": {
			jobs:    "job_id,start,end,gpus\n1,0,600,n:0\n",
			samples: "time,node,gpu,util,mem_activity\n10,n,0,0,0\n",
		},
		"both files' problems": {
			jobs:    "job_id,start,end,gpus\n1,0,600,\n",
			samples: "time,node,gpu,util,mem_activity\n10,n,0,0\n",
			wantErr: `jobs.csv:2: gpus is empty: list the run's GPUs as node:index, separated by ";" (a run without GPUs has nothing to reclaim: leave it out)` + "\n" +
				"samples.csv:2: 4 fields, but the header names 5 columns",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tr, err := ReadTrace("jobs.csv", strings.NewReader(tt.jobs), "samples.csv", strings.NewReader(tt.samples))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ReadTrace() error = %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.SampleInterval != tt.wantInterval {
				t.Errorf("SampleInterval = %s, want %s", tr.SampleInterval, tt.wantInterval)
			}
		})
	}
}

// TestWriteCSV writes the Alex conversion back and reads it: the same
// trace, less its notes.
func TestWriteCSV(t *testing.T) {
	tr, err := LoadClusterCockpit(alexJobs, alexCluster, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var jobs, samples bytes.Buffer
	if err := tr.WriteCSV(&jobs, &samples); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace("jobs.csv", &jobs, "samples.csv", &samples)
	if err != nil {
		t.Fatal(err)
	}
	tr.Notes = nil
	if diff := cmp.Diff(tr, back); diff != "" {
		t.Errorf("round trip (-converted +written and read):\n%s", diff)
	}
}

// seed adds the table inputs and a testdata file to a fuzz corpus.
func seed(f *testing.F, inputs []string, file string) {
	for _, in := range inputs {
		f.Add(in)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", file)); err == nil {
		f.Add(string(b))
	}
}

// FuzzParseJobs checks that ParseJobs never panics, that its errors start
// with the file's name, and that what it accepts WriteCSV writes back to
// the same jobs.
func FuzzParseJobs(f *testing.F) {
	var inputs []string
	for _, c := range jobCases {
		inputs = append(inputs, c.in)
	}
	seed(f, inputs, "example.jobs.csv")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, err := ParseJobs("f.csv", strings.NewReader(in))
		if err != nil {
			checkErrors(t, err)
			return
		}
		checkTrace(t, Trace{Jobs: jobs})
		var buf bytes.Buffer
		if err := (Trace{Jobs: jobs}).WriteCSV(&buf, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		back, err := ParseJobs("f.csv", &buf)
		if err != nil {
			t.Fatalf("ParseJobs(written) = %v\ninput:\n%q\nwritten:\n%s", err, in, buf.String())
		}
		if diff := cmp.Diff(jobs, back); diff != "" {
			t.Fatalf("round trip (-parsed +written and parsed):\n%s", diff)
		}
	})
}

// FuzzParseSamples is FuzzParseJobs for samples.
func FuzzParseSamples(f *testing.F) {
	var inputs []string
	for _, c := range sampleCases {
		inputs = append(inputs, c.in)
	}
	seed(f, inputs, "example.samples.csv")
	f.Fuzz(func(t *testing.T, in string) {
		samples, err := ParseSamples("f.csv", strings.NewReader(in))
		if err != nil {
			checkErrors(t, err)
			return
		}
		checkTrace(t, Trace{Samples: samples})
		var buf bytes.Buffer
		if err := (Trace{Samples: samples}).WriteCSV(&bytes.Buffer{}, &buf); err != nil {
			t.Fatal(err)
		}
		back, err := ParseSamples("f.csv", &buf)
		if err != nil {
			t.Fatalf("ParseSamples(written) = %v\ninput:\n%q\nwritten:\n%s", err, in, buf.String())
		}
		if diff := cmp.Diff(samples, back); diff != "" {
			t.Fatalf("round trip (-parsed +written and parsed):\n%s", diff)
		}
	})
}

// checkErrors checks a parser's error: every line names the file, and
// there are at most 20 and a count.
func checkErrors(t *testing.T, err error) {
	t.Helper()
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > maxErrors+1 {
		t.Fatalf("%d error lines, want at most %d:\n%s", len(lines), maxErrors+1, err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "f.csv:") {
			t.Fatalf("error line %q does not start with the file's name", l)
		}
	}
}

// ExampleParseJobs shows the jobs file of a trace.
func ExampleParseJobs() {
	jobs, err := ParseJobs("jobs.csv", strings.NewReader(
		"job_id,user,account,tenant,class,qos,partition,start,end,gpus\n"+
			"1001,alice,ml-lab,research,train,normal,gpu,2026-11-29T12:00:00Z,2026-11-29T16:00:00Z,gpu-001:0;gpu-001:1\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.User, j.Tenant, j.End.Sub(j.Start), j.GPUs)
	}
	// Output: 1001 alice research 4h0m0s [gpu-001:0 gpu-001:1]
}
