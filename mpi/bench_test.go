package mpi_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/bench/p2p"
	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// pingpong runs b.N round trips of size bytes between two ranks; ns/op is one round trip.
func pingpong(b *testing.B, size int, opts ...mpi.Option) {
	b.SetBytes(int64(2 * size))
	err := mpi.Run(2, func(c *mpi.Comm) error {
		buf := bench.Buffer[byte](size)
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		return p2p.RoundTrips(c, buf, b.N)
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

// BenchmarkSendRecvSelf is an 8-byte Send and its Recv by one rank, to itself: the
// software of a ping-pong's one-way hand-off (the send, then the receive's taking of
// the message it found) with no wait and no cache line to move between cores, so
// that PingPong's time can be read as this plus the machine's hand-off
// (bench/limits BenchmarkSpinHandoff). Each message carries its index, which the
// receive checks.
func BenchmarkSendRecvSelf(b *testing.B) {
	err := mpi.Run(1, func(c *mpi.Comm) error {
		out, in := make([]int64, 1), make([]int64, 1)
		for i := range b.N {
			out[0] = int64(i)
			if err := mpi.Send(c, out, 0, 1); err != nil {
				return err
			}
			if _, err := mpi.Recv(c, in, 0, 1); err != nil {
				return err
			}
			if in[0] != int64(i) {
				return fmt.Errorf("message %d received as %d", i, in[0])
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWindow streams windows of 64 Isend (Irecv on the other side), each window
// completed by WaitallInto and the receiver's 4-byte acknowledgement, as OSU's osu_bw (so
// that the sender never runs more than a window ahead); ns/op is one message.
func BenchmarkWindow(b *testing.B) {
	for _, size := range []int{8, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const window = 64
			b.SetBytes(int64(size))
			err := mpi.Run(2, func(c *mpi.Comm) error {
				bufs := make([][]byte, window)
				for i := range bufs {
					bufs[i] = make([]byte, size)
				}
				reqs, sts := make([]*mpi.Request, window), make([]mpi.Status, window)
				ack := make([]byte, 4)
				if c.Rank() == 0 {
					b.ResetTimer()
				}
				for range b.N/window + 1 {
					for i, buf := range bufs {
						var err error
						if c.Rank() == 0 {
							reqs[i], err = mpi.Isend(c, buf, 1, 0)
						} else {
							reqs[i], err = mpi.Irecv(c, buf, 0, 0)
						}
						if err != nil {
							return err
						}
					}
					if err := mpi.WaitallInto(sts, reqs...); err != nil {
						return err
					}
					var err error
					if c.Rank() == 0 {
						_, err = mpi.Recv(c, ack, 1, 1)
					} else {
						err = mpi.Send(c, ack, 0, 1)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkMsgRate is Thakur and Gropp's message rate test, zero-byte messages with a
// reply every 256: pairs=K is K pairs of ranks (their KP-KP), threads=K is K pairs of
// goroutines of one pair of ranks, each goroutine pair on its own tag (KT-KT). ns/op
// is one message of all the pairs.
func BenchmarkMsgRate(b *testing.B) {
	for _, k := range []int{1, 4} {
		for _, threads := range []bool{false, true} {
			name := fmt.Sprintf("pairs=%d", k)
			if threads {
				name = fmt.Sprintf("threads=%d", k)
			}
			b.Run(name, func(b *testing.B) {
				ranks, pairs := 2*k, 1
				if threads {
					ranks, pairs = 2, k
				}
				n := b.N/k + 1
				b.ResetTimer()
				err := mpi.Run(ranks, func(c *mpi.Comm) error {
					var wg sync.WaitGroup
					errs := make([]error, pairs)
					for g := range pairs {
						wg.Go(func() {
							peer := (c.Rank() + ranks/2) % ranks
							errs[g] = ratePair(c, c.Rank() < ranks/2, peer, g, n)
						})
					}
					wg.Wait()
					return errors.Join(errs...)
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n*k)/b.Elapsed().Seconds()/1e6, "Mmsg/s")
			})
		}
	}
}

// ratePair sends n zero-byte messages with tag from sender to peer, which answers
// every 256th.
func ratePair(c *mpi.Comm, sender bool, peer, tag, n int) error {
	var none []byte
	for i := 1; i <= n; i++ {
		var err error
		if sender {
			err = mpi.Send(c, none, peer, tag)
			if err == nil && i%256 == 0 {
				_, err = mpi.Recv(c, none, peer, tag)
			}
		} else {
			_, err = mpi.Recv(c, none, peer, tag)
			if err == nil && i%256 == 0 {
				err = mpi.Send(c, none, peer, tag)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkUnexpected shows that a receive costs the same whether 0 or 10,000
// messages of other tags are queued ahead of it: ns/op is one send and its receive.
func BenchmarkUnexpected(b *testing.B) {
	for _, queued := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("%d", queued), func(b *testing.B) {
			err := mpi.Run(2, func(c *mpi.Comm) error {
				one := []int64{0}
				if c.Rank() == 0 {
					for tag := 1; tag <= queued; tag++ {
						if err := mpi.Send(c, one, 1, tag); err != nil {
							return err
						}
					}
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					var err error
					if c.Rank() == 0 {
						err = mpi.Send(c, one, 1, 0)
					} else {
						_, err = mpi.Recv(c, one, 0, 0)
					}
					if err != nil {
						return err
					}
				}
				if c.Rank() == 1 {
					for tag := 1; tag <= queued; tag++ {
						if _, err := mpi.Recv(c, one, 0, tag); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// ring passes one value around n ranks with Sendrecv.
func ring(c *mpi.Comm) error {
	rank, size := c.Rank(), c.Size()
	got := []int32{-1}
	if _, err := mpi.Sendrecv(c, []int32{int32(rank)}, (rank+1)%size, 0, got, (rank+size-1)%size, 0); err != nil {
		return err
	}
	if want := int32((rank + size - 1) % size); got[0] != want {
		return fmt.Errorf("rank %d got %d, want %d", rank, got[0], want)
	}
	return nil
}

// BenchmarkRing runs a ring exchange of up to a million ranks in one process (the
// million is not for CI: it needs a few GiB); ns/op is one whole job. Memory per
// rank is BenchmarkIdleRank's business.
func BenchmarkRing(b *testing.B) {
	for _, n := range []int{1000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := mpi.Run(n, ring); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mranks/s")
		})
	}
}

// BenchmarkIdleRank reports the memory an idle rank costs: n ranks each blocked in a
// receive (goroutine stack, endpoint, communicator handle, posted request).
func BenchmarkIdleRank(b *testing.B) {
	const n = 100_000
	for i := 0; i < b.N; i++ {
		var before, during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var blocked sync.WaitGroup
		blocked.Add(n - 1)
		err := mpi.Run(n, func(c *mpi.Comm) error {
			none := []byte{}
			if c.Rank() != 0 {
				blocked.Done()
				_, err := mpi.Recv(c, none, 0, 0)
				return err
			}
			blocked.Wait()
			time.Sleep(100 * time.Millisecond) // let the ranks that said so block
			runtime.GC()
			runtime.ReadMemStats(&during)
			for r := 1; r < c.Size(); r++ {
				if err := mpi.Send(c, none, r, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		used := (during.HeapAlloc + during.StackInuse) - (before.HeapAlloc + before.StackInuse)
		b.ReportMetric(float64(used)/n, "bytes/rank")
	}
}

// BenchmarkTokenRing16 passes a token around 16 ranks, 8 per core on this machine:
// ns/op is one hop. With more ranks than cores the adaptive spin must give way to
// parking, or the rank holding the token waits behind spinners.
func BenchmarkTokenRing16(b *testing.B) {
	for _, spin := range []time.Duration{mpi.DefaultSpin, 5 * time.Microsecond, time.Microsecond, 0} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			const n = 16
			laps := b.N/n + 1
			err := mpi.Run(n, func(c *mpi.Comm) error {
				token := []int64{0}
				next, prev := (c.Rank()+1)%n, (c.Rank()+n-1)%n
				for lap := 0; lap < laps; lap++ {
					if c.Rank() == 0 {
						if err := mpi.Send(c, token, next, 0); err != nil {
							return err
						}
					}
					if _, err := mpi.Recv(c, token, prev, 0); err != nil {
						return err
					}
					if c.Rank() != 0 {
						if err := mpi.Send(c, token, next, 0); err != nil {
							return err
						}
					}
				}
				return nil
			}, mpi.WithSpin(spin))
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
