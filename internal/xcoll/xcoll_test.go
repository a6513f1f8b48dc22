package xcoll

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/netd/wire"
)

// loop is a Sender that hands every message straight to the destination's Net,
// as the receive daemon of proc from's connection would.
type loop struct {
	from int
	nets []*Net
}

func (l loop) Send(proc int, ch netd.Channel, h *wire.Header, payload []byte) error {
	if ch != netd.ChannelColl {
		return fmt.Errorf("sent on %v", ch)
	}
	hh := *h
	hh.Frag = uint32(len(payload))
	return l.nets[proc].deliver(l.from, &hh, func(b []byte) error { copy(b, payload); return nil })
}

// mesh returns the Nets of procs procs that reach each other through loop.
func mesh(procs int, aborted <-chan struct{}) []*Net {
	nets := make([]*Net, procs)
	for p := range nets {
		nets[p] = NewNet(p, aborted, nil)
	}
	for p, n := range nets {
		n.Connect(loop{from: p, nets: nets})
	}
	return nets
}

func TestNetEarlyAndLate(t *testing.T) {
	nets := mesh(2, make(chan struct{}))
	big := bytes.Repeat([]byte("weft"), fragBytes/2+3) // three fragments
	// Early: sent before anybody asks.
	if err := nets[0].Send(1, 7, 3, tagUp, Msg{Sig: 9, Data: big}); err != nil {
		t.Fatal(err)
	}
	if err := nets[0].Send(1, 7, 3, tagDown, Msg{Sig: 9}); err != nil {
		t.Fatal(err)
	}
	if got := nets[1].pending(); got != 2 {
		t.Fatalf("%d messages kept, want 2", got)
	}
	for _, tag := range []int32{tagDown, tagUp} { // taken in another order than sent
		m, err := nets[1].Recv(0, 7, 3, tag, 9)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int32][]byte{tagUp: big, tagDown: {}}[tag]; m.Sig != 9 || !bytes.Equal(m.Data, want) {
			t.Fatalf("step %d: sig %d, %d bytes; want sig 9, %d bytes", tag, m.Sig, len(m.Data), len(want))
		}
	}
	// Late: asked before it is sent.
	got := make(chan Msg)
	go func() {
		m, err := nets[0].Recv(1, 7, 4, tagRoot, 0)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	time.Sleep(10 * time.Millisecond)
	if err := nets[1].Send(0, 7, 4, tagRoot, Msg{Fault: uint64(errs.Count), Data: []byte("why")}); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Fault != uint64(errs.Count) || string(m.Data) != "why" {
		t.Fatalf("late message: %+v", m)
	}
	if nets[0].pending()+nets[1].pending() != 0 {
		t.Fatal("messages left behind")
	}
}

// TestNetCallsApart: calls of one communicator whose numbers differ by 2^32 share
// a mailbox key (callKey.short) but keep their messages apart, whichever comes
// first, and a mailbox key freed by one is found again by the other's messages.
func TestNetCallsApart(t *testing.T) {
	nets := mesh(2, make(chan struct{}))
	calls := []uint64{3, 3 + 1<<32, 3 + 2<<32}
	for i, seq := range calls {
		if err := nets[0].Send(1, 7, seq, tagUp, Msg{Sig: 9, Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := nets[1].pending(); got != len(calls) {
		t.Fatalf("%d messages kept, want %d", got, len(calls))
	}
	for _, i := range []int{0, 2, 1} { // the first one's leaves its key free, the others stay aliases
		m, err := nets[1].Recv(0, 7, calls[i], tagUp, 9)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Data, []byte{byte(i)}) {
			t.Fatalf("call %d got %v, want [%d]", calls[i], m.Data, i)
		}
		if i == 0 { // the key is free now: a message of that call comes again
			if err := nets[0].Send(1, 7, calls[1], tagDown, Msg{Sig: 9, Data: []byte{9}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m, err := nets[1].Recv(0, 7, calls[1], tagDown, 9); err != nil || !bytes.Equal(m.Data, []byte{9}) {
		t.Fatalf("second message of call %d: %v, %v; want [9]", calls[1], m.Data, err)
	}
	if got := nets[1].pending(); got != 0 {
		t.Fatalf("%d messages left behind", got)
	}
}

// TestNetAllocatesNothing: once warm, the messages of a stream of Barriers
// among procs (sent early or waited for, as the procs' goroutines interleave)
// allocate nothing: their mailboxes, boxes and watches are reused.
func TestNetAllocatesNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("counts every allocation of the process")
	}
	const procs, rounds = 3, 2000
	procOf := []int{0, 1, 2}
	nets := mesh(procs, make(chan struct{}))
	comms := make([]*Comm, procs)
	for p := range comms {
		comms[p] = New(nets[p], 5, procOf, coll.NewJob(), 0)
	}
	barriers := func(k int) {
		var wg sync.WaitGroup
		for r := range procOf {
			wg.Go(func() {
				for range k {
					if err := comms[r].Barrier(r); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	barriers(rounds) // warm: spares, the header pool, goroutine stacks
	// The goroutines and the WaitGroup of barriers cost a few, and so does the
	// runtime when a collection in between empties its caches (sudogs, pools):
	// the fewest of three tries counts. Allocating per message costs thousands.
	fewest := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		barriers(rounds)
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	if fewest > procs*8 {
		t.Errorf("%d allocations for %d Barriers of %d procs, want none but the goroutines'", fewest, rounds, procs)
	}
	for p, n := range nets {
		if k := n.pending(); k != 0 {
			t.Errorf("proc %d: %d messages left behind", p, k)
		}
	}
}

func TestNetRefuses(t *testing.T) {
	n := NewNet(0, make(chan struct{}), nil)
	read := func([]byte) error { return nil }
	for name, h := range map[string]wire.Header{
		"kind":  {Kind: wire.Eager, Len: 1, Frag: 1, SendReq: 1},
		"order": {Kind: wire.Coll, Len: 10, Frag: 5, Offset: 5},
		"huge":  {Kind: wire.Coll, Len: maxMsg + 1, Frag: 1},
	} {
		if err := n.deliver(1, &h, read); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	h := wire.Header{Kind: wire.Coll, Context: 1, Seq: 2, Tag: 3}
	if err := n.deliver(1, &h, read); err != nil {
		t.Fatal(err)
	}
	if err := n.deliver(1, &h, read); err == nil {
		t.Error("a second message of the same name was accepted")
	}
}

func TestNetEnds(t *testing.T) {
	aborted := make(chan struct{})
	lost := 0
	n := NewNet(0, aborted, func(p int) { lost = p })
	done := make(chan error)
	go func() { _, err := n.Recv(1, 1, 1, tagUp, 0); done <- err }()
	n.Lost(2, errors.New("gone"))
	if err := <-done; err != coll.ErrAborted || lost != 2 {
		t.Fatalf("Recv after Lost: %v (lost %d), want coll.ErrAborted (2)", err, lost)
	}
	n = NewNet(0, aborted, nil)
	go func() { _, err := n.Recv(1, 1, 1, tagUp, 0); done <- err }()
	close(aborted)
	if err := <-done; err != coll.ErrAborted {
		t.Fatalf("Recv after abort: %v, want coll.ErrAborted", err)
	}
}

// run runs fn as every rank of a communicator whose rank r lives in proc
// procOf[r], the procs joined by loop, and returns the ranks' errors.
func run(t *testing.T, procOf []int, fn func(c *Comm, rank int) error) []error {
	t.Helper()
	return runLeaving(t, procOf, false, fn)
}

// runLeaving is run that lets the collectives leave messages behind when leave
// is set: those of calls that the procs disagreed on, which nobody receives.
// The procs are in host mode (host.go) while hosted is set (inModes).
func runLeaving(t *testing.T, procOf []int, leave bool, fn func(c *Comm, rank int) error) []error {
	t.Helper()
	procs := slices.Max(procOf) + 1
	nets := mesh(procs, make(chan struct{}))
	if hosted {
		nets = hostMesh(procs, make(chan struct{}))
	}
	comms := make([]*Comm, procs)
	for p := range comms {
		comms[p] = New(nets[p], 5, procOf, coll.NewJob(), 0)
	}
	results := make([]error, len(procOf))
	var wg sync.WaitGroup
	for r, p := range procOf {
		wg.Go(func() { results[r] = fn(comms[p], r) })
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("a collective hangs")
	}
	for p, n := range nets {
		if k := n.pending(); k != 0 && !leave {
			t.Errorf("proc %d: %d messages left behind", p, k)
		}
		if hosted && procs > 1 && comms[p].host == nil {
			t.Errorf("proc %d is not in host mode", p)
		}
	}
	return results
}

// hosted has run put the procs in host mode.
var hosted bool

// inModes runs test twice: with the leaders on the channel, and in host mode,
// as procs of one host.
func inModes(t *testing.T, test func(t *testing.T)) {
	t.Run("channel", test)
	hosted = true
	defer func() { hosted = false }()
	t.Run("host", test)
}

// inLayouts runs fn as every rank r of a communicator of n ranks placed as each
// of layouts says, a subtest each, in both modes (inModes).
func inLayouts(t *testing.T, layouts [][]int, fn func(c *Comm, r, n int) error) {
	inModes(t, func(t *testing.T) {
		for _, procOf := range layouts {
			t.Run(fmt.Sprint(procOf), func(t *testing.T) {
				noErrors(t, run(t, procOf, func(c *Comm, r int) error { return fn(c, r, len(procOf)) }))
			})
		}
	})
}

// hostMesh returns mesh's Nets in host mode: every proc on one host, crowded
// if the procs outnumber the Ps.
func hostMesh(procs int, aborted <-chan struct{}) []*Net {
	nets := mesh(procs, aborted)
	for _, n := range nets {
		n.HostMode(func(int) int { return 0 }, procs > runtime.GOMAXPROCS(0), nil)
	}
	return nets
}

// noErrors fails t for each rank that returned an error.
func noErrors(t *testing.T, results []error) {
	t.Helper()
	for r, err := range results {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// layouts place ranks in procs: one each, consecutive blocks, uneven blocks,
// and interleaved (not consecutive).
var layouts = [][]int{{0, 1}, {0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1}, {0, 0, 1, 1, 2, 2, 3}, {0, 1, 2, 0, 1, 2, 0}, {2, 0, 1, 0}}

// firstFn is a non-commutative reduction on elements of two bytes: the first
// byte keeps the leftmost operand's (in op inout = in), so the result is rank 0's
// only if the rank order is kept; the second counts the operands.
var firstFn = coll.Op{Fold: first}

func first(in, inout []byte) {
	for i := 0; i+1 < len(in); i += 2 {
		inout[i], inout[i+1] = in[i], in[i+1]+inout[i+1]
	}
}

// withOneEach returns the layouts above and those of one rank in each of 1 to
// most procs.
func withOneEach(most int) [][]int {
	all := slices.Clone(layouts)
	for procs := 1; procs <= most; procs++ {
		oneEach := make([]int, procs)
		for p := range oneEach {
			oneEach[p] = p
		}
		all = append(all, oneEach)
	}
	return all
}

// TestBarrierHolds: no rank leaves a Barrier before every rank has come to it,
// for every count of procs up to 9 (the dissemination's rounds reach past the
// first power of two) and for the layouts above, with ranks arriving late at
// random.
func TestBarrierHolds(t *testing.T) {
	inModes(t, func(t *testing.T) {
		all := withOneEach(9)
		const rounds = 30
		for _, procOf := range all {
			n := len(procOf)
			t.Run(fmt.Sprint(procOf), func(t *testing.T) {
				var came [rounds]atomic.Int32
				noErrors(t, run(t, procOf, func(c *Comm, r int) error {
					rng := rand.New(rand.NewPCG(uint64(r), 7))
					for round := range rounds {
						if rng.IntN(4) == 0 {
							time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
						}
						came[round].Add(1)
						if err := c.Barrier(r); err != nil {
							return err
						}
						if k := came[round].Load(); k != int32(n) {
							return fmt.Errorf("round %d: left the Barrier when %d of %d ranks had come", round, k, n)
						}
					}
					return nil
				}))
			})
		}
	})
}

// matMul is a non-commutative reduction on 2x2 matrices of bytes (mod 256),
// four bytes each: inout = in x inout; with a fused fold, as the predefined
// operations have, that the procs and their leaders use alike.
var matMul = coll.Op{Fold: mul, Fold3: func(a, b, c, d, out []byte) {
	copy(out, d)
	mul(c, out)
	mul(b, out)
	mul(a, out)
}}

func mul(in, inout []byte) {
	for i := 0; i+3 < len(in); i += 4 {
		a, b := in[i:i+4], inout[i:i+4]
		b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3], a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
	}
}

// TestFoldOrder: a non-commutative Allreduce folds the ranks' operands in rank
// order on every rank, and a Reduce at its root whatever the root, for every
// count of procs up to 9 (the leaders' recursive doubling folds the first
// 2(P-pof2) procs in pairs first) and for the layouts above, with buffers of
// one to three matrices.
func TestFoldOrder(t *testing.T) {
	inModes(t, func(t *testing.T) {
		all := withOneEach(9)
		operand := func(r, k int) []byte { return []byte{1, byte(r + 1 + k), byte((r + 2*k) % 3), 1} }
		for _, procOf := range all {
			n := len(procOf)
			t.Run(fmt.Sprint(procOf), func(t *testing.T) {
				noErrors(t, run(t, procOf, func(c *Comm, r int) error {
					for mats := 1; mats <= 3; mats++ {
						send, want := make([]byte, 0, 4*mats), make([]byte, 0, 4*mats)
						for k := range mats {
							send = append(send, operand(r, k)...)
							prod := operand(n-1, k)
							for q := n - 2; q >= 0; q-- {
								mul(operand(q, k), prod)
							}
							want = append(want, prod...)
						}
						got := make([]byte, len(send))
						if err := c.Allreduce(r, send, got, 4, matMul, false); err != nil {
							return err
						}
						if !bytes.Equal(got, want) {
							return fmt.Errorf("Allreduce of %d matrices: %v, want %v", mats, got, want)
						}
						for root := range n {
							clear(got)
							if err := c.Reduce(r, send, got, 4, matMul, false, root); err != nil {
								return err
							}
							if r == root && !bytes.Equal(got, want) {
								return fmt.Errorf("Reduce of %d matrices to %d: %v, want %v", mats, root, got, want)
							}
						}
					}
					return nil
				}))
			})
		}
	})
}

func TestCollectives(t *testing.T) {
	inLayouts(t, layouts, func(c *Comm, r, n int) error {
		if err := c.Barrier(r); err != nil {
			return err
		}
		for root := range n {
			buf := make([]byte, 3)
			if r == root {
				buf = []byte{byte(root), 1, 2}
			}
			if err := c.Bcast(r, buf, 1, root); err != nil {
				return err
			}
			if !bytes.Equal(buf, []byte{byte(root), 1, 2}) {
				return fmt.Errorf("Bcast from %d: %v", root, buf)
			}
			for _, commutative := range []bool{false, true} {
				got := make([]byte, 2)
				if err := c.Reduce(r, []byte{byte(r), 1}, got, 2, firstFn, commutative, root); err != nil {
					return err
				}
				if r == root && (got[1] != byte(n) || !commutative && got[0] != 0) {
					return fmt.Errorf("Reduce to %d (commutative %v): %v, want [0 %d] ([x %[4]d] if commutative)", root, commutative, got, n)
				}
				if err := c.Allreduce(r, []byte{byte(r), 1}, got, 2, firstFn, commutative); err != nil {
					return err
				}
				if got[1] != byte(n) || (!commutative && got[0] != 0) {
					return fmt.Errorf("Allreduce: %v, want [0 %d]", got, n)
				}
			}
			all := make([]byte, 2*n)
			if err := c.Gather(r, []byte{byte(r), 9}, all, 1, root); err != nil {
				return err
			}
			if r == root && (all[0] != 0 || all[2*n-2] != byte(n-1)) {
				return fmt.Errorf("Gather to %d: %v", root, all)
			}
			if err := c.Allgather(r, []byte{byte(r), 9}, all, 1); err != nil {
				return err
			}
			for j := range n {
				if all[2*j] != byte(j) || all[2*j+1] != 9 {
					return fmt.Errorf("Allgather: %v", all)
				}
			}
		}
		return nil
	})
}

// TestBackToBack: small Bcasts and Reduces one after another, the root the same
// or rotating, while the last rank is sometimes slow to call: a local root (or a
// local Reduce's other ranks) may run ahead of its proc's ranks, but a leader
// must not, since each rank reads the outcome its leader published for the call.
func TestBackToBack(t *testing.T) {
	inModes(t, func(t *testing.T) {
		layouts := append(slices.Clone(layouts), []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3})
		for _, procOf := range layouts {
			n := len(procOf)
			for _, rotate := range []bool{false, true} {
				t.Run(fmt.Sprint(procOf, rotate), func(t *testing.T) {
					noErrors(t, run(t, procOf, func(c *Comm, r int) error {
						for i := range 3 * ring * n {
							root := 0
							if rotate {
								root = i % n
							}
							if r == n-1 && i%ring == 0 {
								time.Sleep(time.Millisecond)
							}
							buf := make([]byte, 8)
							if r == root {
								buf[0], buf[7] = byte(i), byte(root)
							}
							if err := c.Bcast(r, buf, 1, root); err != nil {
								return err
							}
							if buf[0] != byte(i) || buf[7] != byte(root) {
								return fmt.Errorf("Bcast %d from %d: %v", i, root, buf)
							}
							got := make([]byte, 2)
							if err := c.Reduce(r, []byte{byte(r), 1}, got, 2, firstFn, false, root); err != nil {
								return err
							}
							if r == root && !bytes.Equal(got, []byte{0, byte(n)}) {
								return fmt.Errorf("Reduce %d to %d: %v, want [0 %d]", i, root, got, n)
							}
						}
						return nil
					}))
				})
			}
		}
	})
}

// TestReduceLeavesAtOnce: a Reduce's ranks other than the root leave once their
// contribution is in, as in one proc, so they run ahead of their own leader (whose
// checks of their calls must still find them), and a root that is not its proc's
// leader waits for the outcome its leader publishes.
func TestReduceLeavesAtOnce(t *testing.T) {
	inModes(t, func(t *testing.T) {
		const calls = 40 // more than ring, fewer than paceEvery
		procOf := []int{0, 0, 1, 1}
		for _, root := range []int{0, 1} {
			t.Run(fmt.Sprint("root ", root), func(t *testing.T) {
				ahead := make(chan struct{}) // rank 3 has made every call
				noErrors(t, run(t, procOf, func(c *Comm, r int) error {
					late := false
					switch r {
					case 2: // rank 3's leader starts once rank 3 is done
						select {
						case <-ahead:
						case <-time.After(2 * time.Second):
							late = true
						}
					case root:
						if root != 0 {
							time.Sleep(10 * time.Millisecond) // its leader publishes after it waits
						}
					}
					for i := range calls {
						got := make([]byte, 2)
						if err := c.Reduce(r, []byte{byte(r), 1}, got, 2, firstFn, false, root); err != nil {
							return fmt.Errorf("Reduce %d: %w", i, err)
						}
						if r == root && !bytes.Equal(got, []byte{0, byte(len(procOf))}) {
							return fmt.Errorf("Reduce %d to %d: %v, want [0 %d]", i, root, got, len(procOf))
						}
					}
					if r == 3 {
						close(ahead)
					}
					if late {
						return errors.New("rank 3 waited for its leader in a Reduce it is not the root of")
					}
					return nil
				}))
			})
		}
	})
}

// TestReduceRootWaitEnds: a Reduce's root that waits for its leader's outcome is
// released with an error when the job ends or a proc is lost, even if the leader
// never comes.
func TestReduceRootWaitEnds(t *testing.T) {
	for _, end := range []string{"abort", "lost proc"} {
		t.Run(end, func(t *testing.T) {
			aborted := make(chan struct{})
			nets := mesh(2, aborted)
			c := New(nets[0], 5, []int{0, 0, 1}, coll.NewJob(), 0)
			done := make(chan error, 1)
			go func() { done <- c.Reduce(1, []byte{1, 1}, make([]byte, 2), 2, firstFn, false, 1) }()
			time.Sleep(10 * time.Millisecond) // rank 1 waits for rank 0, its leader, which never calls
			released(t, end, aborted, nets[0], done, "the root's Reduce")
		})
	}
}

// released ends the job (end "abort") or has net lose proc 1, and checks that
// the wait whose error done brings, what, ends with coll.ErrAborted.
func released(t *testing.T, end string, aborted chan struct{}, net *Net, done chan error, what string) {
	t.Helper()
	if end == "abort" {
		close(aborted)
	} else {
		net.Lost(1, errors.New("gone"))
	}
	select {
	case err := <-done:
		if err != coll.ErrAborted {
			t.Fatalf("%s: %v, want coll.ErrAborted", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still waits", what)
	}
}

func TestMismatch(t *testing.T) {
	inLayouts(t, layouts, func(c *Comm, r, n int) error {
		size := 4
		if r == n-1 {
			size = 6
		}
		err := c.Allreduce(r, make([]byte, size), make([]byte, size), 2, firstFn, false)
		var e *errs.Error
		if !errors.As(err, &e) || e.Class != errs.Count || e.Rank != r {
			return fmt.Errorf("Allreduce with rank %d's length differing: %v, want a Count error of rank %d", n-1, err, r)
		}
		if r == 0 {
			t.Log(err)
		}
		if err := moreMismatch(c, r, n); err != nil {
			return err
		}
		return c.Barrier(r) // the communicator still works
	})
}

// TestRunAheadBounded: a Bcast's root waits for nobody, but its leader waits at
// every paceEvery-th call for the other procs' leaders, so while a proc is slow to
// call, the root gets at most paceEvery calls ahead and the slow proc holds the
// messages of at most that many; once it calls, every Bcast arrives.
func TestRunAheadBounded(t *testing.T) {
	for _, procOf := range [][]int{{0, 1}, {0, 0, 1, 2, 2}} {
		t.Run(fmt.Sprint(procOf), func(t *testing.T) {
			const calls = 10 * paceEvery
			procs := slices.Max(procOf) + 1
			nets := mesh(procs, make(chan struct{}))
			comms := make([]*Comm, procs)
			for p := range comms {
				comms[p] = New(nets[p], 5, procOf, coll.NewJob(), 0)
			}
			var rootDone atomic.Int64
			hold := make(chan struct{})
			results := make([]error, len(procOf))
			var wg sync.WaitGroup
			for r, p := range procOf {
				wg.Go(func() {
					if p == procs-1 {
						<-hold // the last proc is slow to call
					}
					for i := range calls {
						buf := make([]byte, 8)
						if r == 0 {
							buf[0], buf[7] = byte(i), byte(i>>8)
						}
						if err := comms[p].Bcast(r, buf, 1, 0); err != nil {
							results[r] = err
							return
						}
						if buf[0] != byte(i) || buf[7] != byte(i>>8) {
							results[r] = fmt.Errorf("rank %d: Bcast %d got %v", r, i, buf)
							return
						}
						if r == 0 {
							rootDone.Add(1)
						}
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			if got := rootDone.Load(); got >= 2*paceEvery {
				t.Errorf("the root ran %d Bcasts ahead of a proc that made none, want fewer than %d", got, 2*paceEvery)
			}
			if got := nets[procs-1].pending(); got > 2*paceEvery {
				t.Errorf("the slow proc holds %d messages, want at most %d", got, 2*paceEvery)
			}
			close(hold)
			wg.Wait()
			noErrors(t, results)
			for p, n := range nets {
				if k := n.pending(); k != 0 {
					t.Errorf("proc %d: %d messages left behind", p, k)
				}
			}
		})
	}
}

// polled is a Sender whose messages reach their Net only when a rank of the
// receiving proc polls (netd.Poller): there is no receive daemon.
type polled struct {
	from  int
	nets  []*Net
	boxes []chan func() // per proc: deliveries waiting for a Poll
	polls *atomic.Int32 // ranks between PollBegin and PollEnd, all procs
}

func (p polled) Send(proc int, _ netd.Channel, h *wire.Header, payload []byte) error {
	hh := *h
	hh.Frag = uint32(len(payload))
	data := slices.Clone(payload)
	p.boxes[proc] <- func() {
		_ = p.nets[proc].deliver(p.from, &hh, func(b []byte) error { copy(b, data); return nil })
	}
	return nil
}

func (p polled) PollBegin() { p.polls.Add(1) }
func (p polled) PollEnd()   { p.polls.Add(-1) }

func (p polled) Poll() bool {
	select {
	case deliver := <-p.boxes[p.from]:
		deliver()
		return true
	default:
		return false
	}
}

func (p polled) Polls() bool { return true }

// TestRecvPolls: a Recv that waits polls the device for its message within the
// spin, so it completes with no receive daemon at all, and stops polling when
// it has it; without a spin it looks once.
func TestRecvPolls(t *testing.T) {
	nets := []*Net{NewNet(0, make(chan struct{}), nil), NewNet(1, make(chan struct{}), nil)}
	var polls atomic.Int32
	boxes := []chan func(){make(chan func(), 4), make(chan func(), 4)}
	for p, n := range nets {
		dev := polled{from: p, nets: nets, boxes: boxes, polls: &polls}
		n.Connect(dev)
		n.PollNet(dev, time.Minute)
	}
	got := make(chan Msg, 1)
	go func() {
		m, err := nets[1].Recv(0, 7, 1, tagRoot, 5)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	for deadline := time.Now().Add(10 * time.Second); polls.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Recv does not poll")
		}
	}
	if err := nets[0].Send(1, 7, 1, tagRoot, Msg{Sig: 5, Data: []byte("polled")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Data) != "polled" || m.Sig != 5 {
			t.Fatalf("got %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Recv did not poll its message in")
	}
	if n := polls.Load(); n != 0 {
		t.Fatalf("%d ranks still polling after the Recv", n)
	}

	// Without a spin (a crowded host), a Recv looks once before it parks: a
	// message that came meanwhile needs no daemon either.
	for p, n := range nets {
		n.PollNet(polled{from: p, nets: nets, boxes: boxes, polls: &polls}, 0)
	}
	if err := nets[0].Send(1, 7, 2, tagRoot, Msg{Sig: 5, Data: []byte("once")}); err != nil {
		t.Fatal(err)
	}
	go func() {
		m, err := nets[1].Recv(0, 7, 2, tagRoot, 5)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	select {
	case m := <-got:
		if string(m.Data) != "once" {
			t.Fatalf("got %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Recv did not look at the device before it parked")
	}
}
