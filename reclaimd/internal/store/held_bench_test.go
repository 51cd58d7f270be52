package store

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// BenchmarkSaveHeld is the cost of keeping the windows: a write of every
// one of 1,000 nodes' states (8 GPUs, two hours sampled every 10 s,
// written as the agents collector writes them; a controller writes every
// node at its first save, a tenth of them each cycle after), with the
// sample times on the interval exactly (steady, as BenchmarkCycleScale's
// agents take them) or off it by up to a millisecond each (jittered, as
// a real agent's clock reads them). It reports the bytes written and the
// CPU time (this process's, rusage) of the encoding and of the write.
func BenchmarkSaveHeld(b *testing.B) {
	for _, jitter := range []time.Duration{0, time.Millisecond} {
		name := "steady"
		if jitter > 0 {
			name = "jittered"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 29))
			base := time.Unix(1795983272, 0).UTC()
			windows := make([]*decide.Window, 8)
			for g := range windows {
				w := &decide.Window{}
				w.SetInterval(10 * time.Second)
				for i := range 720 {
					at := base.Add(time.Duration(i) * 10 * time.Second)
					if jitter > 0 {
						at = at.Add(time.Duration(rng.Int64N(int64(jitter))))
					}
					w.Add(decide.Sample{At: at, UtilPercent: float64(rng.IntN(3)), MemActivityPercent: 0, MemUsedMiB: 30000})
				}
				windows[g] = w
			}
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "held.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var buf []byte
			encode := func() map[string][]byte {
				out := make(map[string][]byte, 1000)
				buf = buf[:0]
				for n := range 1000 {
					start := len(buf)
					for _, w := range windows {
						buf = w.AppendBinary(buf)
					}
					out[fmt.Sprintf("gpu-%04d", n)] = buf[start:len(buf):len(buf)]
				}
				return out
			}
			states := encode()
			if err := s.SaveHeld(b.Context(), "bench", states, nil, true, base); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var enc, write time.Duration
			for i := range b.N {
				t0 := cpu(b)
				states = encode()
				t1 := cpu(b)
				if err := s.SaveHeld(b.Context(), "bench", states, nil, false, base.Add(time.Duration(i)*time.Second)); err != nil {
					b.Fatal(err)
				}
				enc, write = enc+t1-t0, write+cpu(b)-t1
			}
			bytes := 0
			for _, v := range states {
				bytes += len(v)
			}
			b.ReportMetric(float64(bytes)/1e6, "MB/save")
			b.ReportMetric(float64(enc.Microseconds())/1e3/float64(b.N), "encode-cpu-ms/save")
			b.ReportMetric(float64(write.Microseconds())/1e3/float64(b.N), "write-cpu-ms/save")
		})
	}
}

// cpu is the CPU time this process has used, user and system.
func cpu(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
