package collect

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// refPoint reads one [unix_seconds, "value"] pair with encoding/json,
// as the scanner must: false where the scanner must refuse it.
func refPoint(raw json.RawMessage) (promPoint, bool) {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return promPoint{}, false // no number has an escape
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var pair []any
	if dec.Decode(&pair) != nil || len(pair) != 2 {
		return promPoint{}, false
	}
	num, ok := pair[0].(json.Number)
	str, ok2 := pair[1].(string)
	if !ok || !ok2 {
		return promPoint{}, false
	}
	sec, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.Abs(sec) > 253402300799 {
		return promPoint{}, false
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return promPoint{}, false
	}
	return promPoint{ms: int64(math.Round(sec * 1e3)), v: v}, true
}

// smallAnswer cuts a captured query_range answer to its first two series,
// each with its first two values, keeping every label: a fuzz seed of a
// few hundred bytes with the real answer's shape. Whole answers (kilobytes)
// made the fuzzer spend its time minimizing each input it found, and
// barely run at all.
func smallAnswer(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		tb.Fatal(err)
	}
	if d, ok := doc["data"].(map[string]any); ok {
		if r, ok := d["result"].([]any); ok {
			r = r[:min(2, len(r))]
			for _, s := range r {
				if m, ok := s.(map[string]any); ok {
					if v, ok := m["values"].([]any); ok {
						m["values"] = v[:min(2, len(v))]
					}
				}
			}
			d["result"] = r
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzPrometheusResultDecode checks the one-pass decode of an answer
// (parseQueryRange) against encoding/json's decode of the same answer
// into maps of labels and pairs of values: where that reads a matrix
// answer, the scanner reads the same series from it. Seeded from the
// captured answers, cut small (smallAnswer), and the table of odd cases.
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
		f.Add(smallAnswer(f, b))
	}
	for _, s := range []string{
		`null`, `[]`, `[{}]`, `[{"metric":null,"values":null}]`, `[{"metric":{},"values":[]}]`,
		`[{"Metric":{"a":"1","a":"2","b":null},"VALUES":[[1,"2"]],"metric":{"c":"3"},"x":{"y":[1,{"z":"]"}]}}]`,
		`[{"metric":{"H\u006fstname":"g\"pu1","gpu":"0"},"values":[[1.5,"NaN"],[2,"+Inf"]]}]`,
		`[{"metric":{"a":1}}]`, `[{"metric":[]}]`, `[1]`, `{"a":1}`, `[{"values":[[1,2]]}]`,
		`[{"metric":{"Hostname":"gpu1"},"metric":null,"values":[[1,"1"]]}]`,
		`[{"values":[[1,"1"],[2,"2"]]}],"result":[{"metric":{"a":"b"}}],"RESULT":[{},{}]`,
		`[{"values":[ [ 1e3 , "1e-2" ] ]}]`, `[{"values":[[1,"\u0031"]]}]`, `[{"values":[[1,"1",3]]}]`,
		`[{"values":[[-0,"-0"],[0.0005,"0x1p-2"]]}]`, `[{"metric":{"a":"\xff"}}]`, `[{"metric":{"a":"cafÃ©"}}]`, `[{"metric":{"\xfb":"a","b\xff":"c"}}]`,
	} {
		f.Add([]byte(`{"status":"success","data":{"resultType":"matrix","result":` + s + `}}`))
	}
	f.Add([]byte(`{"status":"success","data":{"resultType":"matrix","result":[]}} x`))
	f.Add([]byte(`{"Status":"success","Data":null,"data":{"ResultType":"matrix"}}`))
	type mapSeries struct {
		Metric map[string]string `json:"metric"`
		Values []json.RawMessage `json:"values"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want struct {
			Status string `json:"status"`
			Data   struct {
				ResultType string      `json:"resultType"`
				Result     []mapSeries `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &want) != nil || want.Status != "success" || want.Data.ResultType != "matrix" {
			return
		}
		wantValues := make([]promValues, len(want.Data.Result))
		for i, w := range want.Data.Result {
			if w.Values != nil {
				wantValues[i] = promValues{}
			}
			for _, raw := range w.Values {
				pt, ok := refPoint(raw)
				if !ok {
					return // the scanner refuses what is no sample
				}
				wantValues[i] = append(wantValues[i], pt)
			}
		}
		got, err := parseQueryRange(body)
		if err != nil {
			t.Fatalf("scanner failed where encoding/json reads the result: %v", err)
		}
		if (want.Data.Result == nil) != (got == nil) || len(want.Data.Result) != len(got) {
			t.Fatalf("result %v, want %v", got, want.Data.Result)
		}
		for i, w := range want.Data.Result {
			g := got[i]
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
			if diff := cmp.Diff(wantValues[i], g.Values, cmp.AllowUnexported(promPoint{}), cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("series %d values (-encoding/json +scanner):\n%s", i, diff)
			}
		}
	})
}
