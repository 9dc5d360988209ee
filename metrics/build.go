package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewBuildInfo returns the gauge hongbao_build_info{version, revision,
// goversion}, always 1: which build a process runs, to join onto its other
// series or to see a rollout's progress. serve and hongbao settle register
// it with what runtime/debug.ReadBuildInfo says of the binary (hongbao
// version prints the same); an embedder passes its own build's.
func NewBuildInfo(version, revision, goVersion string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hongbao_build_info",
		Help: "Always 1; its labels name the build of hongbao this process runs: the module version, the VCS revision it was built from, the Go version.",
		ConstLabels: prometheus.Labels{
			"version": version, "revision": revision, "goversion": goVersion,
		},
	})
	g.Set(1)
	return g
}
