package telemetry

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo is the paddock_build_info gauge (always 1) whose labels name the
// running build: version (the version given, else the module version Go
// recorded, "(devel)" for a build from a clone), revision (the VCS commit,
// "unknown" without one) and goversion.
func BuildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "paddock_build_info",
		Help:        "Always 1; the labels name this build's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
