// Package limits measures what this machine allows, so that Weft's figures can be
// read against it: memory copy bandwidth, alone and as a collective's copies, and the
// cost of handing a value from one goroutine to another by spinning on a shared word
// or on lines that carry a message, and by a channel (which parks), and of giving
// every one of many goroutines a turn.
package limits

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkCopy is Go's copy() at message sizes; MB/s is the copy bandwidth.
func BenchmarkCopy(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			src, dst := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkAllgatherCopies makes the copies a 4-rank Allgather of block bytes must
// make (every rank's block into every rank's receive buffer: 16 copies), by one
// goroutine and by two that split the ranks, so that a data-moving collective's
// time in one proc can be read against the least its copies take here; MB/s counts
// the bytes copied. Buffers are filled, so that no copy reads the zero page.
func BenchmarkAllgatherCopies(b *testing.B) {
	const ranks = 4
	for _, block := range []int{64 << 10, 256 << 10, 1 << 20} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("block=%dKiB/goroutines=%d", block>>10, workers), func(b *testing.B) {
				send, recv := make([][]byte, ranks), make([][]byte, ranks)
				for r := range ranks {
					send[r], recv[r] = bytes.Repeat([]byte{byte(r + 1)}, block), bytes.Repeat([]byte{0xff}, ranks*block)
				}
				copies := func(w int) {
					for r := w; r < ranks; r += workers {
						for j := range ranks {
							copy(recv[r][j*block:(j+1)*block], send[j])
						}
					}
				}
				b.SetBytes(int64(ranks * ranks * block))
				for b.Loop() {
					var wg sync.WaitGroup
					for w := 1; w < workers; w++ {
						wg.Go(func() { copies(w) })
					}
					copies(0)
					wg.Wait()
				}
				for r := range ranks {
					for j := range ranks {
						if got := recv[r][j*block+block-1]; got != byte(j+1) {
							b.Fatalf("rank %d's block %d ends in %d, want %d", r, j, got, j+1)
						}
					}
				}
			})
		}
	}
}

// BenchmarkSpinHandoff is a round trip between two goroutines that spin on one
// shared word: two cache-line hand-offs between cores, the floor of any hand-off.
func BenchmarkSpinHandoff(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two processors")
	}
	var turn atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); i < int64(b.N); i++ {
			for turn.Load() != 2*i+1 {
			}
			turn.Store(2*i + 2)
		}
	}()
	for i := int64(0); i < int64(b.N); i++ {
		turn.Store(2*i + 1)
		for turn.Load() != 2*i+2 {
		}
	}
	<-done
}

// BenchmarkLineHandoff is a round trip of an 8-byte message between two goroutines,
// each writing a line of it (an envelope, the data, then a sequence word) and
// spinning on the sequence word of the line the other writes, as a mailbox's
// sender and receiver do. ring: each side writes into the other's ring of 64
// such lines, as Weft's mailbox lanes (and Open MPI's fastboxes) do, so every
// hand-off moves a line the receiver holds while it polls: the writer first takes
// it away, then the poller fetches it back. duplex: both directions take turns in
// one line, and each side writes the line it has just read, as the two sides of
// BenchmarkSpinHandoff do; the line then moves once per hand-off. ring is the
// floor of message passing where each direction has memory of its own; duplex
// what a line shared by a pair of ranks would allow (on this VM: as little as
// SpinHandoff while its vCPUs share no cache, no less than ring while they do,
// where the writer's several stores seem to lose the line to the poller between
// them). ring8 is ring with rings of 8 lines, spaced ring with its 64 lines 128
// bytes apart: while the vCPUs share a cache both took 100-122 ns against ring's
// 126-141 (a poller walking 64 adjacent lines seems to pull the next ones in,
// which the writer then takes back), and about as long as ring while they do not
// (2026-12-05; Weft's mailbox so laid out, with lanes of 8 or 16 slots or slots of
// 128 bytes, measured 1-7% slower in its 8-byte ping-pong: shorter lanes make the
// senders read the receiver's head more often; why the wider slots lost, we could
// not tell). On amd64 the publication is a plain store, a release store there, as
// Weft's is.
func BenchmarkLineHandoff(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two processors")
	}
	type line struct {
		seq   atomic.Uint64
		stamp uint64
		key   [2]uint64
		n     uint32
		data  [28]byte
	}
	send := func(l *line, seq, v uint64) {
		l.stamp, l.key, l.n = v, [2]uint64{1, 2}, 8
		binary.LittleEndian.PutUint64(l.data[:], v)
		publish(&l.seq, seq)
	}
	recv := func(l *line, seq uint64) uint64 {
		for l.seq.Load() != seq {
		}
		return binary.LittleEndian.Uint64(l.data[:])
	}
	type spaced struct {
		line
		_ [64]byte
	}
	for _, shape := range []string{"ring", "ring8", "spaced", "duplex"} {
		b.Run(shape, func(b *testing.B) {
			var there, back [64]line
			var far, farBack [64]spaced
			// Message i goes out in line out(i) with sequence word 2i+1 and comes
			// back in line in(i) with 2i+2.
			out, in := func(i uint64) *line { return &there[i%64] }, func(i uint64) *line { return &back[i%64] }
			switch shape {
			case "ring8":
				out, in = func(i uint64) *line { return &there[i%8] }, func(i uint64) *line { return &back[i%8] }
			case "spaced":
				out, in = func(i uint64) *line { return &far[i%64].line }, func(i uint64) *line { return &farBack[i%64].line }
			case "duplex":
				out, in = func(uint64) *line { return &there[0] }, func(uint64) *line { return &there[0] }
			}
			bad := make(chan uint64, 1)
			go func() {
				defer close(bad)
				for i := uint64(0); i < uint64(b.N); i++ {
					v := recv(out(i), 2*i+1)
					if v != i {
						bad <- v
						return
					}
					send(in(i), 2*i+2, v)
				}
			}()
			for i := uint64(0); i < uint64(b.N); i++ {
				send(out(i), 2*i+1, i)
				if v := recv(in(i), 2*i+2); v != i {
					b.Fatalf("round trip %d came back as %d", i, v)
				}
			}
			if v, ok := <-bad; ok {
				b.Fatalf("a message arrived as %d", v)
			}
		})
	}
}

// BenchmarkChanHandoff is a round trip through two unbuffered channels: each side
// parks until the other wakes it.
func BenchmarkChanHandoff(b *testing.B) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	for i := 0; i < b.N; i++ {
		ping <- i
		<-pong
	}
	close(ping)
}

// BenchmarkYieldRound is a round of many goroutines that each call runtime.Gosched
// once: ns/op is a round. A barrier of that many goroutine ranks in one proc costs
// at least this, since between two barriers every rank must stop and be resumed
// once, and a yield is the scheduler's cheapest way for a goroutine to stop and be
// resumed (parking on a channel and being woken costs more: BenchmarkChanHandoff).
func BenchmarkYieldRound(b *testing.B) {
	for _, n := range []int{256, 4096, 65536} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			var start, wg sync.WaitGroup
			start.Add(1)
			for range n {
				wg.Go(func() {
					start.Wait()
					for range b.N {
						runtime.Gosched()
					}
				})
			}
			b.ResetTimer()
			start.Done()
			wg.Wait()
		})
	}
}
