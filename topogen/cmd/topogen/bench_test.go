package main

import (
	"bytes"
	"os"
	"regexp"
	"runtime"
	"testing"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// benchPipeline measures what `topogen render` does with a dump: parse,
// build the graph, render topology.conf. It reports time and allocations
// per run, and the live heap right after one run (the memory the run
// needs at its peak, as all of it is still referenced then).
func benchPipeline(b *testing.B, dump []byte, nodes int, opt graph.Options) {
	b.Helper()
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
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	fab, _ := ib.Parse(bytes.NewReader(dump))
	g, _ := graph.Build(fab, opt)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(g)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MiB")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000/(float64(nodes)/1000), "ms/1000nodes")
}

// BenchmarkExample is the largest real fabric: NVIDIA's DGX H100 dump
// (122 hosts, 582 CAs, 40 switches).
func BenchmarkExample(b *testing.B) {
	dump, err := os.ReadFile(ibData + "example.out")
	if err != nil {
		b.Fatal(err)
	}
	benchPipeline(b, dump, 122, graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)})
}

// The generated fabrics (10,000 nodes, 8 rails, valid radix) are measured
// in topogen/internal/graph/bench_test.go, which checks each is valid first.
