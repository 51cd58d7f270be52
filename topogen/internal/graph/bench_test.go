package graph_test

import (
	"bytes"
	"os"
	"regexp"
	"runtime"
	"testing"

	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// benchPipeline measures what `topogen render` does with a dump: parse,
// build the graph, render topology.conf. It reports time and allocations
// per run, the live heap right after one run (all of it still referenced
// then, so the most the run needs), and the time per 1,000 CAs of the dump.
//
// Before it measures, it checks the fabric: one fabric, no skipped line,
// no fabric-split warning, and the levels the caller says the fabric has.
// A benchmark of a fabric topogen refuses, or renders as a pile of
// one-leaf pieces, would measure nothing real.
func benchPipeline(b *testing.B, dump []byte, tiers int, opt graph.Options) {
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
	levels := 0
	for _, s := range g.Fabrics[0].Switches {
		levels = max(levels, s.Level+1)
	}
	if len(g.Fabrics) != 1 || levels != tiers {
		b.Fatalf("%d fabrics, %d levels: want 1 fabric of %d tiers", len(g.Fabrics), levels, tiers)
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
	if len(out) == 0 {
		b.Fatal("nothing rendered")
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fab, _ = ib.Parse(bytes.NewReader(dump))
	g, _ = graph.Build(fab, opt)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(g)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MiB")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000/(float64(cas)/1000), "ms/1000CAs")
}

// BenchmarkExample is the largest real fabric: NVIDIA's DGX H100 dump
// (122 hosts, 582 CAs, 40 switches, 2 tiers), one rail.
func BenchmarkExample(b *testing.B) {
	dump, err := os.ReadFile(ibData + "example.out")
	if err != nil {
		b.Fatal(err)
	}
	benchPipeline(b, dump, 2, graph.Options{IncludeHCA: regexp.MustCompile(`(HCA-1|mlx5_0)$`)})
}

// big10k is a valid 10,000-node, 8-rail, 3-tier rail-optimised fabric:
// 313 leaves of 32 hosts per rail (48 ports: 32 hosts, 16 spines), 10
// pods of 32 leaves, 16 spines per pod and rail (36 ports), 16 core
// groups of 4 cores (80 ports: one per pod and rail, a 128-port
// QM9790); 80,000 CAs, 3,848 switches.
var big10k = fabricgen.Spec{Nodes: 10000, Rails: 8, NodesPerLeaf: 32, PodLeaves: 32, SpinesPerPod: 16, CoresPerGroup: 4, Radix: 128, Seed: 10000}

func bigDump(b *testing.B) []byte {
	var buf bytes.Buffer
	if err := fabricgen.Write(&buf, big10k); err != nil {
		b.Fatal(err)
	}
	b.Logf("dump: %d MiB", buf.Len()>>20)
	return buf.Bytes()
}

// BenchmarkGenerated10k3Tier selects rail 0 with a filter.
func BenchmarkGenerated10k3Tier(b *testing.B) {
	benchPipeline(b, bigDump(b), 3, graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)})
}

// BenchmarkGenerated10k3TierAllRails keeps every rail: each host is on 8
// leaves, and the rails are found from the cabling.
func BenchmarkGenerated10k3TierAllRails(b *testing.B) {
	benchPipeline(b, bigDump(b), 3, graph.Options{})
}
