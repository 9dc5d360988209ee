// The SDK marks its classic dashboard model deprecated in favour of the v2
// schema, which only Grafana 12 with its new dashboard API reads; file
// provisioning and the import dialog of every current Grafana take the
// classic JSON, so that is what we build.
//
//lint:file-ignore SA1019 the classic dashboard model is the portable one (see above)

package main

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// uid is the dashboard's fixed identity, so that an import or a
// provisioning replaces the previous version instead of adding a copy.
const uid = "hongbao-overview"

// rate is the window of every rate and increase: Grafana's
// $__rate_interval adapts it to the scrape interval and the zoom.
const rate = "[$__rate_interval]"

// source is the Prometheus data source every panel queries: the
// dashboard's datasource variable, so that one import fits any Grafana.
var source = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// query is one PromQL expression of a panel and its legend.
type query struct{ expr, legend string }

// q is a query.
func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// panel describes one panel; the builders below turn it into the SDK's.
type panel struct {
	title, help, unit string
	queries           []query
	// stat makes a single-figure panel instead of a graph: green, and red
	// from alarm on when alarm is set; red, and green from healthy on when
	// healthy is set.
	stat           bool
	alarm, healthy *float64
	// stack stacks the series (outcomes that add up to a total).
	stack bool
	width int // in grid columns of 24; 0 is 8
}

// row is a titled row of panels.
type row struct {
	title  string
	panels []panel
}

// Build returns the dashboard.
func Build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("hongbao").
		Uid(uid).
		Description("Red packet rains and discount campaigns served by hongbao: traffic, latency, pools and budgets, settlement into the ledger, and errors.").
		Tags([]string{"hongbao"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	id := uint32(1)
	for _, r := range rows() {
		b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		id++
		for _, p := range r.panels {
			b.WithPanel(p.builder(id))
			id++
		}
	}
	return b.Build()
}

// Render returns the dashboard as the JSON checked in, ending in a newline.
func Render() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, fmt.Errorf("build the dashboard: %w", err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the dashboard: %w", err)
	}
	return append(out, '\n'), nil
}

// builder turns p into the SDK's builder of a graph or a stat panel.
func (p panel) builder(id uint32) cog.Builder[dashboard.Panel] {
	w := p.width
	if w == 0 {
		w = 8
	}
	if p.stat {
		s := stat.NewPanelBuilder().Id(id).Title(p.title).Description(p.help).Unit(p.unit).
			Datasource(source).Height(8).Span(uint32(w)).
			GraphMode(common.BigValueGraphModeArea).ColorMode(common.BigValueColorModeBackground).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
			Thresholds(thresholds(p.alarm, p.healthy))
		for i, t := range p.queries {
			s.WithTarget(target(i, t))
		}
		return s
	}
	g := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(p.help).Unit(p.unit).
		Datasource(source).Height(8).Span(uint32(w)).Min(0).FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	if p.stack {
		g.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
	}
	for i, t := range p.queries {
		g.WithTarget(target(i, t))
	}
	return g
}

// thresholds colours a stat: green, red from alarm on; or red, green
// from healthy on.
func thresholds(alarm, healthy *float64) cog.Builder[dashboard.ThresholdsConfig] {
	steps := []dashboard.Threshold{{Color: "green"}}
	switch {
	case alarm != nil:
		steps = append(steps, dashboard.Threshold{Value: alarm, Color: "red"})
	case healthy != nil:
		steps = []dashboard.Threshold{{Color: "red"}, {Value: healthy, Color: "green"}}
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)
}

// target is the i-th query of a panel (refId A, B, ...).
func target(i int, t query) cog.Builder[variants.Dataquery] {
	return prometheus.NewDataqueryBuilder().RefId(string(rune('A' + i))).
		Datasource(source).Expr(t.expr).LegendFormat(t.legend).Range()
}
