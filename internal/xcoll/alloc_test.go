//go:build !race

package xcoll

import (
	"runtime"
	"sync"
	"testing"

	"github.com/weft-mpi/weft/internal/coll"
)

// TestHostSmallNoAllocs: in host mode the leaders' small Reduce, Allreduce,
// Alltoall and Barrier allocate nothing per call: their buffers are the host's
// scratch and parts, kept from call to call (each allocation was a tenth of a
// 1x4 Reduce's instructions), and the results are still right. In the Reduce,
// ranks 0 and 1 share a proc, so its root (rank 0) leads a proc of two ranks and
// waits for the outcome it published itself (await), which the leader of a proc
// of one rank does not. (The others keep one rank a proc: with two, the local
// steps of a Barrier, Allreduce or Alltoall park, and their channels count.)
func TestHostSmallNoAllocs(t *testing.T) {
	const procs, calls = 4, 2000
	sum := coll.Op{Fold: func(in, inout []byte) { inout[0] += in[0] }}
	oneEach := []int{0, 1, 2, 3}
	cases := []struct {
		name   string
		procOf []int
		fn     func(c *Comm, rank int, send, recv []byte) error
		want   func(rank int, recv []byte) bool
	}{
		{"barrier", oneEach, func(c *Comm, rank int, _, _ []byte) error { return c.Barrier(rank) }, nil},
		{"allreduce", oneEach, func(c *Comm, rank int, send, recv []byte) error {
			return c.Allreduce(rank, send[:8], recv[:8], 8, sum, true)
		}, func(_ int, recv []byte) bool { return recv[0] == 0+1+2+3 }},
		{"reduce", []int{0, 0, 1, 2}, func(c *Comm, rank int, send, recv []byte) error {
			return c.Reduce(rank, send[:8], recv[:8], 8, sum, true, 0)
		}, func(rank int, recv []byte) bool { return rank != 0 || recv[0] == 0+1+2+3 }},
		{"alltoall", oneEach, func(c *Comm, rank int, send, recv []byte) error {
			return c.Alltoall(rank, &coll.Part{Send: send, Recv: recv, SendBlock: 8, RecvBlock: 8}, 8)
		}, func(rank int, recv []byte) bool {
			for p := range procs {
				if recv[8*p] != byte(p) {
					return false
				}
			}
			return true
		}},
	}
	for _, c := range cases {
		_, comms := hostComms(c.procOf, make(chan struct{}))
		run := func(n int) {
			var wg sync.WaitGroup
			for r := range procs {
				wg.Go(func() {
					send, recv := make([]byte, 8*procs), make([]byte, 8*procs)
					for i := range send {
						send[i] = byte(r)
					}
					for i := range n {
						clear(recv)
						if err := c.fn(comms[c.procOf[r]], r, send, recv); err != nil {
							t.Errorf("%s %d, rank %d: %v", c.name, i, r, err)
							return
						}
						if c.want != nil && !c.want(r, recv) {
							t.Errorf("%s %d, rank %d: received %v", c.name, i, r, recv)
							return
						}
					}
				})
			}
			wg.Wait()
		}
		run(10) // the scratch buffers, and a first call's set-up
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		run(calls)
		runtime.ReadMemStats(&after)
		// The goroutines and buffers of run itself: a few dozen.
		if n := after.Mallocs - before.Mallocs; n > 64 {
			t.Errorf("%s: %d allocations for %d calls of %d procs", c.name, n, calls, procs)
		}
	}
}
