package core

import (
	"math"
	"testing"
	"time"

	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestGPUQuery: the job's GPUs node by node, each the mean over the step,
// one series per GPU; and each query is PromQL Prometheus parses.
func TestGPUQuery(t *testing.T) {
	gpus := []slurmrest.GPU{{Node: "gpu2", Index: 3}, {Node: "gpu1", Index: 1}, {Node: "gpu1", Index: 0}}
	tests := map[string]struct {
		p    Prometheus
		gpus []slurmrest.GPU
		rng  time.Duration
		mean bool
		want string
	}{
		"defaults": {gpus: gpus, rng: 30 * time.Second,
			want: `max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu1",gpu=~"0|1"}[30s]) or ` +
				`avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu2",gpu=~"3"}[30s]))`},
		"mean of many": {gpus: gpus[:1], rng: 90 * time.Second, mean: true,
			want: `avg(max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu2",gpu=~"3"}[90s])))`},
		"every GPU now": {rng: 5 * time.Minute,
			want: `max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[300s]))`},
		"labels of a site": {p: Prometheus{NodeLabel: "node", GPULabel: "index", UtilMetric: "gpu_util"}, gpus: []slurmrest.GPU{{Node: `odd"name`, Index: 0}}, rng: time.Second,
			want: `max by (node, index) (avg_over_time(gpu_util{node="odd\"name",index=~"0"}[1s]))`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.p.gpuQuery(tc.gpus, tc.rng, tc.mean)
			if got != tc.want {
				t.Errorf("query\n got %s\nwant %s", got, tc.want)
			}
			if _, err := promql.NewParser(promql.Options{}).ParseExpr(got); err != nil {
				t.Errorf("Prometheus does not parse %s: %v", got, err)
			}
		})
	}
}

// TestHistoryStep: at most 300 steps over a job's life, in whole seconds,
// never finer than the cluster's step.
func TestHistoryStep(t *testing.T) {
	for life, want := range map[time.Duration]time.Duration{
		10 * time.Second:         30 * time.Second,
		time.Hour:                30 * time.Second,
		3 * time.Hour:            36 * time.Second,
		7 * 24 * time.Hour:       2016 * time.Second,
		7*24*time.Hour + 1:       2017 * time.Second,
		300*30*time.Second + 999: 31 * time.Second,
	} {
		got := historyStep(life, 30*time.Second)
		if got != want {
			t.Errorf("step over %s = %s, want %s", life, got, want)
		}
		if life/got > maxGPUPoints {
			t.Errorf("%s over %s: %d points", got, life, life/got)
		}
	}
}

var promSeeds = []string{
	`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"Hostname":"gpu1","gpu":"0"},"values":[[1795983872,"80"],[1795983873.5,"NaN"]]}]}}`,
	`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"gpu1","gpu":"1"},"value":[1795983872,"0.25"]}]}}`,
	`{"status":"error","errorType":"bad_data","error":"parse error"}`,
	`{"status":"success","data":{"resultType":"scalar","result":[1795983872,"1"]}}`,
	`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,2]]}]}}`,
}

// TestParsePromAnswer: a matrix and a vector read, NaN left out as a gap;
// an error, another result type, or a point not [time, "value"] refused.
func TestParsePromAnswer(t *testing.T) {
	wantOK := []bool{true, true, false, false, false}
	for i, seed := range promSeeds {
		got, err := parsePromAnswer([]byte(seed))
		if (err == nil) != wantOK[i] {
			t.Errorf("%s: error %v, want ok %v", seed, err, wantOK[i])
		}
		if i == 0 && (len(got) != 1 || len(got[0].points) != 1 || got[0].points[0].Util != 80 || got[0].labels["gpu"] != "0") {
			t.Errorf("matrix read as %+v", got)
		}
		if i == 1 && (len(got) != 1 || got[0].points[0].Util != 0.25 || !got[0].points[0].Time.Equal(time.Unix(1795983872, 0))) {
			t.Errorf("vector read as %+v", got)
		}
	}
}

func FuzzParsePromAnswer(f *testing.F) {
	for _, s := range promSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		series, err := parsePromAnswer(data)
		if err != nil {
			return
		}
		for _, s := range series {
			for _, p := range s.points {
				if math.IsNaN(p.Util) || math.IsInf(p.Util, 0) {
					t.Fatalf("a point of %v", p.Util)
				}
			}
		}
	})
}
