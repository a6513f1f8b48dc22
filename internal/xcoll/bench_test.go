package xcoll

import (
	"fmt"
	"sync"
	"testing"

	"github.com/weft-mpi/weft/internal/coll"
)

// BenchmarkLoop runs collectives of one rank per proc among procs joined by
// loop, which hands each message straight to its receiver's Net: what a
// collective costs in this package, without the network device. One op is one
// collective of every rank; allocs/op counts every proc's.
func BenchmarkLoop(b *testing.B) {
	one := make([]byte, 8)
	for _, procs := range []int{2, 4} {
		for _, c := range []struct {
			name string
			fn   func(c *Comm, rank int, buf []byte) error
		}{
			{"barrier", func(c *Comm, rank int, _ []byte) error { return c.Barrier(rank) }},
			{"bcast", func(c *Comm, rank int, buf []byte) error { return c.Bcast(rank, buf, 8, 0) }},
			{"allreduce", func(c *Comm, rank int, buf []byte) error {
				return c.Allreduce(rank, one, buf, 8, coll.Op{Fold: func(in, inout []byte) { inout[0] += in[0] }}, true)
			}},
		} {
			b.Run(fmt.Sprintf("procs=%d/%s", procs, c.name), func(b *testing.B) {
				procOf := make([]int, procs)
				for r := range procOf {
					procOf[r] = r
				}
				nets := mesh(procs, make(chan struct{}))
				comms := make([]*Comm, procs)
				for p := range comms {
					comms[p] = New(nets[p], 5, procOf, coll.NewJob(), 0)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for r := range procOf {
					wg.Go(func() {
						buf := make([]byte, 8)
						for range b.N {
							if err := c.fn(comms[r], r, buf); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkHost runs collectives of one rank per proc among 4 procs in host mode
// (their segment shared in this process): what the leaders' steps cost, without
// the network device. One op is one collective of every rank.
func BenchmarkHost(b *testing.B) {
	const procs = 4
	sum := coll.Op{Fold: func(in, inout []byte) { inout[0] += in[0] }}
	for _, c := range []struct {
		name string
		fn   func(c *Comm, rank int, send, recv []byte) error
	}{
		{"barrier", func(c *Comm, rank int, _, _ []byte) error { return c.Barrier(rank) }},
		{"bcast", func(c *Comm, rank int, _, recv []byte) error { return c.Bcast(rank, recv[:8], 8, 0) }},
		{"allreduce", func(c *Comm, rank int, send, recv []byte) error {
			return c.Allreduce(rank, send[:8], recv[:8], 8, sum, true)
		}},
		{"reduce", func(c *Comm, rank int, send, recv []byte) error {
			return c.Reduce(rank, send[:8], recv[:8], 8, sum, true, 0)
		}},
		{"scan", func(c *Comm, rank int, send, recv []byte) error {
			return c.Scan(rank, &coll.Part{Send: send[:8], Recv: recv[:8]}, 8, sum)
		}},
		{"exscan", func(c *Comm, rank int, send, recv []byte) error {
			return c.Exscan(rank, &coll.Part{Send: send[:8], Recv: recv[:8]}, 8, sum)
		}},
		{"scatter", func(c *Comm, rank int, send, recv []byte) error {
			return c.Scatter(rank, &coll.Part{Send: send, Recv: recv[:8], SendBlock: 8}, 8, 0)
		}},
		{"alltoall", func(c *Comm, rank int, send, recv []byte) error {
			return c.Alltoall(rank, &coll.Part{Send: send, Recv: recv, SendBlock: 8, RecvBlock: 8}, 8)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			procOf := make([]int, procs)
			for r := range procOf {
				procOf[r] = r
			}
			_, comms := hostComms(procOf, make(chan struct{}))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for r := range procOf {
				wg.Go(func() {
					send, recv := make([]byte, 8*procs), make([]byte, 8*procs)
					for range b.N {
						if err := c.fn(comms[r], r, send, recv); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
