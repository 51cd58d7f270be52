package graph_test

import (
	"bytes"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// benchPipeline measures what `topogen render` does with a dump: parse,
// build the graph, render topology.conf. It reports time and allocations
// per run, the CPU time per run (user and system time of the process,
// the garbage collector's included: unlike the wall time, it hardly moves
// when other work shares the machine), and the time per 1,000 CAs of the
// dump. Peak memory is a matter of the whole process: see the README.
//
// Before it measures, it checks the fabric: as many fabrics as the caller
// says (one, or one per tiled copy), no skipped line, no fabric-split
// warning, and the levels the caller says each fabric has. A benchmark of
// a fabric topogen refuses, or renders as a pile of one-leaf pieces,
// would measure nothing real.
func benchPipeline(b *testing.B, dump []byte, fabrics, tiers int, opt graph.Options) {
	b.Helper()
	fab, err := ib.Parse(bytes.NewReader(dump))
	if err != nil {
		b.Fatal(err)
	}
	if len(fab.Diagnostics) > 0 {
		b.Fatalf("%d lines skipped, first: %+v", len(fab.Diagnostics), fab.Diagnostics[0])
	}
	g, err := graph.Build(fab, opt)
	if err != nil {
		b.Fatal(err)
	}
	if len(g.Fabrics) != fabrics {
		b.Fatalf("%d fabrics: want %d", len(g.Fabrics), fabrics)
	}
	for _, f := range g.Fabrics {
		levels := 0
		for _, s := range f.Switches {
			levels = max(levels, s.Level+1)
		}
		if levels != tiers {
			b.Fatalf("%s has %d levels: want %d", f.Name, levels, tiers)
		}
	}
	for _, f := range g.Findings {
		if f.Kind == "fabric-split" {
			b.Fatal(f)
		}
	}
	cas := len(fab.ByType(ib.CA))
	b.SetBytes(int64(len(dump)))
	b.ReportAllocs()
	var out []byte
	cpu0 := cpuTime()
	for b.Loop() {
		fab, err := ib.Parse(bytes.NewReader(dump))
		if err != nil {
			b.Fatal(err)
		}
		g, err := graph.Build(fab, opt)
		if err != nil {
			b.Fatal(err)
		}
		out = render.TreeConf(g, "bench")
	}
	cpu := cpuTime() - cpu0
	if len(out) == 0 {
		b.Fatal("nothing rendered")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000/(float64(cas)/1000), "ms/1000CAs")
}

// cpuTime is the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExample is the largest real fabric: NVIDIA's DGX H100 dump
// (122 hosts, 582 CAs, 40 switches, 2 tiers), one rail.
func BenchmarkExample(b *testing.B) {
	dump, err := os.ReadFile(ibData + "example.out")
	if err != nil {
		b.Fatal(err)
	}
	benchPipeline(b, dump, 1, 2, graph.Options{IncludeHCA: regexp.MustCompile(`(HCA-1|mlx5_0)$`)})
}

// tiledCopies is how many copies of the DGX H100 dump BenchmarkTiled
// renders: 10,476 CAs, about as many as a rail-optimised cluster of 1,300
// hosts has.
const tiledCopies = 18

// BenchmarkTiled renders 18 tiled copies of the DGX H100 dump (each with
// its own GUIDs and names: 18 fabrics of 2 tiers, 10,476 CAs, 720
// switches, a 5.3 MiB dump) with every HCA kept, as `topogen render`
// does by default: a real fabric's shape, its unnamed HCAs and missing
// cables included, at the size of a large cluster.
func BenchmarkTiled(b *testing.B) {
	dump, err := os.ReadFile(ibData + "example.out")
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := fabricgen.Tile(&buf, dump, tiledCopies); err != nil {
		b.Fatal(err)
	}
	benchPipeline(b, buf.Bytes(), tiledCopies, 2, graph.Options{})
}

// bigDump is fabricgen.Big10k: 10,000 hosts x 8 rails, 3 tiers, 80,000
// CAs, 3,848 switches.
func bigDump(b *testing.B) []byte {
	var buf bytes.Buffer
	if err := fabricgen.Write(&buf, fabricgen.Big10k); err != nil {
		b.Fatal(err)
	}
	b.Logf("dump: %d MiB", buf.Len()>>20)
	return buf.Bytes()
}

// BenchmarkGenerated10k3Tier selects rail 0 with a filter.
func BenchmarkGenerated10k3Tier(b *testing.B) {
	benchPipeline(b, bigDump(b), 1, 3, graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)})
}

// BenchmarkGenerated10k3TierAllRails keeps every rail: each host is on 8
// leaves, and the rails are found from the cabling.
func BenchmarkGenerated10k3TierAllRails(b *testing.B) {
	benchPipeline(b, bigDump(b), 1, 3, graph.Options{})
}
