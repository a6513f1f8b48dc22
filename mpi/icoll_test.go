package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// icollRanks are the communicator sizes of the nonblocking collectives' tests in one proc.
var icollRanks = []int{1, 2, 3, 4, 7}

// pending is a nonblocking collective in flight and the check of its result.
type pending struct {
	name  string
	req   *mpi.Request
	check func() error
}

// checkNonblocking issues one of every nonblocking collective on c, all outstanding
// at once with a blocking Allreduce and Bcast among them (which wait their turn
// behind them), completes them with Waitall in reverse order, and checks every
// result against the values the inputs' formula gives (value: from, to, element).
// The sizes include 0, 1, odd and large; the roots rotate.
func checkNonblocking(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for k, m := range []int{0, 1, 7, 1000} {
		root := (k + 1) % n
		var ps []pending
		add := func(name string, req *mpi.Request, err error, check func() error) error {
			if err != nil {
				return fmt.Errorf("%s of %d: %w", name, m, err)
			}
			ps = append(ps, pending{name, req, check})
			return nil
		}
		elems := func(f func(i int) int32, count int) []int32 {
			b := make([]int32, count)
			for i := range b {
				b[i] = f(i)
			}
			return b
		}
		equal := func(what string, got []int32, want func(i int) int32) error {
			for i, v := range got {
				if w := want(i); v != w {
					return fmt.Errorf("%s of %d: element %d is %d, want %d", what, m, i, v, w)
				}
			}
			return nil
		}
		mine := func(i int) int32 { return value(me, 0, i) }
		sumTo := func(hi, i int) int32 { // value(0, 0, i) + ... + value(hi-1, 0, i)
			var s int32
			for r := range hi {
				s += value(r, 0, i)
			}
			return s
		}

		req, err := c.Ibarrier()
		if err := add("Ibarrier", req, err, func() error { return nil }); err != nil {
			return err
		}

		bc := make([]int32, m)
		if me == root {
			bc = elems(func(i int) int32 { return value(root, 1, i) }, m)
		}
		req, err = mpi.Ibcast(c, bc, root)
		if err := add("Ibcast", req, err, func() error {
			return equal("Ibcast", bc, func(i int) int32 { return value(root, 1, i) })
		}); err != nil {
			return err
		}

		red := make([]int32, m)
		req, err = mpi.Ireduce(c, elems(mine, m), red, mpi.Sum, root)
		if err := add("Ireduce", req, err, func() error {
			if me != root {
				return equal("Ireduce (not the root)", red, func(int) int32 { return 0 })
			}
			return equal("Ireduce", red, func(i int) int32 { return sumTo(n, i) })
		}); err != nil {
			return err
		}

		mx := make([]int32, m)
		req, err = mpi.Iallreduce(c, elems(mine, m), mx, mpi.Max)
		if err := add("Iallreduce", req, err, func() error {
			return equal("Iallreduce(Max)", mx, func(i int) int32 { return value(n-1, 0, i) })
		}); err != nil {
			return err
		}

		// A blocking collective among the outstanding ones takes its turn after them.
		one := []int32{int32(me)}
		if err := mpi.Allreduce(c, nil, one, mpi.Sum); err != nil {
			return fmt.Errorf("Allreduce among nonblocking ones: %w", err)
		}
		if want := int32(n * (n - 1) / 2); one[0] != want {
			return fmt.Errorf("Allreduce among nonblocking ones: %d, want %d", one[0], want)
		}

		inPlace := elems(mine, m)
		req, err = mpi.Iallreduce(c, nil, inPlace, mpi.Sum)
		if err := add("Iallreduce in place", req, err, func() error {
			return equal("Iallreduce(Sum) in place", inPlace, func(i int) int32 { return sumTo(n, i) })
		}); err != nil {
			return err
		}

		var ga []int32
		if me == root {
			ga = make([]int32, n*m)
		}
		req, err = mpi.Igather(c, elems(mine, m), ga, root)
		if err := add("Igather", req, err, func() error {
			return equal("Igather", ga, func(i int) int32 { return value(i/m, 0, i%m) })
		}); err != nil {
			return err
		}

		var scs []int32
		if me == root {
			scs = elems(func(i int) int32 { return value(root, i/m, i%m) }, n*m)
		}
		sc := make([]int32, m)
		req, err = mpi.Iscatter(c, scs, sc, root)
		if err := add("Iscatter", req, err, func() error {
			return equal("Iscatter", sc, func(i int) int32 { return value(root, me, i) })
		}); err != nil {
			return err
		}

		ag := make([]int32, n*m)
		req, err = mpi.Iallgather(c, elems(mine, m), ag)
		if err := add("Iallgather", req, err, func() error {
			return equal("Iallgather", ag, func(i int) int32 { return value(i/m, 0, i%m) })
		}); err != nil {
			return err
		}

		bl := make([]int32, m)
		if me == root {
			bl = elems(func(i int) int32 { return value(root, 2, i) }, m)
		}
		if err := mpi.Bcast(c, bl, root); err != nil {
			return fmt.Errorf("Bcast among nonblocking ones: %w", err)
		}
		if err := equal("Bcast among nonblocking ones", bl, func(i int) int32 { return value(root, 2, i) }); err != nil {
			return err
		}

		a2a := make([]int32, n*m)
		req, err = mpi.Ialltoall(c, elems(func(i int) int32 { return value(me, i/m, i%m) }, n*m), a2a)
		if err := add("Ialltoall", req, err, func() error {
			return equal("Ialltoall", a2a, func(i int) int32 { return value(i/m, me, i%m) })
		}); err != nil {
			return err
		}

		// The v-forms, with uneven and zero counts laid out in reverse rank order.
		counts, displs, length := unevenBlocks(n, m, me)
		var gv []int32
		if me == root {
			gv = filled(length)
		}
		req, err = mpi.Igatherv(c, sentBlock(me, root, unevenCount(me, m)), gv, counts, displs, root)
		if err := add("Igatherv", req, err, func() error {
			if me != root {
				return nil
			}
			return checkBlocks("Igatherv", gv, counts, displs, func(j int) int { return j }, root)
		}); err != nil {
			return err
		}

		var svs []int32
		if me == root {
			svs = filled(length)
			for j := range n {
				copy(svs[displs[j]:], sentBlock(root, j, counts[j]))
			}
		}
		sv := filled(unevenCount(me, m) + 1)
		req, err = mpi.Iscatterv(c, svs, counts, displs, sv, root)
		if err := add("Iscatterv", req, err, func() error {
			if err := equal("Iscatterv", sv[:len(sv)-1], func(i int) int32 { return value(root, me, i) }); err != nil {
				return err
			}
			if sv[len(sv)-1] != -1 {
				return fmt.Errorf("Iscatterv of %d wrote past its block", m)
			}
			return nil
		}); err != nil {
			return err
		}

		agv := filled(length)
		req, err = mpi.Iallgatherv(c, sentBlock(me, 0, unevenCount(me, m)), agv, counts, displs)
		if err := add("Iallgatherv", req, err, func() error {
			return checkBlocks("Iallgatherv", agv, counts, displs, func(j int) int { return j }, 0)
		}); err != nil {
			return err
		}

		// Alltoallv: rank me sends unevenCount(me, m) elements to every rank.
		sendCounts, sendDispls := make([]int, n), make([]int, n)
		a2s := []int32{} // not nil, which would mean in place
		for j := range n {
			sendCounts[j], sendDispls[j] = unevenCount(me, m), len(a2s)
			a2s = append(a2s, sentBlock(me, j, unevenCount(me, m))...)
		}
		a2v := filled(length)
		req, err = mpi.Ialltoallv(c, a2s, sendCounts, sendDispls, a2v, counts, displs)
		if err := add("Ialltoallv", req, err, func() error {
			return checkBlocks("Ialltoallv", a2v, counts, displs, func(j int) int { return j }, me)
		}); err != nil {
			return err
		}

		scan := make([]int32, m)
		req, err = mpi.Iscan(c, elems(mine, m), scan, mpi.Sum)
		if err := add("Iscan", req, err, func() error {
			return equal("Iscan", scan, func(i int) int32 { return sumTo(me+1, i) })
		}); err != nil {
			return err
		}

		ex := filled(m)
		req, err = mpi.Iexscan(c, elems(mine, m), ex, mpi.Sum)
		if err := add("Iexscan", req, err, func() error {
			if me == 0 {
				return equal("Iexscan (rank 0)", ex, func(int) int32 { return -1 })
			}
			return equal("Iexscan", ex, func(i int) int32 { return sumTo(me, i) })
		}); err != nil {
			return err
		}

		// The non-commutative affine op shows that queued reductions fold in rank order.
		aff := make([]int64, 2*m)
		req, err = mpi.Iallreduce(c, contribution(me, m), aff, affine)
		if err := add("Iallreduce(affine)", req, err, func() error {
			want := contribution(n-1, m)
			for r := n - 2; r >= 0; r-- {
				compose(contribution(r, m), want)
			}
			if !slices.Equal(aff, want) {
				return fmt.Errorf("Iallreduce(affine) of %d: wrong result", m)
			}
			return nil
		}); err != nil {
			return err
		}

		rsb := make([]int32, m)
		req, err = mpi.IreduceScatterBlock(c, elems(mine, n*m), rsb, mpi.Sum)
		if err := add("IreduceScatterBlock", req, err, func() error {
			return equal("IreduceScatterBlock", rsb, func(i int) int32 { return sumTo(n, me*m+i) })
		}); err != nil {
			return err
		}

		total, at := 0, make([]int, n)
		for j := range n {
			at[j] = total
			total += counts[j]
		}
		rs := filled(counts[me] + 1)
		req, err = mpi.IreduceScatter(c, elems(mine, total), rs, counts, mpi.Sum)
		if err := add("IreduceScatter", req, err, func() error {
			if err := equal("IreduceScatter", rs[:counts[me]], func(i int) int32 { return sumTo(n, at[me]+i) }); err != nil {
				return err
			}
			if rs[counts[me]] != -1 {
				return fmt.Errorf("IreduceScatter of %d wrote past its block", m)
			}
			return nil
		}); err != nil {
			return err
		}

		reqs := make([]*mpi.Request, len(ps))
		for i, p := range ps {
			reqs[len(ps)-1-i] = p.req
		}
		sts, err := mpi.Waitall(reqs...)
		if err != nil {
			return fmt.Errorf("Waitall of %d: %w", m, err)
		}
		for i, r := range reqs {
			if r != nil {
				return fmt.Errorf("Waitall left request %d set", i)
			}
			if sts[i].Err != nil {
				return fmt.Errorf("status %d carries %v", i, sts[i].Err)
			}
		}
		for _, p := range ps {
			if err := p.check(); err != nil {
				return err
			}
			if _, err := p.req.Wait(); !errors.Is(err, mpi.ErrRequest) {
				return fmt.Errorf("%s: Wait after Waitall returned %v, want ErrRequest", p.name, err)
			}
		}
	}
	return nil
}

func TestNonblockingCollectives(t *testing.T) {
	for _, n := range icollRanks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			mustRun(t, n, func(c *mpi.Comm) error {
				if err := checkNonblocking(c); err != nil {
					return err
				}
				// Again on a communicator whose rank order differs from the world's.
				rev, err := c.Split(0, -c.Rank())
				if err != nil {
					return err
				}
				return checkNonblocking(rev)
			})
		})
	}
}

// TestNonblockingProgress: a nonblocking collective moves on while its rank stays
// away from Weft: rank 0 issues an Iallreduce and then only waits on a Go channel
// until the others have completed theirs, which needs rank 0's part; then its Test
// sees it complete.
func TestNonblockingProgress(t *testing.T) {
	const n = 3
	var others sync.WaitGroup
	others.Add(n - 1)
	mustRun(t, n, func(c *mpi.Comm) error {
		recv := make([]int64, 1)
		req, err := mpi.Iallreduce(c, []int64{int64(c.Rank() + 1)}, recv, mpi.Sum)
		if err != nil {
			return err
		}
		if c.Rank() != 0 {
			_, err := req.Wait()
			others.Done()
			if err != nil || recv[0] != 6 {
				return fmt.Errorf("Wait: %v, result %d, want 6", err, recv[0])
			}
			return nil
		}
		away := make(gate)
		go func() { others.Wait(); away.open() }()
		if err := away.wait(); err != nil {
			return fmt.Errorf("the others' Iallreduce did not complete while rank 0 stayed away: %w", err)
		}
		for {
			st, ok, err := req.Test()
			if err != nil {
				return err
			}
			if ok {
				if st.Err != nil || recv[0] != 6 {
					return fmt.Errorf("Test: %+v, result %d, want 6", st, recv[0])
				}
				return nil
			}
			time.Sleep(10 * time.Microsecond)
		}
	})
}

// TestNonblockingWithRequests: nonblocking collectives complete through Waitany,
// Waitsome, Testany, Testsome and Testall, alone and mixed with point-to-point
// requests; Cancel of one is ErrRequest; a freed one still runs with the others.
func TestNonblockingWithRequests(t *testing.T) {
	mustRun(t, 4, func(c *mpi.Comm) error {
		me, n := c.Rank(), c.Size()
		// Waitany over collectives alone: the barrier completes first or second.
		sum := make([]int32, 1)
		r1, err := mpi.Iallreduce(c, []int32{1}, sum, mpi.Sum)
		if err != nil {
			return err
		}
		r2, err := c.Ibarrier()
		if err != nil {
			return err
		}
		if err := r1.Cancel(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Cancel of an Iallreduce: %v, want ErrRequest", err)
		}
		reqs := []*mpi.Request{r1, r2}
		for range 2 {
			i, _, err := mpi.Waitany(reqs...)
			if err != nil || i == mpi.Undefined || reqs[i] != nil {
				return fmt.Errorf("Waitany: %d, %v", i, err)
			}
		}
		if i, _, err := mpi.Waitany(reqs...); i != mpi.Undefined || err != nil {
			return fmt.Errorf("Waitany with nothing active: %d, %v", i, err)
		}
		if sum[0] != int32(n) {
			return fmt.Errorf("Iallreduce: %d, want %d", sum[0], n)
		}

		// A mix, the collective completing first: nobody sends the receive's
		// message before every rank's Waitany has returned the Ibcast.
		next, prev := (me+1)%n, (me+n-1)%n
		got := make([]int32, 1)
		rr, err := mpi.Irecv(c, got, next, 7)
		if err != nil {
			return err
		}
		bc := []int32{int32(me)}
		rb, err := mpi.Ibcast(c, bc, 2)
		if err != nil {
			return err
		}
		mixed := []*mpi.Request{rr, rb}
		if i, _, err := mpi.Waitany(mixed...); err != nil || i != 1 || bc[0] != 2 {
			return fmt.Errorf("Waitany over a receive and an Ibcast: %d, %v, Ibcast %d; want 1, nil, 2", i, err, bc[0])
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if err := mpi.Send(c, []int32{int32(me * 10)}, prev, 7); err != nil {
			return err
		}
		idx, _, err := mpi.Waitsome(mixed...)
		if err != nil || !slices.Equal(idx, []int{0}) || got[0] != int32(next*10) {
			return fmt.Errorf("Waitsome over the receive: %v, %v, received %d (want %d)", idx, err, got[0], next*10)
		}

		// A mix, the receive completing first: rank 0 joins the Ibarrier only
		// after every other rank's Waitany has returned the receive.
		if me == 0 {
			for j := 1; j < n; j++ {
				if err := mpi.Send(c, []int32{int32(j)}, j, 8); err != nil {
					return err
				}
			}
			for j := 1; j < n; j++ {
				if _, err := mpi.Recv(c, got, j, 9); err != nil {
					return err
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		} else {
			rb, err := c.Ibarrier()
			if err != nil {
				return err
			}
			rr, err := mpi.Irecv(c, got, 0, 8)
			if err != nil {
				return err
			}
			mixed := []*mpi.Request{rb, rr}
			if i, _, err := mpi.Waitany(mixed...); err != nil || i != 1 || got[0] != int32(me) {
				return fmt.Errorf("Waitany over an Ibarrier and a receive: %d, %v, received %d; want 1, nil, %d", i, err, got[0], me)
			}
			if err := mpi.Send(c, []int32{0}, 0, 9); err != nil {
				return err
			}
			if _, err := mpi.Waitall(mixed...); err != nil {
				return err
			}
		}

		// Testany, Testsome and Testall poll until the collectives are over.
		x := make([]int32, n)
		ra, err := mpi.Iallgather(c, []int32{int32(me)}, x)
		if err != nil {
			return err
		}
		rb, err = c.Ibarrier()
		if err != nil {
			return err
		}
		polled := []*mpi.Request{ra, rb}
		deadline := time.Now().Add(syncTimeout)
		for done := 0; done < 2; {
			if time.Now().After(deadline) {
				return errors.New("Testany and Testsome never completed the collectives")
			}
			if _, _, ok, err := mpi.Testany(polled...); err != nil {
				return err
			} else if ok {
				done++
			}
			if idx, _, err := mpi.Testsome(polled...); err != nil {
				return err
			} else {
				done += len(idx)
			}
		}
		if !slices.Equal(x, []int32{0, 1, 2, 3}) {
			return fmt.Errorf("Iallgather: %v", x)
		}
		ra, err = mpi.Iallreduce(c, nil, []int32{1}, mpi.Sum)
		if err != nil {
			return err
		}
		for {
			_, ok, err := mpi.Testall(ra)
			if err != nil {
				return err
			}
			if ok {
				break
			}
		}

		// Free lets the collective run; the next ones still match in order.
		freed := make([]int32, 1)
		rf, err := mpi.Iallreduce(c, []int32{2}, freed, mpi.Sum)
		if err != nil {
			return err
		}
		if err := rf.Free(); err != nil {
			return err
		}
		if _, err := rf.Wait(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Wait of a freed Iallreduce: %v, want ErrRequest", err)
		}
		after := []int32{3}
		if err := mpi.Allreduce(c, nil, after, mpi.Sum); err != nil {
			return err
		}
		if after[0] != int32(3*n) || freed[0] != int32(2*n) {
			return fmt.Errorf("after a freed Iallreduce: %d (want %d), the freed one %d (want %d)", after[0], 3*n, freed[0], 2*n)
		}
		return nil
	})
}

// TestNonblockingErrors: bad arguments are errors of the call, with no request;
// disagreements between ranks come back from Wait, named after the call; the
// communicator works on after them.
func TestNonblockingErrors(t *testing.T) {
	mustRun(t, 3, func(c *mpi.Comm) error {
		me := c.Rank()
		calls := []struct {
			what  string
			class mpi.Class
			start func() (*mpi.Request, error)
		}{
			{"Ibarrier on a nil communicator", mpi.ErrComm, func() (*mpi.Request, error) { return (*mpi.Comm)(nil).Ibarrier() }},
			{"Ibcast to root 3", mpi.ErrRoot, func() (*mpi.Request, error) { return mpi.Ibcast(c, []int32{1}, 3) }},
			{"Iallreduce with the zero Op", mpi.ErrOp, func() (*mpi.Request, error) { return mpi.Iallreduce(c, []int32{1}, make([]int32, 1), mpi.Op{}) }},
			{"Ireduce with MinLoc on int32", mpi.ErrOp, func() (*mpi.Request, error) { return mpi.Ireduce(c, []int32{1}, make([]int32, 1), mpi.MinLoc, 0) }},
			{"Iallgather into a short buffer", mpi.ErrCount, func() (*mpi.Request, error) { return mpi.Iallgather(c, []int32{1}, make([]int32, 2)) }},
			{"IreduceScatter with 2 counts", mpi.ErrArg, func() (*mpi.Request, error) {
				return mpi.IreduceScatter(c, make([]int32, 2), make([]int32, 1), []int{1, 1}, mpi.Sum)
			}},
		}
		for _, call := range calls {
			req, err := call.start()
			if req != nil || !errors.Is(err, call.class) {
				return fmt.Errorf("%s: request %v, error %v; want no request and %v", call.what, req, err, call.class)
			}
		}
		// The last rank's vector is longer: every rank's Wait says so.
		m := 2
		if me == 2 {
			m = 3
		}
		req, err := mpi.Iallreduce(c, make([]int32, m), make([]int32, m), mpi.Sum)
		if err != nil {
			return err
		}
		_, err = req.Wait()
		e, werr := wantClass(err, mpi.ErrCount)
		if werr != nil {
			return fmt.Errorf("Iallreduce of different lengths: %w", werr)
		}
		if e.Op != "Iallreduce" || e.Rank != me {
			return fmt.Errorf("Iallreduce of different lengths: %v names %s on rank %d, want Iallreduce on rank %d", e, e.Op, e.Rank, me)
		}
		// Counts that differ between ranks.
		counts := []int{1, 1, 1}
		if me == 1 {
			counts = []int{2, 0, 1}
		}
		err = mpi.ReduceScatter(c, make([]int32, 3), make([]int32, 2), counts, mpi.Sum)
		if _, werr := wantClass(err, mpi.ErrCount); werr != nil {
			return fmt.Errorf("ReduceScatter with different counts: %w", werr)
		}
		return c.Barrier()
	})
}

// TestNonblockingDeadRank: a rank that returns an error while the others wait in
// an Iallreduce ends the job; their Wait returns ErrProcFailed instead of hanging,
// and no goroutine is left behind (run checks).
func TestNonblockingDeadRank(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			boom := errors.New("boom")
			var issued sync.WaitGroup // the others have issued their collectives
			issued.Add(n - 1)
			err := run(t, n, func(c *mpi.Comm) error {
				if c.Rank() == n-1 {
					issued.Wait()
					return boom
				}
				reqs := make([]*mpi.Request, 3)
				for i := range reqs {
					var err error
					if reqs[i], err = mpi.Iallreduce(c, []int64{1}, make([]int64, 1), mpi.Sum); err != nil {
						return err
					}
				}
				issued.Done()
				_, err := mpi.Waitall(reqs...)
				if !errors.Is(err, mpi.ErrProcFailed) {
					return fmt.Errorf("Waitall with a dead rank: %v, want ErrProcFailed", err)
				}
				return nil
			})
			// Run joins the ranks' errors: the dead rank's, and none of the others'
			// (each checked its Waitall's ErrProcFailed and returned nil).
			if !errors.Is(err, boom) || errors.Is(err, mpi.ErrProcFailed) {
				t.Fatalf("Run: %v, want only the dead rank's error", err)
			}
		})
	}
}

// TestNonblockingConcurrentComms: goroutines of each rank run nonblocking and
// blocking collectives on communicators of their own at the same time.
func TestNonblockingConcurrentComms(t *testing.T) {
	const goroutines, rounds = 4, 30
	mustRun(t, 4, func(c *mpi.Comm) error {
		comms := make([]*mpi.Comm, goroutines)
		for g := range comms {
			var err error
			if comms[g], err = c.Dup(); err != nil {
				return err
			}
		}
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g, d := range comms {
			wg.Go(func() {
				errs[g] = func() error {
					for k := range rounds {
						sum := make([]int32, 3)
						r1, err := mpi.Iallreduce(d, []int32{int32(d.Rank()), int32(g), int32(k)}, sum, mpi.Sum)
						if err != nil {
							return err
						}
						bc := []int32{int32(d.Rank() + g)}
						r2, err := mpi.Ibcast(d, bc, k%d.Size())
						if err != nil {
							return err
						}
						if err := d.Barrier(); err != nil {
							return err
						}
						if _, err := mpi.Waitall(r2, r1); err != nil {
							return err
						}
						n := int32(d.Size())
						if want := []int32{n * (n - 1) / 2, n * int32(g), n * int32(k)}; !slices.Equal(sum, want) {
							return fmt.Errorf("goroutine %d round %d: Iallreduce %v, want %v", g, k, sum, want)
						}
						if want := int32(k%d.Size() + g); bc[0] != want {
							return fmt.Errorf("goroutine %d round %d: Ibcast %d, want %d", g, k, bc[0], want)
						}
					}
					return nil
				}()
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// TestReduceScatter: ReduceScatter with uneven and zero counts, in place and not,
// with the non-commutative affine op, against the fold in rank order.
func TestReduceScatter(t *testing.T) {
	for _, n := range icollRanks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) { mustRun(t, n, checkReduceScatter) })
	}
}

// checkReduceScatter is TestReduceScatter's work on one communicator.
func checkReduceScatter(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	for _, m := range []int{0, 1, 7, 1000} {
		counts := make([]int, n) // in affine pairs
		at, total := make([]int, n), 0
		for j := range n {
			counts[j], at[j] = unevenCount(j, m), total
			total += counts[j]
		}
		// Pair p of rank r's send is contribution(r+p)'s first pair.
		send := make([]int64, 0, 2*total)
		for p := range total {
			send = append(send, contribution(me+p, 1)...)
		}
		pairs := make([]int, n)
		for j := range n {
			pairs[j] = 2 * counts[j]
		}
		got := slices.Repeat([]int64{-1}, 2*counts[me]+1)
		if err := mpi.ReduceScatter(c, send, got, pairs, affine); err != nil {
			return err
		}
		for p := range counts[me] {
			want := contribution(n-1+at[me]+p, 1)
			for r := n - 2; r >= 0; r-- {
				compose(contribution(r+at[me]+p, 1), want)
			}
			if !slices.Equal(got[2*p:2*p+2], want) {
				return fmt.Errorf("ReduceScatter(affine) of %d: pair %d is %v, want %v", m, p, got[2*p:2*p+2], want)
			}
		}
		if got[len(got)-1] != -1 {
			return fmt.Errorf("ReduceScatter of %d wrote past its block", m)
		}
		inPlace := make([]int32, total)
		for i := range inPlace {
			inPlace[i] = int32(me + i)
		}
		if err := mpi.ReduceScatter(c, nil, inPlace, counts, mpi.Sum); err != nil {
			return err
		}
		for i := range counts[me] {
			if want := int32(n*(n-1)/2 + n*(at[me]+i)); inPlace[i] != want {
				return fmt.Errorf("ReduceScatter in place of %d: element %d is %d, want %d", m, i, inPlace[i], want)
			}
		}
	}
	return nil
}

// TestNonblockingRandomOrder: every rank issues the same random sequence of
// collectives (the same seed), blocking and nonblocking mixed, on two
// communicators, and completes its outstanding requests at random moments and in
// random order of its own (another seed per rank); every result is checked.
func TestNonblockingRandomOrder(t *testing.T) {
	for _, n := range []int{2, 4, 7} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			mustRun(t, n, func(c *mpi.Comm) error {
				d, err := c.Dup()
				if err != nil {
					return err
				}
				shared := rand.New(rand.NewPCG(1, uint64(n)))         // the calls: alike on every rank
				own := rand.New(rand.NewPCG(2, uint64(c.Rank()*n+1))) // the waits: the rank's own
				var outstanding []pending
				complete := func(k int) error {
					own.Shuffle(len(outstanding), func(i, j int) { outstanding[i], outstanding[j] = outstanding[j], outstanding[i] })
					for _, p := range outstanding[:k] {
						if _, err := p.req.Wait(); err != nil {
							return fmt.Errorf("%s: %w", p.name, err)
						}
						if err := p.check(); err != nil {
							return err
						}
					}
					outstanding = outstanding[k:]
					return nil
				}
				for step := range 200 {
					comm := c
					if shared.IntN(2) == 1 {
						comm = d
					}
					me, m := comm.Rank(), 1+shared.IntN(5)
					root := shared.IntN(n)
					tag := int32(step * 100)
					switch kind := shared.IntN(4); kind {
					case 0, 1: // an Iallreduce or an Ibcast, left outstanding
						buf := make([]int32, m)
						var req *mpi.Request
						var want func(i int) int32
						if kind == 0 {
							for i := range buf {
								buf[i] = tag + int32(me+i)
							}
							req, err = mpi.Iallreduce(comm, nil, buf, mpi.Sum)
							want = func(i int) int32 { return int32(n)*(tag+int32(i)) + int32(n*(n-1)/2) }
						} else {
							if me == root {
								for i := range buf {
									buf[i] = tag + int32(root*10+i)
								}
							}
							req, err = mpi.Ibcast(comm, buf, root)
							want = func(i int) int32 { return tag + int32(root*10+i) }
						}
						if err != nil {
							return err
						}
						name := fmt.Sprintf("step %d (kind %d)", step, kind)
						outstanding = append(outstanding, pending{name, req, func() error {
							for i, v := range buf {
								if v != want(i) {
									return fmt.Errorf("%s: element %d is %d, want %d", name, i, v, want(i))
								}
							}
							return nil
						}})
					case 2: // a blocking collective, behind whatever is outstanding (else straight to the engine)
						if err := blockingAmid(comm, step, shared.IntN(4), root, tag); err != nil {
							return err
						}
					case 3: // the rank completes some of its outstanding requests
						if err := complete(own.IntN(len(outstanding) + 1)); err != nil {
							return err
						}
					}
				}
				return complete(len(outstanding))
			})
		})
	}
}

// blockingAmid runs blocking collective kind (0 Allgather, 1 Bcast, 2 Reduce, 3
// Allreduce) on c at step of TestNonblockingRandomOrder, and checks its result.
func blockingAmid(c *mpi.Comm, step, kind, root int, tag int32) error {
	n, me := c.Size(), c.Rank()
	got := make([]int32, n)
	var err error
	switch kind {
	case 0:
		err = mpi.Allgather(c, []int32{tag + int32(me)}, got)
	case 1:
		if me == root {
			for j := range got {
				got[j] = tag + int32(j)
			}
		}
		err = mpi.Bcast(c, got, root)
	case 2, 3:
		send := make([]int32, n)
		for j := range send {
			send[j] = tag + int32(j*n+me)
		}
		if kind == 3 {
			err = mpi.Allreduce(c, send, got, mpi.Sum)
		} else if err = mpi.Reduce(c, send, got, mpi.Sum, root); me != root {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("step %d (blocking kind %d): %w", step, kind, err)
	}
	for j, v := range got {
		want := tag + int32(j)
		if kind >= 2 { // the sum over ranks r of tag + j*n + r
			want = int32(n)*(tag+int32(j*n)) + int32(n*(n-1)/2)
		}
		if v != want {
			return fmt.Errorf("step %d (blocking kind %d): element %d is %d, want %d", step, kind, j, v, want)
		}
	}
	return nil
}
