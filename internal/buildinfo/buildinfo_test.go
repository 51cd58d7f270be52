package buildinfo

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	gov := runtime.Version()
	for name, tc := range map[string]struct {
		ldVersion, ldRevision string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		"stamped by the Makefile": {"v0.3.0-4-g1a2b3c4-dirty", rev, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			Info{"v0.3.0-4-g1a2b3c4-dirty", rev, gov}},
		"stamped version, revision from vcs": {"v0.3.0", "", &debug.BuildInfo{Settings: vcs(rev, "false")},
			Info{"v0.3.0", rev, gov}},
		"go build in a checkout": {"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")},
			Info{"1a2b3c4d5e6f", rev, gov}},
		"go build of a modified checkout": {"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")},
			Info{"1a2b3c4d5e6f-dirty", rev, gov}},
		"go install module@version": {"", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}},
			Info{"v0.3.0", Unknown, gov}},
		"nothing known (-buildvcs=false)": {"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			Info{Unknown, Unknown, gov}},
		"no build information": {"", "", nil, Info{Unknown, Unknown, gov}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolve(tc.ldVersion, tc.ldRevision, tc.bi)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The linker's stamps win over what the toolchain recorded.
func TestGetStamped(t *testing.T) {
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "v9.9.9", "abc"
	if got := Get(); got.Version != "v9.9.9" || got.Revision != "abc" || got.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v", got)
	}
	if Version() != "v9.9.9" {
		t.Errorf("Version() = %q", Version())
	}
}

func TestVersionFlag(t *testing.T) {
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "v1.2.3", "deadbeef"
	var out bytes.Buffer
	app := &cli.App{Name: "reclaimd", Version: Version(), Writer: &out, Action: func(*cli.Context) error { return nil }}
	if err := app.Run([]string{"reclaimd", "--version"}); err != nil {
		t.Fatal(err)
	}
	if want := "reclaimd version v1.2.3 (revision deadbeef, " + runtime.Version() + ")\n"; out.String() != want {
		t.Errorf("--version printed %q, want %q", out.String(), want)
	}
}

// One strata_build_info, with the four labels, next to the Go and process
// collectors.
func TestRegister(t *testing.T) {
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "v1.2.3", "deadbeef"
	reg := prometheus.NewRegistry()
	Register(reg, "reclaimd")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
		if mf.GetName() != "strata_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("strata_build_info: %v, want one series of value 1", mf)
		}
		labels := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := map[string]string{"part": "reclaimd", "version": "v1.2.3", "revision": "deadbeef", "goversion": runtime.Version()}
		if diff := cmp.Diff(want, labels); diff != "" {
			t.Errorf("strata_build_info labels (-want +got):\n%s", diff)
		}
	}
	if !have["strata_build_info"] {
		t.Errorf("strata_build_info not registered")
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_start_time_seconds"} {
		if !have[name] && (name != "process_start_time_seconds" || runtime.GOOS == "linux") {
			t.Errorf("%s not registered", name)
		}
	}
}
