// Package buildinfo says which build of Strata is running: the version
// and revision the Makefile stamps into every binary with
//
//	-ldflags "-X github.com/strata-hpc/strata/internal/buildinfo.version=$(git describe --tags --always --dirty)
//	          -X github.com/strata-hpc/strata/internal/buildinfo.revision=$(git rev-parse HEAD)"
//
// or, for a plain `go build` or `go install`, what the Go toolchain
// recorded (the module version, vcs.revision). It serves `--version` on
// every binary and the strata_build_info gauge of every daemon, which it
// registers together with the Go and process collectors.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"
)

// Set by the linker (see the package comment); empty in a plain build.
var (
	version  string
	revision string
)

// Unknown stands for what no source told.
const Unknown = "unknown"

// Info describes the running binary.
type Info struct {
	Version   string // "v0.3.0-4-g1a2b3c4-dirty", a module version, or Unknown
	Revision  string // the full commit id, or Unknown
	GoVersion string // runtime.Version()
}

// Get returns the running binary's build: the linker's stamps first, then
// the Go toolchain's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(version, revision, bi)
}

// Version is Get().Version, for urfave/cli's App.Version.
func Version() string { return Get().Version }

func resolve(ldVersion, ldRevision string, bi *debug.BuildInfo) Info {
	info := Info{Version: ldVersion, Revision: ldRevision, GoVersion: runtime.Version()}
	if bi != nil {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if info.Revision == "" {
			info.Revision = rev
		}
		if info.Version == "" {
			switch v := bi.Main.Version; {
			case v != "" && v != "(devel)":
				info.Version = v // go install module@version; it carries its own +dirty
			case rev != "":
				info.Version = shortRev(rev)
				if dirty {
					info.Version += "-dirty"
				}
			}
		}
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Revision == "" {
		info.Revision = Unknown
	}
	return info
}

// shortRev abbreviates a commit id as git describe --always does.
func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is the one line --version prints, after the binary's name.
func (i Info) String() string {
	return fmt.Sprintf("version %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

func init() {
	// Every Strata binary prints the same --version line: "<name>
	// version <v> (revision <r>, <go version>)".
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, Get())
	}
}

// Collector is the strata_build_info gauge of one part ("reclaimd",
// "reclaimd-agent", "bridge"): always 1, the build in its labels.
func Collector(part string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_build_info",
		Help: "Always 1; the labels describe the build of the running binary.",
		ConstLabels: prometheus.Labels{
			"part": part, "version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// Register adds what every daemon's private registry serves beside its
// own metrics: strata_build_info for part, and the Go and process
// collectors.
func Register(reg prometheus.Registerer, part string) {
	reg.MustRegister(Collector(part), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
