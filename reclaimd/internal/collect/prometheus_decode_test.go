package collect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzPrometheusResultDecode checks the scanner of a matrix result
// against encoding/json's decode of the same result into maps of labels:
// where that reads a body, the scanner reads the same series from it.
func FuzzPrometheusResultDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/query_range-*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`null`, `[]`, `[{}]`, `[{"metric":null,"values":null}]`, `[{"metric":{},"values":[]}]`,
		`[{"Metric":{"a":"1","a":"2","b":null},"VALUES":[[1,"2"]],"metric":{"c":"3"},"x":{"y":[1,{"z":"]"}]}}]`,
		`[{"metric":{"H\u006fstname":"g\"pu1","gpu":"0"},"values":[[1.5,"NaN"],[2,"+Inf"]]}]`,
		`[{"metric":{"a":1}}]`, `[{"metric":[]}]`, `[1]`, `{"a":1}`, `[{"values":[[1,2]]}]`,
		`[{"metric":{"Hostname":"gpu1"},"metric":null,"values":[[1,"1"]]}]`,
	} {
		f.Add([]byte(`{"status":"success","data":{"resultType":"matrix","result":` + s + `}}`))
	}
	type mapSeries struct {
		Metric map[string]string `json:"metric"`
		Values promValues        `json:"values"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want struct {
			Data struct {
				Result []mapSeries `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &want) != nil {
			return
		}
		var got struct {
			Data struct {
				Result promResult `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("scanner failed where encoding/json reads the result: %v", err)
		}
		if (want.Data.Result == nil) != (got.Data.Result == nil) || len(want.Data.Result) != len(got.Data.Result) {
			t.Fatalf("result %v, want %v", got.Data.Result, want.Data.Result)
		}
		for i, w := range want.Data.Result {
			g := got.Data.Result[i]
			var labels map[string]string
			if g.Metric != nil {
				labels = map[string]string{}
				for _, l := range g.Metric {
					if _, dup := labels[l.name]; dup {
						t.Fatalf("series %d: label %q twice", i, l.name)
					}
					labels[l.name] = l.value
				}
			}
			if diff := cmp.Diff(w.Metric, labels); diff != "" {
				t.Fatalf("series %d labels (-encoding/json +scanner):\n%s", i, diff)
			}
			if diff := cmp.Diff(w.Values, g.Values, cmp.AllowUnexported(promPoint{}), cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("series %d values (-encoding/json +scanner):\n%s", i, diff)
			}
		}
	})
}
