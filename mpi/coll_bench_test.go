package mpi_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// collBench runs b.N rounds of step on n ranks; one op is one collective of all the
// ranks (timed from the first round to the last rank's end), reported also in µs.
func collBench(b *testing.B, n int, step func(c *mpi.Comm) error) {
	b.Helper()
	var start atomic.Int64
	rounds := b.N
	b.ResetTimer()
	err := mpi.Run(n, func(c *mpi.Comm) error {
		if err := c.Barrier(); err != nil { // every rank is running before the clock starts
			return err
		}
		if c.Rank() == 0 {
			start.Store(time.Now().UnixNano())
		}
		for range rounds {
			if err := step(c); err != nil {
				return err
			}
		}
		return nil
	})
	elapsed := time.Duration(time.Now().UnixNano() - start.Load())
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	per := float64(elapsed.Nanoseconds()) / float64(rounds)
	b.ReportMetric(per, "ns/op")
	b.ReportMetric(per/1e3, "us/op")
}

func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 4096, 16384, 65536} { // 16,384 and 65,536 on 2 processors: groups that wake in chains (internal/coll, chainMin)
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			collBench(b, n, func(c *mpi.Comm) error { return c.Barrier() })
		})
	}
}

func BenchmarkBcast(b *testing.B) {
	for _, n := range []int{4, 16} {
		for _, size := range []int{1, 8192} {
			b.Run(fmt.Sprintf("ranks=%d/doubles=%d", n, size), func(b *testing.B) {
				bufs := make([][]float64, n)
				for i := range bufs {
					bufs[i] = bench.Buffer[float64](size)
				}
				collBench(b, n, func(c *mpi.Comm) error { return mpi.Bcast(c, bufs[c.Rank()], 0) })
			})
		}
	}
}

// BenchmarkReduce is TMPI Fig. 13's Reduce of one double: root 0 each time (same) or
// rank i mod n at the i-th call (rotate).
func BenchmarkReduce(b *testing.B) {
	for _, n := range []int{4, 16} {
		for _, rotate := range []bool{false, true} {
			b.Run(fmt.Sprintf("ranks=%d/rotate=%v", n, rotate), func(b *testing.B) {
				bufs := make([][2][]float64, n)
				for i := range bufs {
					one := bench.Buffer[float64](1)
					one[0] = 1
					bufs[i] = [2][]float64{one, bench.Buffer[float64](1)}
				}
				calls := make([]int, n)
				collBench(b, n, func(c *mpi.Comm) error {
					root := 0
					if rotate {
						root = calls[c.Rank()] % n
						calls[c.Rank()]++
					}
					bb := bufs[c.Rank()]
					return mpi.Reduce(c, bb[0], bb[1], mpi.Sum, root)
				})
			})
		}
	}
}

// BenchmarkIallreduce is BenchmarkAllreduce's one double through Iallreduce and
// Wait: the cost of the queue, its goroutine and the request over the blocking call.
func BenchmarkIallreduce(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("ranks=%d/doubles=1", n), func(b *testing.B) {
			bufs := make([][2][]float64, n)
			for i := range bufs {
				bufs[i] = [2][]float64{bench.Buffer[float64](1), bench.Buffer[float64](1)}
			}
			collBench(b, n, func(c *mpi.Comm) error {
				bb := bufs[c.Rank()]
				req, err := mpi.Iallreduce(c, bb[0], bb[1], mpi.Sum)
				if err != nil {
					return err
				}
				_, err = req.Wait()
				return err
			})
		})
	}
}

func BenchmarkAllreduce(b *testing.B) {
	for _, n := range []int{4, 16} {
		for _, size := range []int{1, 8192} {
			b.Run(fmt.Sprintf("ranks=%d/doubles=%d", n, size), func(b *testing.B) {
				bufs := make([][2][]float64, n)
				for i := range bufs {
					bufs[i] = [2][]float64{bench.Buffer[float64](size), bench.Buffer[float64](size)}
				}
				collBench(b, n, func(c *mpi.Comm) error {
					bb := bufs[c.Rank()]
					return mpi.Allreduce(c, bb[0], bb[1], mpi.Sum)
				})
			})
		}
	}
}

// BenchmarkSmallExchange is Gather, Scatter, Scan, Allgather and Allgatherv of
// one double a rank on 4 ranks (same root): the small exchanges.
func BenchmarkSmallExchange(b *testing.B) {
	const n = 4
	ones, offsets := [n]int{1, 1, 1, 1}, [n]int{0, 1, 2, 3}
	ops := []struct {
		name string
		call func(c *mpi.Comm, send, recv []float64) error
	}{
		{"gather", func(c *mpi.Comm, send, recv []float64) error { return mpi.Gather(c, send[:1], recv, 0) }},
		{"scatter", func(c *mpi.Comm, send, recv []float64) error { return mpi.Scatter(c, send, recv[:1], 0) }},
		{"scan", func(c *mpi.Comm, send, recv []float64) error { return mpi.Scan(c, send[:1], recv[:1], mpi.Sum) }},
		{"allgather", func(c *mpi.Comm, send, recv []float64) error { return mpi.Allgather(c, send[:1], recv) }},
		{"allgatherv", func(c *mpi.Comm, send, recv []float64) error {
			return mpi.Allgatherv(c, send[:1], recv, ones[:], offsets[:])
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			bufs := make([][2][]float64, n)
			for i := range bufs {
				bufs[i] = [2][]float64{bench.Buffer[float64](n), bench.Buffer[float64](n)}
			}
			collBench(b, n, func(c *mpi.Comm) error {
				bb := bufs[c.Rank()]
				return op.call(c, bb[0], bb[1])
			})
		})
	}
}
