package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// Collectives and communicator making across procs: the "collsuite" helper runs
// every check on the world communicator of a job of several procs, and again on
// a communicator whose procs' ranks are not consecutive (the fallback of the
// reductions), then on communicators made by Dup and Split across procs.

func init() {
	helpers["collsuite"] = collSuite
	helpers["colldie"] = func(c *mpi.Comm) error {
		// The last rank's proc exits while the others wait in a collective.
		if c.Rank() == c.Size()-1 {
			os.Exit(3)
		}
		return mpi.Allreduce(c, []int64{1}, make([]int64, 1), mpi.Sum)
	}
}

// xcollSizes are the vector lengths the collectives are checked with.
var xcollSizes = []int{0, 1, 1000, 1 << 20}

func collSuite(c *mpi.Comm) error {
	// mixed has the world's ranks, even ones first: with several ranks per proc,
	// each proc's ranks are not consecutive in it.
	mixed, err := c.Split(0, (c.Rank()%2)*c.Size()+c.Rank())
	if err != nil {
		return fmt.Errorf("split mixed: %w", err)
	}
	checks := []struct {
		name string
		fn   func(*mpi.Comm) error
	}{
		{"barrier", checkBarrier},
		{"bcast", checkBcast},
		{"reduce", checkReduce},
		{"allgather", checkAllgather},
		{"mismatch", checkMismatch},
		{"dup", checkDup},
		{"split", checkSplit},
	}
	for _, comm := range []*mpi.Comm{c, mixed} {
		for _, ch := range checks {
			if err := ch.fn(comm); err != nil {
				return fmt.Errorf("%v: %s: %w", comm, ch.name, err)
			}
		}
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	fmt.Printf("rank %d of %d: suite passed\n", c.Rank(), c.Size())
	return nil
}

// checkBarrier: no rank leaves a Barrier before the last one has entered it (the
// last rank enters late; the ranks left the Barrier before within far less than
// half of that), and Barriers in a row match up.
func checkBarrier(c *mpi.Comm) error {
	const late = 200 * time.Millisecond
	if err := c.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	if c.Rank() == c.Size()-1 {
		time.Sleep(late)
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	if el := time.Since(start); el < late/2 {
		return fmt.Errorf("left the Barrier after %v, before the last rank entered it", el)
	}
	for range 5 {
		if err := c.Barrier(); err != nil {
			return err
		}
	}
	return nil
}

// checkBcast: every size from the last rank (not a leader when procs hold
// several ranks), the small ones from every root.
func checkBcast(c *mpi.Comm) error {
	n := c.Size()
	for _, size := range xcollSizes {
		roots := []int{n - 1}
		if size <= 1000 {
			roots = []int{0, 1 % n, n - 1}
		}
		for _, root := range roots {
			buf := make([]int32, size)
			if c.Rank() == root {
				for i := range buf {
					buf[i] = int32(i*7 + root)
				}
			}
			if err := mpi.Bcast(c, buf, root); err != nil {
				return err
			}
			for i, v := range buf {
				if v != int32(i*7+root) {
					return fmt.Errorf("Bcast of %d from %d: element %d is %d", size, root, i, v)
				}
			}
		}
	}
	return nil
}

// affine composes affine maps x -> a*x + b held as (a, b) pairs: inout = in ∘ inout.
// It is associative but not commutative, so the result shows the order of the ranks.
var affine = mpi.NewOp(compose, false)

func compose(in, inout []int64) {
	for i := 0; i+1 < len(in); i += 2 {
		a1, b1, a2, b2 := in[i], in[i+1], inout[i], inout[i+1]
		inout[i], inout[i+1] = a1*a2, a1*b2+b1
	}
}

// contribution is rank r's vector of size pairs for the affine op.
func contribution(r, size int) []int64 {
	v := make([]int64, 2*size)
	for i := range size {
		v[2*i], v[2*i+1] = int64(r+2+i%5), int64(r*3+1+i%7)
	}
	return v
}

// checkReduce: Reduce to a non-leader root and Allreduce, with Sum and with the
// non-commutative affine op, against the fold in rank order; in place too.
func checkReduce(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for _, size := range []int{0, 1, 1000, 40000} { // pairs: the last crosses the 16 KiB pieces of the local reduction
		want := contribution(n-1, size)
		for r := n - 2; r >= 0; r-- {
			compose(contribution(r, size), want)
		}
		root := n - 1
		got := make([]int64, 2*size)
		if err := mpi.Reduce(c, contribution(me, size), got, affine, root); err != nil {
			return err
		}
		if me == root && !slices.Equal(got, want) {
			return fmt.Errorf("Reduce(affine) of %d pairs to %d: wrong result", size, root)
		}
		all := contribution(me, size) // in place
		if err := mpi.Allreduce(c, nil, all, affine); err != nil {
			return err
		}
		if !slices.Equal(all, want) {
			return fmt.Errorf("Allreduce(affine) of %d pairs: wrong result", size)
		}
	}
	for _, size := range xcollSizes {
		sum := make([]int32, size)
		for i := range sum {
			sum[i] = int32(me + i)
		}
		if err := mpi.Allreduce(c, nil, sum, mpi.Sum); err != nil {
			return err
		}
		for i, v := range sum {
			if v != int32(n*(n-1)/2+n*i) {
				return fmt.Errorf("Allreduce(Sum) of %d: element %d is %d", size, i, v)
			}
		}
	}
	return nil
}

// checkAllgather: Allgather (and in place) and Gather to the last rank.
func checkAllgather(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for _, size := range []int{0, 1, 1000, 100 << 10} {
		mine := make([]int16, size)
		for i := range mine {
			mine[i] = int16(me*1000 + i)
		}
		check := func(what string, got []int16) error {
			for r := range n {
				for i := range size {
					if v := got[r*size+i]; v != int16(r*1000+i) {
						return fmt.Errorf("%s of %d: rank %d's element %d is %d", what, size, r, i, v)
					}
				}
			}
			return nil
		}
		got := make([]int16, n*size)
		if err := mpi.Allgather(c, mine, got); err != nil {
			return err
		}
		if err := check("Allgather", got); err != nil {
			return err
		}
		inPlace := make([]int16, n*size)
		copy(inPlace[me*size:], mine)
		if err := mpi.Allgather(c, nil, inPlace); err != nil {
			return err
		}
		if err := check("Allgather in place", inPlace); err != nil {
			return err
		}
		var at []int16
		if me == n-1 {
			at = make([]int16, n*size)
		}
		if err := mpi.Gather(c, mine, at, n-1); err != nil {
			return err
		}
		if me == n-1 {
			if err := check("Gather", at); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMismatch: lengths that disagree across procs are errors, not hangs, and
// the communicator goes on working after them.
func checkMismatch(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	size := 10
	if me == n-1 {
		size = 11
	}
	// A reduction tells every rank.
	err := mpi.Allreduce(c, make([]int32, size), make([]int32, size), mpi.Sum)
	if !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("Allreduce with rank %d's length differing: %v, want ErrCount", n-1, err)
	}
	// A broadcast tells the ranks that received too little or too much.
	err = mpi.Bcast(c, make([]int32, size), 0)
	switch {
	case me == n-1 && !errors.Is(err, mpi.ErrCount):
		return fmt.Errorf("Bcast into a longer buffer than the root's: %v, want ErrCount", err)
	case err != nil && !errors.Is(err, mpi.ErrCount):
		return fmt.Errorf("Bcast with rank %d's length differing: %v", n-1, err)
	}
	return c.Barrier()
}

// checkDup: a duplicate has the same ranks, its messages never match the
// original's, and its collectives work.
func checkDup(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	d, err := c.Dup()
	if err != nil {
		return err
	}
	if d.Size() != n || d.Rank() != me {
		return fmt.Errorf("Dup: rank %d of %d, want %d of %d", d.Rank(), d.Size(), me, n)
	}
	if err := checkApart(c, d); err != nil {
		return err
	}
	dd, err := d.Dup()
	if err != nil {
		return err
	}
	return checkReduce(dd)
}

// checkApart: a message sent on d is seen on d and not on c.
func checkApart(c, d *mpi.Comm) error {
	me, n := d.Rank(), d.Size()
	if err := mpi.Send(d, []int32{int32(me)}, (me+1)%n, 9); err != nil {
		return err
	}
	left := (me + n - 1) % n
	if _, err := mpi.Probe(d, left, 9); err != nil {
		return err
	}
	if _, ok, err := mpi.Iprobe(c, mpi.AnySource, 9); err != nil || ok {
		return fmt.Errorf("a message on %v is seen on %v (%v)", d, c, err)
	}
	got := make([]int32, 1)
	if _, err := mpi.Recv(d, got, left, 9); err != nil {
		return err
	}
	if got[0] != int32(left) {
		return fmt.Errorf("got %d from %d", got[0], left)
	}
	return d.Barrier()
}

// checkSplit: Split by parity with reversed keys, SplitType by proc and host,
// and Create of the even ranks, each checked with messages and collectives.
func checkSplit(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	s, err := c.Split(me%2, -me)
	if err != nil {
		return err
	}
	var same []int // c's ranks of s, in s's order
	for r := n - 1; r >= 0; r-- {
		if r%2 == me%2 {
			same = append(same, r)
		}
	}
	if s.Size() != len(same) || same[s.Rank()] != me {
		return fmt.Errorf("Split: rank %d of %d, want rank %d of %d", s.Rank(), s.Size(), slices.Index(same, me), len(same))
	}
	if s.Size() > 1 {
		if err := checkApart(c, s); err != nil {
			return err
		}
	}
	ranks := make([]int32, s.Size())
	if err := mpi.Allgather(s, []int32{int32(me)}, ranks); err != nil {
		return err
	}
	for i, r := range ranks {
		if int(r) != same[i] {
			return fmt.Errorf("Allgather on the split: %v, want %v", ranks, same)
		}
	}
	if err := checkReduce(s); err != nil {
		return fmt.Errorf("on the split: %w", err)
	}
	for _, kind := range []int{mpi.SplitProc, mpi.SplitShared} {
		t, err := c.SplitType(kind, 0)
		if err != nil {
			return err
		}
		sum := []int64{int64(me)}
		if err := mpi.Allreduce(t, nil, sum, mpi.Sum); err != nil {
			return err
		}
		if t.Size() < 1 || t.Size() > n || (kind == mpi.SplitShared && t.Size() != n) {
			return fmt.Errorf("SplitType(%d): %d ranks of %d", kind, t.Size(), n)
		}
	}
	g, err := c.Group()
	if err != nil {
		return err
	}
	var even []int
	for r := 0; r < n; r += 2 {
		even = append(even, r)
	}
	eg, err := g.Incl(even...)
	if err != nil {
		return err
	}
	e, err := c.Create(eg)
	switch {
	case err != nil:
		return err
	case (e != nil) != (me%2 == 0):
		return fmt.Errorf("Create of the even ranks: %v on rank %d", e, me)
	case e != nil:
		return e.Barrier()
	}
	return nil
}

// TestWeftRunColl runs the collective suite as jobs of weft run: 2x1, 3x2, 3+2
// and 2+2+2+1 ranks.
func TestWeftRunColl(t *testing.T) {
	weftRunSuite(t, "collsuite", []struct{ ranks, perProc int }{{2, 1}, {6, 2}, {5, 3}, {7, 2}})
}

// TestMultiProcColl runs the collective suite under MPICH's mpiexec.
func TestMultiProcColl(t *testing.T) {
	code, out, errOut := runCommand(t, hydra(t, 3), "collsuite", []string{"WEFT_PER_PROC=2"})
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	checkSuite(t, 6, out, errOut)
}

// TestWeftRunCollDeath: a proc that dies while the others wait in a collective
// across procs ends the job; nobody waits for it.
func TestWeftRunCollDeath(t *testing.T) { weftRunDeath(t, "colldie") }
