package fgmpi

import (
	"fmt"
	"io"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// pools are a rank's buffers: messages leave from a random slot of src and
// arrive in a random slot of dst, so that, as in FG-MPI's measurement, the
// figure is the messaging cost without the help of a warm cache, and the
// plain copy it is set against moves between slots picked the same way.
type pools struct {
	src, dst []byte
	size     int
	slots    uint64
	rng      uint64 // state of a 64-bit LCG (Knuth's MMIX constants), as in the twin
}

func newPools(size, pool, seed int) *pools {
	slots := max(2, pool/size)
	p := &pools{src: make([]byte, slots*size), dst: make([]byte, slots*size), size: size,
		slots: uint64(slots), rng: uint64(seed)}
	// Touch every page now, not in the timed loops.
	for i := range p.src {
		p.src[i], p.dst[i] = 1, 1
	}
	return p
}

// pick returns a random slot of buf.
func (p *pools) pick(buf []byte) []byte {
	p.rng = p.rng*6364136223846793005 + 1442695040888963407
	at := int((p.rng>>33)%p.slots) * p.size
	return buf[at : at+p.size : at+p.size]
}

// stamp marks message i at its first, middle and last byte.
func stamp(b []byte, i int) {
	b[0], b[len(b)/2], b[len(b)-1] = byte(i), byte(i), byte(i)
}

// checkStamp verifies that b holds message i, n bytes long.
func checkStamp(c *mpi.Comm, what string, b []byte, n, i int) error {
	if n != len(b) || b[0] != byte(i) || b[len(b)/2] != byte(i) || b[len(b)-1] != byte(i) {
		return fmt.Errorf("fgmpi: rank %d: %s %d: %d bytes stamped %d %d %d, want %d bytes stamped %d",
			c.Rank(), what, i, n, b[0], b[len(b)/2], b[len(b)-1], len(b), byte(i))
	}
	return nil
}

// collocated is FG-MPI's collocated messaging cost (section III-B): the
// one-way time of a ping-pong between the two ranks of one proc, the time of
// a plain copy() of the same size between the same kind of buffers, and the
// difference, which is what the runtime adds to the one copy it must make.
func collocated(c *mpi.Comm, cf config, out io.Writer) error {
	p := newPools(cf.size, cf.pool, c.Rank()+1)
	peer := 1 - c.Rank()
	pingpong := func(n int) error {
		for i := range n {
			if c.Rank() == 0 {
				s := p.pick(p.src)
				stamp(s, i)
				if err := mpi.Send(c, s, peer, 0); err != nil {
					return err
				}
			}
			d := p.pick(p.dst)
			st, err := mpi.Recv(c, d, peer, 0)
			if err != nil {
				return err
			}
			if err := checkStamp(c, "message", d, mpi.GetCount[byte](st), i); err != nil {
				return err
			}
			if c.Rank() == 1 {
				s := p.pick(p.src)
				stamp(s, i)
				if err := mpi.Send(c, s, peer, 0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// Rank 0 copies alone, rank 1 waiting in the barriers, as many times
	// as messages went one way.
	copies := func(n int) error {
		if c.Rank() != 0 {
			return nil
		}
		for i := range n {
			s := p.pick(p.src)
			stamp(s, i)
			d := p.pick(p.dst)
			if err := checkStamp(c, "copy", d, copy(d, s), i); err != nil {
				return err
			}
		}
		return nil
	}
	warm := max(cf.iters/10, 1)
	msg, err := timed(c, pingpong, warm, cf.iters)
	if err != nil {
		return err
	}
	cp, err := timed(c, copies, 2*warm, 2*cf.iters)
	if err != nil || c.Rank() != 0 {
		return err
	}
	perMsg, perCopy := msg/float64(2*cf.iters)*1e6, cp/float64(2*cf.iters)*1e6
	row := []string{"size", itoa(cf.size)}
	bench.Report(out, "collocated", "message", perMsg, "us", row...)
	bench.Report(out, "collocated", "copy", perCopy, "us", row...)
	bench.Report(out, "collocated", "overhead", perMsg-perCopy, "us", row...)
	return nil
}

// timed runs loop(warm) untimed, then loop(n) between two barriers, and
// returns the seconds this rank spent in loop(n).
func timed(c *mpi.Comm, loop func(n int) error, warm, n int) (float64, error) {
	if err := loop(warm); err != nil {
		return 0, err
	}
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	start := mpi.Wtime()
	if err := loop(n); err != nil {
		return 0, err
	}
	took := mpi.Wtime() - start
	return took, c.Barrier()
}
