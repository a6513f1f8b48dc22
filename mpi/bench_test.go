package mpi_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// pingpong runs b.N round trips of size bytes between two ranks; ns/op is one round trip.
func pingpong(b *testing.B, size int, opts ...mpi.Option) {
	b.SetBytes(int64(2 * size))
	err := mpi.Run(2, func(c *mpi.Comm) error {
		buf := make([]byte, size)
		peer := 1 - c.Rank()
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			if c.Rank() == 0 {
				if err := mpi.Send(c, buf, peer, 0); err != nil {
					return err
				}
				if _, err := mpi.Recv(c, buf, peer, 0); err != nil {
					return err
				}
				continue
			}
			if _, err := mpi.Recv(c, buf, peer, 0); err != nil {
				return err
			}
			if err := mpi.Send(c, buf, peer, 0); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{0, 8, 1 << 10, 64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) { pingpong(b, size) })
	}
}

// BenchmarkPingPongPark measures the hand-off without spinning: every wait parks.
func BenchmarkPingPongPark(b *testing.B) { pingpong(b, 8, mpi.WithSpin(0)) }

// BenchmarkMessageRate4T sends zero-byte messages from 4 goroutines of rank 0 to 4 of
// rank 1 (Thakur and Gropp's 4T-4T), a reply every 256; ns/op is per message.
func BenchmarkMessageRate4T(b *testing.B) {
	const pairs = 4
	err := mpi.Run(2, func(c *mpi.Comm) error {
		var wg sync.WaitGroup
		errs := make([]error, pairs)
		n := b.N/pairs + 1
		for t := range pairs {
			wg.Go(func() {
				var none []byte
				peer := 1 - c.Rank()
				for i := 1; i <= n && errs[t] == nil; i++ {
					if c.Rank() == 0 {
						errs[t] = mpi.Send(c, none, peer, t)
						if i%256 == 0 && errs[t] == nil {
							_, errs[t] = mpi.Recv(c, none, peer, t)
						}
						continue
					}
					_, errs[t] = mpi.Recv(c, none, peer, t)
					if i%256 == 0 && errs[t] == nil {
						errs[t] = mpi.Send(c, none, peer, t)
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

var _ = runtime.NumCPU
