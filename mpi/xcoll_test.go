package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/launch"
	"github.com/weft-mpi/weft/mpi"
)

// Collectives and communicator making across procs: the "collsuite" helper runs
// every check on the world communicator of a job of several procs, and again on
// a communicator whose procs' ranks are not consecutive (the fallback of the
// reductions), then on communicators made by Dup and Split across procs.

func init() {
	helpers["collsuite"] = collSuite
	helpers["collsuitehosts"] = func(c *mpi.Comm) error {
		manyHosts.Store(true) // by every rank of the proc
		return collSuite(c)
	}
	helpers["colldie"] = func(c *mpi.Comm) error {
		// The last rank's proc exits while the others wait in a collective.
		if c.Rank() == c.Size()-1 {
			os.Exit(3)
		}
		return mpi.Allreduce(c, []int64{1}, make([]int64, 1), mpi.Sum)
	}
	helpers["icolldie"] = func(c *mpi.Comm) error {
		// The last rank's proc exits while the others wait for an Iallreduce.
		if c.Rank() == c.Size()-1 {
			os.Exit(3)
		}
		req, err := mpi.Iallreduce(c, []int64{1}, make([]int64, 1), mpi.Sum)
		if err != nil {
			return err
		}
		_, err = req.Wait()
		return err
	}
}

// manyHosts says that the job of the collective suite spans several hosts, so
// that SplitType(SplitShared) splits it ("collsuitehosts").
var manyHosts atomic.Bool

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
		{"scatter", checkScatter},
		{"gatherv", checkGatherv},
		{"alltoall", checkAlltoall},
		{"scan", checkScan},
		{"nonblocking", checkNonblocking},
		{"reducescatter", checkReduceScatter},
		{"minloc", checkLocPairs},
		{"errors", checkCollErrors},
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
		if t.Size() < 1 || t.Size() > n || (kind == mpi.SplitShared && t.Size() != n && !manyHosts.Load()) {
			return fmt.Errorf("SplitType(%d): %d ranks of %d", kind, t.Size(), n)
		}
		// The communicators split off partition c: their first ranks' sizes add up.
		first := []int64{0}
		if t.Rank() == 0 {
			first[0] = int64(t.Size())
		}
		if err := mpi.Allreduce(c, nil, first, mpi.Sum); err != nil {
			return err
		}
		if first[0] != int64(n) {
			return fmt.Errorf("SplitType(%d): the parts hold %d ranks of %d", kind, first[0], n)
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

// TestWeftRunCollChannel runs the collective suite with host mode off
// (WEFT_HOST_COLL=false): the leaders of this host's procs meet on the
// collective channel, as leaders on different hosts do.
func TestWeftRunCollChannel(t *testing.T) {
	err, out, errOut := launched(t, launch.Config{Ranks: 6, PerProc: 2}, "collsuite", []string{"WEFT_HOST_COLL=false"})
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkSuite(t, 6, out, errOut)
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

// TestWeftRunIcollDeath: the same with the others waiting for a nonblocking
// collective.
func TestWeftRunIcollDeath(t *testing.T) { weftRunDeath(t, "icolldie") }

// value is element i of the block rank from sends to rank to, for the checks of
// the data-moving collectives: every block's content shows where it came from.
func value(from, to, i int) int32 { return int32(from*1_000_003 + to*7919 + i) }

// unevenCount is the uneven count of rank j's block in the v-form checks: some
// are zero, the others differ from one another.
func unevenCount(j, size int) int {
	if j%3 == 1 {
		return 0
	}
	return size + j
}

// unevenBlocks returns the counts and the displacements of n uneven blocks laid
// out in reverse rank order with a gap of one element after each (a rank's shift
// moves them all), and the length of the buffer that holds them.
func unevenBlocks(n, size, shift int) (counts, displs []int, length int) {
	counts, displs = make([]int, n), make([]int, n)
	length = shift
	for j := n - 1; j >= 0; j-- {
		counts[j], displs[j] = unevenCount(j, size), length
		length += counts[j] + 1
	}
	return counts, displs, length
}

// filled returns a buffer of length elements set to -1, to show the elements a
// collective must leave alone.
func filled(length int) []int32 {
	b := make([]int32, length)
	for i := range b {
		b[i] = -1
	}
	return b
}

// checkBlocks compares the blocks of got (counts, displs) with what rank from(j)
// sent rank to, and checks that the rest of got is still -1.
func checkBlocks(what string, got []int32, counts, displs []int, from func(j int) int, to int) error {
	inside := make([]bool, len(got))
	for j := range counts {
		for i := range counts[j] {
			inside[displs[j]+i] = true
			if v, want := got[displs[j]+i], value(from(j), to, i); v != want {
				return fmt.Errorf("%s: block %d element %d is %d, want %d", what, j, i, v, want)
			}
		}
	}
	for i, in := range inside {
		if !in && got[i] != -1 {
			return fmt.Errorf("%s: element %d outside the blocks was written (%d)", what, i, got[i])
		}
	}
	return nil
}

// sentBlock returns count elements of the block from sends to.
func sentBlock(from, to, count int) []int32 {
	b := make([]int32, count)
	for i := range b {
		b[i] = value(from, to, i)
	}
	return b
}

// checkScatter: Scatter and Scatterv from a root that is not a leader (and, for
// the small sizes, from rank 1), in place too, with uneven and zero counts.
func checkScatter(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for _, size := range []int{0, 1, 1000, 1 << 16} {
		roots := []int{n - 1}
		if size <= 1000 {
			roots = append(roots, 1%n)
		}
		for _, root := range roots {
			var send []int32
			if me == root {
				for j := range n {
					send = append(send, sentBlock(root, j, size)...)
				}
			}
			recv := filled(size + 1)
			if err := mpi.Scatter(c, send, recv, root); err != nil {
				return err
			}
			if err := checkBlocks(fmt.Sprintf("Scatter of %d from %d", size, root), recv, []int{size}, []int{0}, func(int) int { return root }, me); err != nil {
				return err
			}
			if me == root { // in place: the root's block stays in send
				recv = nil
			} else {
				recv = filled(size)
			}
			if err := mpi.Scatter(c, send, recv, root); err != nil {
				return err
			}
			if me != root && !slices.Equal(recv, sentBlock(root, me, size)) {
				return fmt.Errorf("Scatter in place of %d from %d: wrong block", size, root)
			}
			counts, displs, length := unevenBlocks(n, size, 2)
			send = nil
			if me == root {
				send = filled(length)
				for j := range n {
					copy(send[displs[j]:], sentBlock(root, j, counts[j]))
				}
			}
			recv = filled(unevenCount(me, size) + 2)
			if err := mpi.Scatterv(c, send, counts, displs, recv, root); err != nil {
				return err
			}
			if err := checkBlocks(fmt.Sprintf("Scatterv of %d from %d", size, root), recv, []int{unevenCount(me, size)}, []int{0}, func(int) int { return root }, me); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGatherv: Gatherv to a root that is not a leader and Allgatherv (each rank
// placing the blocks elsewhere; in place too), with uneven and zero counts.
func checkGatherv(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for _, size := range []int{0, 1, 1000, 1 << 16} {
		mine := sentBlock(me, 0, unevenCount(me, size))
		from := func(j int) int { return j }
		root := n - 1
		counts, displs, length := unevenBlocks(n, size, 1)
		var recv []int32
		if me == root {
			recv = filled(length)
		}
		if err := mpi.Gatherv(c, mine, recv, counts, displs, root); err != nil {
			return err
		}
		if me == root {
			if err := checkBlocks(fmt.Sprintf("Gatherv of %d to %d", size, root), recv, counts, displs, from, 0); err != nil {
				return err
			}
		}
		counts, displs, length = unevenBlocks(n, size, me)
		recv = filled(length)
		if err := mpi.Allgatherv(c, mine, recv, counts, displs); err != nil {
			return err
		}
		if err := checkBlocks(fmt.Sprintf("Allgatherv of %d", size), recv, counts, displs, from, 0); err != nil {
			return err
		}
		for i := range recv {
			recv[i] = -1
		}
		copy(recv[displs[me]:], mine)
		if err := mpi.Allgatherv(c, nil, recv, counts, displs); err != nil {
			return err
		}
		if err := checkBlocks(fmt.Sprintf("Allgatherv in place of %d", size), recv, counts, displs, from, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkAlltoall: Alltoall (in place too) and Alltoallv with counts that differ
// for every pair of ranks, some zero.
func checkAlltoall(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	from := func(j int) int { return j }
	for _, size := range []int{0, 1, 1000, 1 << 14} {
		send := make([]int32, 0, n*size) // not nil, which would mean in place
		for j := range n {
			send = append(send, sentBlock(me, j, size)...)
		}
		recv := filled(n*size + 1)
		if err := mpi.Alltoall(c, send, recv); err != nil {
			return err
		}
		counts, displs := make([]int, n), make([]int, n)
		for j := range n {
			counts[j], displs[j] = size, j*size
		}
		what := fmt.Sprintf("Alltoall of %d", size)
		if err := checkBlocks(what, recv, counts, displs, from, me); err != nil {
			return err
		}
		recv = slices.Clone(send) // in place
		if err := mpi.Alltoall(c, nil, recv); err != nil {
			return err
		}
		if err := checkBlocks(what+" in place", recv, counts, displs, from, me); err != nil {
			return err
		}
		// Rank i sends rank j (i+2j)%4 * size/4 elements, placed in reverse order.
		pair := func(i, j int) int { return (i + 2*j) % 4 * (size/4 + 1) }
		sendCounts, sendDispls, recvCounts, recvDispls := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
		sl, rl := 0, 0
		for j := n - 1; j >= 0; j-- {
			sendCounts[j], sendDispls[j] = pair(me, j), sl
			recvCounts[j], recvDispls[j] = pair(j, me), rl
			sl, rl = sl+sendCounts[j], rl+recvCounts[j]+1
		}
		send = make([]int32, sl)
		for j := range n {
			copy(send[sendDispls[j]:], sentBlock(me, j, sendCounts[j]))
		}
		recv = filled(rl)
		if err := mpi.Alltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls); err != nil {
			return err
		}
		if err := checkBlocks(fmt.Sprintf("Alltoallv of %d", size), recv, recvCounts, recvDispls, from, me); err != nil {
			return err
		}
	}
	return nil
}

// checkScan: Scan, Exscan and ReduceScatterBlock with the non-commutative affine
// op, against the fold in rank order, and with Sum in place.
func checkScan(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	fold := func(lo, hi, size int) []int64 { // contribution(lo) ∘ ... ∘ contribution(hi)
		want := contribution(hi, size)
		for r := hi - 1; r >= lo; r-- {
			compose(contribution(r, size), want)
		}
		return want
	}
	for _, size := range []int{0, 1, 1000, 1 << 15} {
		got := make([]int64, 2*size)
		if err := mpi.Scan(c, contribution(me, size), got, affine); err != nil {
			return err
		}
		if !slices.Equal(got, fold(0, me, size)) {
			return fmt.Errorf("Scan(affine) of %d pairs: wrong result", size)
		}
		got = slices.Repeat([]int64{-1}, 2*size)
		if err := mpi.Exscan(c, contribution(me, size), got, affine); err != nil {
			return err
		}
		if want := slices.Repeat([]int64{-1}, 2*size); me > 0 {
			want = fold(0, me-1, size)
			if !slices.Equal(got, want) {
				return fmt.Errorf("Exscan(affine) of %d pairs: wrong result", size)
			}
		} else if !slices.Equal(got, want) {
			return fmt.Errorf("Exscan(affine) of %d pairs wrote rank 0's buffer", size)
		}
		// Block b of rank r is contribution(r+b): rank me gets the fold of
		// contribution(me), ..., contribution(me+n-1).
		send := make([]int64, 0, 2*n*size)
		for b := range n {
			send = append(send, contribution(me+b, size)...)
		}
		got = make([]int64, 2*size)
		if err := mpi.ReduceScatterBlock(c, send, got, affine); err != nil {
			return err
		}
		if size > 0 && !slices.Equal(got, fold(me, me+n-1, size)) {
			return fmt.Errorf("ReduceScatterBlock(affine) of %d pairs: wrong result", size)
		}
		sum := make([]int32, size)
		for i := range sum {
			sum[i] = int32(me + i)
		}
		if err := mpi.Scan(c, nil, sum, mpi.Sum); err != nil {
			return err
		}
		for i, v := range sum {
			if v != int32(me*(me+1)/2+(me+1)*i) {
				return fmt.Errorf("Scan(Sum) in place of %d: element %d is %d", size, i, v)
			}
		}
	}
	return nil
}

// checkCollErrors: arguments that every rank finds wrong before taking part, with
// the errors of one proc, and disagreements between ranks found inside the
// collectives across procs: errors, not hangs, and the communicator goes on
// working after them.
func checkCollErrors(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	want := func(what string, err, class error) error {
		if !errors.Is(err, class) {
			return fmt.Errorf("%s: %v, want %v", what, err, class)
		}
		var e *mpi.Error
		if !errors.As(err, &e) || e.Rank != me {
			return fmt.Errorf("%s: %v is not an *mpi.Error of rank %d", what, err, me)
		}
		return nil
	}
	ones, at := make([]int, n), make([]int, n)
	for j := range n {
		ones[j], at[j] = 1, j
	}
	if err := want("Allgatherv with too few counts", mpi.Allgatherv(c, []int32{1}, make([]int32, n), ones[1:], at), mpi.ErrArg); err != nil {
		return err
	}
	neg := slices.Clone(ones)
	neg[n-1] = -1
	if err := want("Alltoallv with a negative count", mpi.Alltoallv(c, make([]int32, n), neg, at, make([]int32, n), ones, at), mpi.ErrCount); err != nil {
		return err
	}
	if err := want("Allgatherv with overlapping blocks", mpi.Allgatherv(c, []int32{1}, make([]int32, n), ones, make([]int, n)), mpi.ErrBuffer); n > 1 && err != nil {
		return err
	}
	// The last rank's blocks and vectors are longer.
	m := 2
	if me == n-1 {
		m = 3
	}
	if err := want("Alltoall with the last rank's blocks longer", mpi.Alltoall(c, make([]int32, m*n), make([]int32, m*n)), mpi.ErrCount); err != nil {
		return err
	}
	// A Scan's rank needs the sends of the ranks up to itself only: with the
	// procs of one host in host mode, as in one proc, the ranks of procs whose
	// ranks all come before the last one may leave before it sends.
	if err := mpi.Scan(c, make([]int32, m), make([]int32, m), mpi.Sum); err != nil || me == n-1 {
		if err := want("Scan with the last rank's vector longer", err, mpi.ErrCount); err != nil {
			return err
		}
	}
	if err := want("ReduceScatterBlock with the last rank's blocks longer", mpi.ReduceScatterBlock(c, make([]int32, m*n), make([]int32, m), mpi.Sum), mpi.ErrCount); err != nil {
		return err
	}
	// Gatherv to a root that is not a leader: its proc's ranks learn that the
	// last rank sends too much; the others may not.
	root := max(n-2, 0)
	two := slices.Repeat([]int{2}, n)
	twos := make([]int, n)
	for j := range n {
		twos[j] = 2 * j
	}
	var recv []int32
	if me == root {
		recv = make([]int32, 2*n)
	}
	err := mpi.Gatherv(c, make([]int32, m), recv, two, twos, root)
	if me == root {
		if err := want("Gatherv from a rank sending too much", err, mpi.ErrTruncate); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, mpi.ErrTruncate) {
		return fmt.Errorf("Gatherv from a rank sending too much: %v", err)
	}
	// The ranks of rank 0's proc call Barrier, the others Alltoall: every rank
	// gets an error.
	t, err := c.SplitType(mpi.SplitProc, 0)
	if err != nil {
		return err
	}
	low := []int32{int32(me)}
	if err := mpi.Allreduce(t, nil, low, mpi.Min); err != nil {
		return err
	}
	if t.Size() < n { // the communicator spans procs
		if low[0] == 0 {
			err = c.Barrier()
		} else {
			err = mpi.Alltoall(c, make([]int32, n), make([]int32, n))
		}
		if err := want("Barrier against Alltoall", err, mpi.ErrArg); err != nil {
			return err
		}
	}
	return c.Barrier()
}
