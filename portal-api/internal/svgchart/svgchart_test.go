package svgchart

import (
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.svg")

func series(start time.Time, name string, vals ...float64) Series {
	s := Series{Name: name}
	for i, v := range vals {
		s.Points = append(s.Points, Point{T: start.Add(time.Duration(i) * 30 * time.Second), V: v})
	}
	return s
}

// TestGolden: each chart is drawn to the same bytes as its golden file
// (-update rewrites them), is well-formed XML, and carries its text
// alternative.
func TestGolden(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	nan := math.NaN()
	tests := map[string]Chart{
		"two-gpus": {ID: "gpu-41", Title: "GPU utilisation of job 41", Desc: "Mean 61%, from 0% to 100%, over 2 GPUs and 9 samples.",
			Series: []Series{
				series(start, "mean", 50, 55, 60, 70, 80, 65, 60, 55, 50),
				series(start, "gpu1:0", 100, 100, 90, 90, 80, 70, 60, 55, 50),
				series(start, "gpu1:1", 0, 10, 30, 50, 80, 60, 60, 55, 50),
			}, Threshold: 5, ThresholdLabel: "idle below 5%"},
		"gap":   {ID: "g", Title: "with a gap", Desc: "no samples for a minute", Series: []Series{series(start, "mean", 20, 30, nan, nan, 40, 50)}},
		"empty": {ID: "e", Title: "no samples yet", Desc: "Prometheus holds no sample of this job's GPUs yet."},
		"escaped": {ID: "x", Title: `<script>alert(1)</script>`, Desc: `" onload="alert(1)`,
			Series: []Series{series(start, "mean", 1, 2)}, Threshold: 5, ThresholdLabel: `</text><script>`},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Render(c)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", name+".svg")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err, " (run with -update)")
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s differs (-want +got):\n%s", file, d)
			}
			d := xml.NewDecoder(strings.NewReader(string(got)))
			for {
				if _, err := d.Token(); err != nil {
					if err.Error() != "EOF" {
						t.Errorf("not well-formed: %v", err)
					}
					break
				}
			}
			s := string(got)
			if !strings.Contains(s, `role="img"`) || !strings.Contains(s, `aria-labelledby="`+c.ID+`-title `+c.ID+`-desc"`) {
				t.Errorf("no text alternative")
			}
			for _, bad := range []string{"<script", "style=", ` onload="`} {
				if strings.Contains(s, bad) {
					t.Errorf("holds %q", bad)
				}
			}
		})
	}
}

func TestStatsOf(t *testing.T) {
	got := StatsOf(series(time.Time{}, "m", 10, math.NaN(), 30, 50))
	if d := cmp.Diff(Stats{Mean: 30, Min: 10, Max: 50, Samples: 3}, got); d != "" {
		t.Error(d)
	}
	if got := StatsOf(Series{}); got != (Stats{}) {
		t.Errorf("empty: %+v", got)
	}
}
