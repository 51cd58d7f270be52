// Package dashboards holds Strata's Grafana dashboards as code: the
// operator overview and one dashboard per part, each panel a PromQL query
// on Strata's own metrics, slurmctld's OpenMetrics (Slurm 26.05,
// MetricsType=metrics/openmetrics), dcgm-exporter, node_exporter's
// systemd collector or kube-state-metrics. `make generate` writes them to
// etc/grafana/*.json (cmd/dashgen); a test keeps the files current and
// parses every query.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Board is one dashboard: its file under etc/grafana, and its rows.
type Board struct {
	File, UID, Title, Description string
	Rows                          []Row
}

// Row is a titled row of panels.
type Row struct {
	Title  string
	Panels []Panel
}

// Kind is how a panel draws.
type Kind int

// The kinds of panel.
const (
	TimeSeries Kind = iota // lines over time
	Stat                   // one number per series, its latest value
)

// Panel is one panel and its queries.
type Panel struct {
	Title, Description, Unit string
	Kind                     Kind
	Stacked                  bool
	Queries                  []Query
}

// Query is one PromQL expression and its legend. Expressions may use
// Grafana's $__rate_interval and $__range, and nothing else of Grafana's.
type Query struct {
	Expr, Legend string
}

// datasource is the dashboards' one variable: the Prometheus to read.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// JSON renders the board as Grafana's dashboard JSON, indented, with a
// final newline.
func (b Board) JSON() ([]byte, error) {
	// The classic dashboard JSON, not dashboardv2: it is what Grafana 10
	// and 11 import and provision from files, and Grafana 12 still does.
	//nolint:staticcheck // the classic JSON, on purpose (above)
	db := dashboard.NewDashboardBuilder(b.Title).
		Uid(b.UID).
		Description(b.Description).
		Tags([]string{"strata"}).
		Editable().
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"))
	// Grafana keys panel state (links, the panel being viewed) by id:
	// one per row and panel, in order.
	var id uint32
	for _, r := range b.Rows {
		id++
		db = db.WithRow(dashboard.NewRowBuilder(r.Title).Id(id))
		for _, p := range r.Panels {
			id++
			db = db.WithPanel(panel(p, id))
		}
	}
	d, err := db.Build()
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", b.File, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", b.File, err)
	}
	return buf.Bytes(), nil
}

func targets(p Panel) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(p.Queries))
	for i, q := range p.Queries {
		t := prometheus.NewDataqueryBuilder().Expr(q.Expr).LegendFormat(q.Legend).RefId(string(rune('A' + i)))
		if p.Kind == Stat {
			t = t.Instant()
		} else {
			t = t.Range()
		}
		out = append(out, t)
	}
	return out
}

func panel(p Panel, id uint32) cog.Builder[dashboard.Panel] {
	switch p.Kind {
	case Stat:
		b := stat.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasource).Height(5).Span(6)
		if p.Unit != "" {
			b = b.Unit(p.Unit)
		}
		for _, t := range targets(p) {
			b = b.WithTarget(t)
		}
		return b
	default:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.Title).Description(p.Description).Datasource(datasource).Height(8).Span(12).Min(0)
		if p.Unit != "" {
			b = b.Unit(p.Unit)
		}
		if p.Stacked {
			b = b.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(30)
		}
		for _, t := range targets(p) {
			b = b.WithTarget(t)
		}
		return b
	}
}

// PromQL is the query as Prometheus would get it from Grafana over a
// 5-minute rate interval and a 1-hour range.
func (q Query) PromQL() string {
	return strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h").Replace(q.Expr)
}

// Located is one query and where it is.
type Located struct {
	Board, Panel string
	Query        Query
}

// Queries lists every query of every board.
func Queries() []Located {
	var out []Located
	for _, b := range Boards() {
		for _, r := range b.Rows {
			for _, p := range r.Panels {
				for _, q := range p.Queries {
					out = append(out, Located{Board: b.File, Panel: p.Title, Query: q})
				}
			}
		}
	}
	return out
}
