package dashboards_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/strata-hpc/strata/internal/dashboards"
)

var update = flag.Bool("update", false, "rewrite etc/grafana from the definitions")

const dir = "../../etc/grafana"

// TestGeneratedIsCommitted: etc/grafana holds exactly what the definitions
// generate (make generate; go test -update rewrites it).
func TestGeneratedIsCommitted(t *testing.T) {
	var want []string
	for _, b := range dashboards.Boards() {
		want = append(want, b.File)
		data, err := b.JSON()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, b.File)
		if *update {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (make generate writes it)", err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s differs from what the definitions generate: run make generate\n%s", path,
				cmp.Diff(string(got), string(data)))
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range files {
		have = append(have, filepath.Base(f))
	}
	slices.Sort(want)
	if d := cmp.Diff(want, have); d != "" {
		t.Errorf("etc/grafana has files no definition makes, or lacks some (-generated +folder):\n%s", d)
	}
}

// TestQueriesParse: every panel query is PromQL that Prometheus's parser
// reads, after Grafana's interval variables, and names no Strata metric
// that no code of this module exports.
func TestQueriesParse(t *testing.T) {
	exported := strataMetrics(t)
	p := promql.NewParser(promql.Options{})
	n := 0
	for _, l := range dashboards.Queries() {
		n++
		expr, err := p.ParseExpr(l.Query.PromQL())
		if err != nil {
			t.Errorf("%s, %q: %s: %v", l.Board, l.Panel, l.Query.Expr, err)
			continue
		}
		for _, name := range metricNames(expr) {
			if strings.HasPrefix(name, "strata_") && !exported[name] {
				t.Errorf("%s, %q: %s names %s, which no code exports", l.Board, l.Panel, l.Query.Expr, name)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d queries: the walk is broken", n)
	}
}

// TestEveryPanelHasAQuery: no empty panel, no panel without a title or a
// description an operator can read.
func TestEveryPanelHasAQuery(t *testing.T) {
	for _, b := range dashboards.Boards() {
		for _, r := range b.Rows {
			for _, p := range r.Panels {
				if p.Title == "" || p.Description == "" || len(p.Queries) == 0 {
					t.Errorf("%s, row %q: panel %q lacks a title, a description or a query", b.File, r.Title, p.Title)
				}
			}
		}
	}
}

func metricNames(expr promql.Expr) []string {
	var out []string
	promql.Inspect(expr, func(n promql.Node, _ []promql.Node) error {
		if vs, ok := n.(*promql.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}

// recoveryMetrics are the recovery part's metrics, which the alert rules
// and the overview read.
var recoveryMetrics = []string{
	"strata_recovery_failures_total", "strata_recovery_retries_total", "strata_recovery_nodes_drained",
	"strata_recovery_drain_cap_hit_total", "strata_recovery_gpu_faults_total",
}

// strataMetrics is every strata_* string constant in the module's Go
// source (not tests), and the histograms' series.
func strataMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range recoveryMetrics {
		out[m] = true
	}
	name := regexp.MustCompile(`^strata_[a-z0-9_]+$`)
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && name.MatchString(s) {
					out[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for m := range out {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			out[m+suf] = true
		}
	}
	return out
}
