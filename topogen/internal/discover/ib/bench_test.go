package ib_test

import (
	"bytes"
	"testing"

	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// BenchmarkParse10k parses the valid 10,000-host, 8-rail, 3-tier fabric
// the graph benchmarks render (80,000 CAs, 3,848 switches, a 32 MiB
// dump), with the numbering the graph builder takes from it: the
// parser's share of `topogen render` on a large fabric.
func BenchmarkParse10k(b *testing.B) {
	var buf bytes.Buffer
	if err := fabricgen.Write(&buf, fabricgen.Big10k); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f, err := ib.Parse(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Diagnostics) > 0 || len(f.ByType(ib.CA)) != 80000 {
			b.Fatalf("%d diagnostics, %d CAs: want none and 80000", len(f.Diagnostics), len(f.ByType(ib.CA)))
		}
	}
}
