package coll

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
)

// matmul multiplies 2x2 byte matrices (mod 256), inout = in x inout: associative
// but not commutative, so the result shows the order in which ranks were folded,
// four at a time (Fold3) as one by one (plainMatmul).
var matmul = Op{Fold: mul, Fold3: mul3}

// plainMatmul is matmul as a user's operation: no fused fold.
var plainMatmul = Op{Fold: mul}

// mul is matmul's fold.
func mul(in, inout []byte) {
	for i := 0; i+4 <= len(inout); i += 4 {
		a, b := in[i:i+4], inout[i:i+4]
		b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3], a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
	}
}

// mul3 is matmul's fused fold: out = a x (b x (c x d)); out may be d.
func mul3(a, b, c, d, out []byte) {
	copy(out, d)
	mul(c, out)
	mul(b, out)
	mul(a, out)
}

// matrix is rank r's contribution: a matrix that commutes with no other rank's.
func matrix(r int) []byte { return []byte{byte(r + 1), 1, 1, 0} }

// inOrder is the product of the ranks' matrices in rank order.
func inOrder(n int) []byte {
	acc := matrix(n - 1)
	for r := n - 2; r >= 0; r-- {
		mul(matrix(r), acc)
	}
	return acc
}

// reduceAll runs a Reduce on n ranks, rank r contributing send(r); first, if not
// negative, calls first and the others wait until it has joined, or opened the ring
// slot (a small Reduce through the slot counts its root in at the end). It returns
// the root's recv and every rank's error.
func reduceAll(c *Comm, n, root, first int, send func(r int) []byte, inPlace bool) ([]byte, []error) {
	errs := make([]error, n)
	var recv []byte
	var wg sync.WaitGroup
	joined := c.ranks[max(first, 0)].seq.Load()
	for r := range n {
		wg.Go(func() {
			if first >= 0 && r != first {
				joinedBy(c, first, joined)
			}
			s, out := send(r), []byte(nil)
			if r == root {
				out = make([]byte, len(s))
				if inPlace {
					copy(out, s)
					s = out
				}
				recv = out
			}
			errs[r] = c.Reduce(r, s, out, 4, matmul, root)
		})
	}
	wg.Wait()
	return recv, errs
}

// TestReduceSmall: a small Reduce folds in rank order at any root, in place or not.
func TestReduceSmall(t *testing.T) {
	const n = 4
	c := New(NewJob(), n, 0)
	for _, inPlace := range []bool{false, true} {
		for root := range n {
			got, errs := reduceAll(c, n, root, -1, matrix, inPlace)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("root %d, in place %v: rank %d: %v", root, inPlace, r, err)
				}
			}
			if want := inOrder(n); string(got) != string(want) {
				t.Errorf("root %d, in place %v: got %v, want %v", root, inPlace, got, want)
			}
		}
	}
}

// TestReduceSmallLengths: the root of a small Reduce whose ranks' lengths differ
// gets ErrCount naming a rank whose length is not the root's, whether that rank made
// the episode or came later, and the communicator goes on working.
func TestReduceSmallLengths(t *testing.T) {
	const n, root, bad = 4, 1, 2
	c := New(NewJob(), n, 0)
	for _, first := range []int{bad, root} {
		_, outcomes := reduceAll(c, n, root, first, func(r int) []byte {
			if r == bad {
				return make([]byte, 260) // too long for the slot, and for its wide area: through an episode
			}
			return make([]byte, 8)
		}, false)
		var e *errs.Error
		if err := outcomes[root]; !errors.As(err, &e) || e.Class != errs.Count || e.Peer != bad ||
			!strings.Contains(e.Detail, "the root has 2 elements, rank 2 has 65") {
			t.Errorf("%d made the episode: the root returned %v, want ErrCount naming rank %d", first, err, bad)
		}
		got, again := reduceAll(c, n, root, -1, matrix, false)
		for r, err := range again {
			if err != nil {
				t.Fatalf("after the error, rank %d: %v", r, err)
			}
		}
		if want := inOrder(n); string(got) != string(want) {
			t.Fatalf("after the error, got %v, want %v", got, want)
		}
	}
}

// TestRingStress: ranks racing through many small broadcasts and reductions, with
// the ring's slots made, replaced and their episodes reused all the while, each
// get every value of every call.
func TestRingStress(t *testing.T) {
	const n = 4
	rounds := laps(100)
	race(t, New(NewJob(), n, 0), rounds, func(c *Comm, r, i int) error {
		root := 0 // the root runs a lap ahead, waits for a slot, and races the others to make it
		if i >= rounds/2 {
			root = (i / 3) % n // runs of three calls with one root, as TMPI's combo
		}
		buf := []byte{byte(r), byte(i)}
		if r == root {
			buf[0] = byte(i * 7)
		}
		if err := c.Bcast(r, buf, 1, root); err != nil || buf[0] != byte(i*7) || buf[1] != byte(i) {
			return fmt.Errorf("Bcast %d: rank %d got %v (%v), want [%d %d]", i, r, buf, err, byte(i*7), byte(i))
		}
		if i < rounds/2 {
			return nil // broadcasts alone: the root runs ahead
		}
		out := make([]byte, 1)
		if err := c.Reduce(r, []byte{byte(i + r)}, out, 1, sum, root); err != nil {
			return fmt.Errorf("Reduce %d: rank %d: %v", i, r, err)
		}
		if want := byte(n*i + n*(n-1)/2); r == root && out[0] != want {
			return fmt.Errorf("Reduce %d: got %d, want %d", i, out[0], want)
		}
		return nil
	})
}

// laps returns how many calls make k laps of the ring: 4 with -short.
func laps(k int) int {
	if testing.Short() {
		k = 4
	}
	return k * ringSize
}

// race runs rounds calls of step on every rank of c at once, and fails the test
// with the first error a rank returns (that rank stops there).
func race(t *testing.T, c *Comm, rounds int, step func(c *Comm, r, i int) error) {
	t.Helper()
	fails := make(chan error, c.n)
	var wg sync.WaitGroup
	for r := range c.n {
		wg.Go(func() {
			for i := range rounds {
				if err := step(c, r, i); err != nil {
					fails <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
}

// sum adds bytes (mod 256).
var sum = Op{Fold: add}

func add(in, inout []byte) {
	for i := range inout {
		inout[i] += in[i]
	}
}

// joinedBy waits until rank r of c has joined collective seq, through an episode
// (it counts itself in) or through the slot (a rank has claimed it: the root of a
// Reduce or Gather there counts itself in only once every rank has).
func joinedBy(c *Comm, r int, seq uint64) {
	for c.ranks[r].seq.Load() == seq && c.claims[seq%ringSize].s.Load() != slotTag|(seq+1) {
		time.Sleep(time.Millisecond)
	}
}

// TestGatherSmallLengths: the root of a small Gather gets ErrTruncate (or ErrCount)
// naming the rank that sends more (or fewer) bytes than its block, whether that rank
// made the episode or came after the root, and the communicator goes on working.
// The other ranks leave once their block is in: they get the same error or none.
func TestGatherSmallLengths(t *testing.T) {
	const n, root, bad = 4, 1, 2
	c := New(NewJob(), n, 0)
	for _, tc := range []struct {
		first, length int
		class         errs.Class
		detail        string
	}{
		{bad, 12, errs.Truncate, "rank 2 sends 3 elements to rank 1, which expects 2"},
		{root, 12, errs.Truncate, "rank 2 sends 3 elements to rank 1, which expects 2"},
		{bad, 4, errs.Count, "rank 2 sends 1 elements to rank 1, which expects 2"},
		{root, 4, errs.Count, "rank 2 sends 1 elements to rank 1, which expects 2"},
	} {
		outcomes := make([]error, n)
		var wg sync.WaitGroup
		seq := c.ranks[tc.first].seq.Load()
		for r := range n {
			wg.Go(func() {
				if r != tc.first {
					joinedBy(c, tc.first, seq)
				}
				send, p := make([]byte, 8), Part{}
				if r == bad {
					send = make([]byte, tc.length)
				}
				p.Send = send
				if r == root {
					p.Recv, p.RecvBlock = make([]byte, 8*n), 8
				}
				outcomes[r] = c.Gather(r, &p, 4, root)
			})
		}
		wg.Wait()
		var e *errs.Error
		if err := outcomes[root]; !errors.As(err, &e) || e.Class != tc.class || e.Peer != bad || !strings.Contains(e.Detail, tc.detail) {
			t.Errorf("rank %d first, rank %d sending %d bytes: the root returned %v, want %v saying %q", tc.first, bad, tc.length, err, tc.class, tc.detail)
		}
		for r, err := range outcomes { // they leave at once, and learn of the fault only if it came first
			if r != root && err != nil && (!errors.As(err, &e) || e.Class != tc.class || e.Peer != bad) {
				t.Errorf("rank %d first, rank %d sending %d bytes: rank %d returned %v, want nil or the root's error", tc.first, bad, tc.length, r, err)
			}
		}
		checkGather(t, c, root)
	}
}

// TestGatherRootOdd: when the root of a small Gather expects blocks of another
// length than every other rank sends, through the slot or an episode (its blocks
// too long for the slot), first or after the others left, the root gets ErrCount
// (or ErrTruncate) naming a sender, and the others nothing or the same.
func TestGatherRootOdd(t *testing.T) {
	const n, root = 4, 1
	for _, tc := range []struct {
		block  int
		class  errs.Class
		detail string
	}{
		{12, errs.Count, "sends 2 elements to rank 1, which expects 3"},
		{4, errs.Truncate, "sends 2 elements to rank 1, which expects 1"},
	} {
		for _, rootFirst := range []bool{true, false} {
			c := New(NewJob(), n, 0)
			seq := c.ranks[root].seq.Load()
			outcomes := make([]error, n)
			var wg, others sync.WaitGroup
			others.Add(n - 1)
			for r := range n {
				wg.Go(func() {
					p := Part{Send: make([]byte, 8)}
					switch {
					case r == root:
						p.Send, p.Recv, p.RecvBlock = make([]byte, tc.block), make([]byte, n*tc.block), tc.block
						if !rootFirst {
							others.Wait()
						}
					case rootFirst:
						joinedBy(c, root, seq)
						fallthrough
					default:
						defer others.Done()
					}
					outcomes[r] = c.Gather(r, &p, 4, root)
				})
			}
			what := fmt.Sprintf("the root expecting %d bytes, first %v", tc.block, rootFirst)
			awaitRanks(t, &wg, 10*time.Second, what)
			var e *errs.Error
			if err := outcomes[root]; !errors.As(err, &e) || e.Class != tc.class || e.Peer == root || !strings.Contains(e.Detail, tc.detail) {
				t.Errorf("%s: the root returned %v, want %v saying %q", what, err, tc.class, tc.detail)
			}
			for r, err := range outcomes {
				if r != root && err != nil && (!errors.As(err, &e) || e.Class != tc.class) {
					t.Errorf("%s: rank %d returned %v, want nil or the root's error", what, r, err)
				}
			}
			checkGather(t, c, root)
		}
	}
}

// checkGather runs a correct small Gather on every rank of c.
func checkGather(t *testing.T, c *Comm, root int) {
	t.Helper()
	recv := make([]byte, 2*c.n)
	var wg sync.WaitGroup
	errs := make([]error, c.n)
	for r := range c.n {
		wg.Go(func() {
			p := Part{Send: []byte{byte(r), byte(10 + r)}}
			if r == root {
				p.Recv, p.RecvBlock = recv, 2
			}
			errs[r] = c.Gather(r, &p, 1, root)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("a correct Gather after the error: rank %d: %v", r, err)
		}
		if recv[2*r] != byte(r) || recv[2*r+1] != byte(10+r) {
			t.Fatalf("a correct Gather after the error: the root got %v", recv)
		}
	}
}

// TestScanSmallOddPiece: in a small Scan of 5 ranks, rank 2 needs ranks 0 and 1,
// which have both arrived, but rank 0's piece is missing (its length is not the
// maker's) and the rank recorded as odd is rank 3, which rank 2 does not need. Rank
// 2 must fail, not fold what the slab holds there. The order is forced: rank 1
// makes the episode and waits for rank 0, rank 3 records itself as odd and waits,
// rank 0 leaves, rank 2 comes (the episode's start still shut: rank 4 is missing),
// then rank 4. Every rank but rank 0, which needs nobody, learns of rank 3. (The
// pieces are long enough that the Scan goes through an episode, not the slot's
// wide area: 5 of them take more than wideBytes.)
func TestScanSmallOddPiece(t *testing.T) {
	const n = 5
	c := New(NewJob(), n, 0)
	scan := func(r, length int) error {
		send := make([]byte, length)
		copy(send, matrix(r))
		return c.Scan(r, &Part{Send: send, Recv: make([]byte, length)}, 4, matmul)
	}
	outcomes := make([]error, n)
	var wg sync.WaitGroup
	seq := c.ranks[1].seq.Load()
	const w = 256 // 5 pieces of it overflow the slot's wide area, as do 5 of rank 0's
	wg.Go(func() { outcomes[1] = scan(1, w) })
	joinedBy(c, 1, seq)
	e := c.ring[seq%ringSize].p.Load()
	wg.Go(func() { outcomes[3] = scan(3, 2*w) })
	for e.odd.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	outcomes[0] = scan(0, w-40)
	outcomes[2] = scan(2, w)
	outcomes[4] = scan(4, w)
	wg.Wait()
	if outcomes[0] != nil {
		t.Errorf("rank 0, which needs nobody, returned %v", outcomes[0])
	}
	for r := 1; r < n; r++ {
		var e *errs.Error
		if !errors.As(outcomes[r], &e) || e.Class != errs.Count || e.Peer != 3 {
			t.Errorf("rank %d returned %v, want ErrCount naming rank 3", r, outcomes[r])
		}
	}
	scanAll(t, c, n)
}

// scanAll runs a correct small Scan and Exscan of a non-commutative op on every
// rank of c and checks that each rank got the product of the ranks before it, in
// rank order.
func scanAll(t *testing.T, c *Comm, n int) {
	t.Helper()
	var wg sync.WaitGroup
	fails := make([]error, n)
	for r := range n {
		wg.Go(func() {
			in, ex := make([]byte, 4), make([]byte, 4)
			if err := c.Scan(r, &Part{Send: matrix(r), Recv: in}, 4, matmul); err != nil {
				fails[r] = err
				return
			}
			if err := c.Exscan(r, &Part{Send: matrix(r), Recv: ex}, 4, matmul); err != nil {
				fails[r] = err
				return
			}
			if want := inOrder(r + 1); string(in) != string(want) {
				fails[r] = fmt.Errorf("Scan: rank %d got %v, want %v", r, in, want)
			} else if want := inOrder(r); r > 0 && string(ex) != string(want) {
				fails[r] = fmt.Errorf("Exscan: rank %d got %v, want %v", r, ex, want)
			}
		})
	}
	wg.Wait()
	for _, err := range fails {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSmallExchangeStress: ranks racing through small Gathers, Scatters, Scans,
// Exscans, Allgathers and Alltoalls with rotating roots, their episodes' memory
// reused lap after lap of the ring, each get every value of every call.
func TestSmallExchangeStress(t *testing.T) {
	const n = 4
	rounds := laps(20)
	race(t, New(NewJob(), n, 0), rounds, func(c *Comm, r, i int) error {
		root := (i / 3) % n
		var recv []byte
		p := Part{Send: []byte{byte(i), byte(r)}}
		if r == root {
			recv = make([]byte, 2*n)
			p.Recv, p.RecvBlock = recv, 2
		}
		if err := c.Gather(r, &p, 1, root); err != nil {
			return fmt.Errorf("Gather %d: rank %d: %v", i, r, err)
		}
		for j := 0; r == root && j < n; j++ {
			if recv[2*j] != byte(i) || recv[2*j+1] != byte(j) {
				return fmt.Errorf("Gather %d: the root got %v", i, recv)
			}
		}
		got := make([]byte, 2)
		p = Part{Recv: got}
		if r == root {
			p.Send, p.SendBlock = make([]byte, 2*n), 2
			for j := range n {
				p.Send[2*j], p.Send[2*j+1] = byte(i), byte(j*7)
			}
		}
		if err := c.Scatter(r, &p, 1, root); err != nil || got[0] != byte(i) || got[1] != byte(r*7) {
			return fmt.Errorf("Scatter %d: rank %d got %v (%v), want [%d %d]", i, r, got, err, byte(i), byte(r*7))
		}
		out := make([]byte, 1)
		if err := c.Scan(r, &Part{Send: []byte{byte(i + r)}, Recv: out}, 1, sum); err != nil {
			return fmt.Errorf("Scan %d: rank %d: %v", i, r, err)
		}
		if want := byte((r+1)*i + r*(r+1)/2); out[0] != want {
			return fmt.Errorf("Scan %d: rank %d got %d, want %d", i, r, out[0], want)
		}
		if err := c.Exscan(r, &Part{Send: []byte{byte(i + r)}, Recv: out}, 1, sum); err != nil {
			return fmt.Errorf("Exscan %d: rank %d: %v", i, r, err)
		}
		if want := byte(r*i + r*(r-1)/2); r > 0 && out[0] != want {
			return fmt.Errorf("Exscan %d: rank %d got %d, want %d", i, r, out[0], want)
		}
		all := make([]byte, n)
		if err := c.Allgather(r, &Part{Send: []byte{byte(i + r)}, Recv: all, SendBlock: 1, RecvBlock: 1}, 1); err != nil {
			return fmt.Errorf("Allgather %d: rank %d: %v", i, r, err)
		}
		send := make([]byte, n)
		for j := range n {
			if all[j] != byte(i+j) {
				return fmt.Errorf("Allgather %d: rank %d got %v", i, r, all)
			}
			send[j] = byte(i + 10*r + j)
		}
		if err := c.Alltoall(r, &Part{Send: send, Recv: all, SendBlock: 1, RecvBlock: 1}, 1); err != nil {
			return fmt.Errorf("Alltoall %d: rank %d: %v", i, r, err)
		}
		for j := range n {
			if all[j] != byte(i+10*j+r) {
				return fmt.Errorf("Alltoall %d: rank %d got %v", i, r, all)
			}
		}
		return nil
	})
}

// TestAllreduceSmallEpisode: on more ranks that spin than the slot takes, an
// Allreduce of pieces that fit the line of an episode's arrivals together goes
// through that line and gives every rank the sum, in place or not.
func TestAllreduceSmallEpisode(t *testing.T) {
	const n, w = slotRanks + 2, nearBytes / (slotRanks + 2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1)) // a processor per rank
	c := New(NewJob(), n, 20*time.Microsecond)
	for _, inPlace := range []bool{false, true} {
		seq := c.ranks[0].seq.Load()
		recvs := make([][]byte, n)
		onEveryRank(t, c, 1, fmt.Sprintf("in place %v", inPlace), func(r, _ int) error {
			send := bytes.Repeat([]byte{byte(r + 1)}, w)
			recvs[r] = make([]byte, w)
			if inPlace {
				copy(recvs[r], send)
				send = recvs[r]
			}
			return c.Allreduce(r, send, recvs[r], 1, sum)
		})
		if e := c.ring[seq%ringSize].p.Load(); e == nil || e.seq != seq || !e.small {
			t.Fatalf("in place %v: the Allreduce did not go through a small episode", inPlace)
		}
		for r, got := range recvs {
			if want := bytes.Repeat([]byte{n * (n + 1) / 2}, w); !bytes.Equal(got, want) {
				t.Fatalf("in place %v: rank %d got %v, want %v", inPlace, r, got, want)
			}
		}
	}
}

// allreduceAll runs an Allreduce on c's n ranks, rank r contributing send(r), and
// returns every rank's recv and error, and the way it went: through the ring slot,
// a small episode or the general path.
func allreduceAll(c *Comm, send func(r int) []byte, inPlace bool) ([][]byte, []error, string) {
	n := c.Size()
	recvs, errs := make([][]byte, n), make([]error, n)
	seq := c.ranks[0].seq.Load()
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			s := send(r)
			recvs[r] = make([]byte, len(s))
			if inPlace {
				copy(recvs[r], s)
				s = recvs[r]
			}
			errs[r] = c.Allreduce(r, s, recvs[r], 4, matmul)
		})
	}
	wg.Wait()
	switch e := c.ring[seq%ringSize].p.Load(); {
	case held(c, seq):
		return recvs, errs, "slot"
	case e.small:
		return recvs, errs, "small"
	}
	return recvs, errs, "general"
}

// TestAllreduceSmall: an Allreduce of ranks that spin whose pieces fit the ring
// slot gives every rank the fold in rank order, in place or not, as the general
// path does past that many ranks; a rank whose length differs fails it on every
// rank, with a fault naming that rank's length (beside the length of the first to
// arrive, or of another rank that differs from it), and the communicator goes on
// working. (TestAllreduceSmallEpisode: the pieces of more ranks in the line of the
// arrivals.)
func TestAllreduceSmall(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(slotRanks + 2)) // a processor per rank
	for _, n := range []int{2, 4, slotRanks, slotRanks + 1} {
		c := New(NewJob(), n, 20*time.Microsecond)
		for _, inPlace := range []bool{false, true} {
			recvs, errs, way := allreduceAll(c, matrix, inPlace)
			want := "general"
			if c.slotFits(reduce, 4, 4) {
				want = "slot"
			}
			if way != want {
				t.Fatalf("%d ranks: went through %s, want %s", n, way, want)
			}
			for r := range n {
				if errs[r] != nil || string(recvs[r]) != string(inOrder(n)) {
					t.Fatalf("%d ranks, in place %v: rank %d got %v (%v), want %v", n, inPlace, r, recvs[r], errs[r], inOrder(n))
				}
			}
		}
		if !c.slotFits(reduce, 4, 4) {
			continue
		}
		bad := n - 1
		_, outcomes, _ := allreduceAll(c, func(r int) []byte {
			if r == bad {
				return make([]byte, 8)
			}
			return make([]byte, 4)
		}, false)
		for r, err := range outcomes {
			var e *errs.Error
			// Its length, or "more" when another found its episode before it found the slot.
			if !errors.As(err, &e) || e.Class != errs.Count || !strings.Contains(e.Detail, fmt.Sprintf("rank %d has 2", bad)) &&
				!strings.Contains(e.Detail, fmt.Sprintf("rank %d has more", bad)) {
				t.Errorf("%d ranks, rank %d's length differing: rank %d returned %v, want ErrCount naming it", n, bad, r, err)
			}
		}
		recvs, again, _ := allreduceAll(c, matrix, false)
		for r, err := range again {
			if err != nil || string(recvs[r]) != string(inOrder(n)) {
				t.Fatalf("%d ranks, after the error: rank %d got %v (%v)", n, r, recvs[r], err)
			}
		}
	}
}

// TestScanColumns: large Scans and Exscans (cut into columns: scanColumns) give
// every rank the product of its prefix in rank order, element by element, through
// pieces that do not divide the contributions evenly, lap after lap, spinning or
// not, on episodes that kept a small exchange's memory; the receive buffers'
// tails are left alone. A function that panics in one column fails every rank's
// call with ErrOp (none hangs), and the next Scan is right again.
func TestScanColumns(t *testing.T) {
	const length = 2*chunkBytes + 4*37 // 4-byte matrices, three columns
	contribution := func(r int) []byte {
		b := make([]byte, length)
		for i := 0; i < length; i += 4 {
			copy(b[i:], []byte{byte(r + 1 + i/4%7), 1, 1, byte(i / 4 % 2)})
		}
		return b
	}
	// prefix is the product, element by element in rank order, of ranks 0 to top.
	prefix := func(top int) []byte {
		acc := contribution(top)
		for r := top - 1; r >= 0; r-- {
			mul(contribution(r), acc)
		}
		return acc
	}
	run := func(c *Comm, n int, k kind, fn Op) ([][]byte, []error) {
		recvs, fails := make([][]byte, n), make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				recvs[r] = bytes.Repeat([]byte{0xEE}, length+4)
				p := &Part{Send: contribution(r), Recv: recvs[r]}
				if k == scan {
					fails[r] = c.Scan(r, p, 4, fn)
				} else {
					fails[r] = c.Exscan(r, p, 4, fn)
				}
			})
		}
		wg.Wait()
		return recvs, fails
	}
	// small is a small Alltoallv of one byte a block: its episode keeps its exchange.
	small := func(c *Comm, n int) {
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				ones, displs := slices.Repeat([]int{1}, n), make([]int, n)
				for i := range displs {
					displs[i] = i
				}
				p := &Part{Send: make([]byte, n), Recv: make([]byte, n), SendCounts: ones, SendDispls: displs, RecvCounts: ones, RecvDispls: displs}
				if err := c.Alltoallv(r, p, 1); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for _, n := range []int{3, 4, 17} {
		for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
			c := New(NewJob(), n, spin)
			// Laps of the ring: a Scan or Exscan in slot 1 in laps 2, 3, 6 and 7, each
			// on an episode that two laps before was a small exchange's, which kept its
			// exchange (laps 0, 1, 4, 5), and small exchanges everywhere else.
			for i := range 8 * ringSize {
				lap := i / ringSize
				if i%ringSize != 1 || lap%4 < 2 {
					small(c, n)
					continue
				}
				k := []kind{scan, exscan}[lap%2]
				recvs, fails := run(c, n, k, matmul)
				for r := range n {
					want, got := prefix(r), recvs[r]
					if k == exscan {
						want = nil
						if r > 0 {
							want = prefix(r - 1)
						}
					}
					switch {
					case fails[r] != nil:
						t.Fatalf("%d ranks, spin %v, lap %d, %v: rank %d: %v", n, spin, lap, k, r, fails[r])
					case want == nil && !bytes.Equal(got, bytes.Repeat([]byte{0xEE}, length+4)):
						t.Fatalf("%d ranks, spin %v, lap %d, Exscan: rank 0's receive buffer was written", n, spin, lap)
					case want != nil && !bytes.Equal(got[:length], want):
						i := 0
						for got[i] == want[i] {
							i++
						}
						t.Fatalf("%d ranks, spin %v, lap %d, %v: rank %d, byte %d: got %v, want %v", n, spin, lap, k, r, i, got[i&^3:i&^3+4], want[i&^3:i&^3+4])
					case !bytes.Equal(got[length:], []byte{0xEE, 0xEE, 0xEE, 0xEE}):
						t.Fatalf("%d ranks, spin %v, lap %d, %v: rank %d's tail was written: %v", n, spin, lap, k, r, got[length:])
					}
				}
			}
			for lap := range 20 { // a panic in the fold of one piece or another
				var calls atomic.Int64
				panicky := func(in, inout []byte) {
					if calls.Add(1) == int64(1+lap%5) {
						panic("a fold")
					}
					mul(in, inout)
				}
				_, fails := run(c, n, scan, Op{Fold: panicky})
				for r, err := range fails {
					var e *errs.Error
					if !errors.As(err, &e) || e.Class != errs.Op || !strings.Contains(e.Detail, "a fold") {
						t.Fatalf("%d ranks, spin %v: rank %d returned %v, want the panic as ErrOp", n, spin, r, err)
					}
				}
				if recvs, fails := run(c, n, scan, matmul); fails[n-1] != nil || !bytes.Equal(recvs[n-1][:length], prefix(n-1)) {
					t.Fatalf("%d ranks, spin %v: the Scan after the panic: %v", n, spin, fails[n-1])
				}
			}
		}
	}
}

// TestReduceEagerAll: a Reduce whose ranks' contributions fit reduceEagerAll in all
// lets every rank but the root return before the root comes, having left a copy (it
// clears its buffer once back), and the root folds the copies in rank order, lap
// after lap of the ring, the root moving each time.
func TestReduceEagerAll(t *testing.T) {
	for _, n := range []int{2, 4, 16} {
		w := reduceEagerAll / n
		contribution := func(lap, r int) []byte {
			b := make([]byte, w)
			for i := 0; i < w; i += 4 {
				copy(b[i:], []byte{byte(r + 1 + (lap+i/4)%5), 1, 1, byte(i / 4 % 2)})
			}
			return b
		}
		c := New(NewJob(), n, 0)
		for lap := range ringSize + 3 {
			root := lap % n
			fails := make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				if r != root {
					wg.Go(func() {
						send := contribution(lap, r)
						fails[r] = c.Reduce(r, send, nil, 4, matmul, root)
						clear(send)
					})
				}
			}
			left := make(chan struct{})
			go func() { wg.Wait(); close(left) }()
			early := true
			select {
			case <-left:
			case <-time.After(10 * time.Second):
				early = false
			}
			recv := make([]byte, w)
			fails[root] = c.Reduce(root, contribution(lap, root), recv, 4, matmul, root)
			<-left
			if !early {
				t.Fatalf("%d ranks of %d bytes, lap %d: the other ranks waited for the root", n, w, lap)
			}
			if err := errors.Join(fails...); err != nil {
				t.Fatalf("%d ranks, lap %d: %v", n, lap, err)
			}
			want := contribution(lap, n-1)
			for r := n - 2; r >= 0; r-- {
				mul(contribution(lap, r), want)
			}
			if !bytes.Equal(recv, want) {
				t.Fatalf("%d ranks, lap %d, root %d: the result differs from the fold in rank order", n, lap, root)
			}
		}
	}
}

// TestFoldFourAtATime: a long Reduce, Allreduce and ReduceScatterBlock, whose
// pieces the ranks combine, fold in rank order with an operation's fused fold
// (four ranks' pieces at a time, then three more at a time) as without one, at
// every root and in place or not, for counts of ranks that leave none, one or two
// ranks after the fused folds.
func TestFoldFourAtATime(t *testing.T) {
	const length = chunkBytes + 4*5 // a whole piece and a short one
	contribution := func(r int) []byte {
		b := make([]byte, length)
		for i := 0; i < length; i += 4 {
			copy(b[i:], []byte{byte(r + 1 + i/4%7), 1, 1, byte(i / 4 % 2)})
		}
		return b
	}
	for _, n := range []int{2, 3, 4, 5, 6, 8} {
		want := contribution(n - 1)
		for r := n - 2; r >= 0; r-- {
			mul(contribution(r), want)
		}
		c := New(NewJob(), n, 0)
		var fused3 atomic.Int64 // fused folds: the combining ranks make them from 4 ranks on
		counted := Op{Fold: mul, Fold3: func(a, b, c, d, out []byte) { fused3.Add(1); mul3(a, b, c, d, out) }}
		for _, op := range []Op{counted, plainMatmul} {
			fused := op.Fold3 != nil
			check := func(what string, r int, got []byte, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%d ranks, fused %v, %s: rank %d: %v", n, fused, what, r, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d ranks, fused %v, %s: rank %d's result differs from the fold in rank order", n, fused, what, r)
				}
			}
			fusedUsed := func(what string) {
				t.Helper()
				if used, can := fused3.Swap(0) > 0, fused && n >= 4; used != can {
					t.Fatalf("%d ranks, fused %v, %s: fused folds used %v, want %v", n, fused, what, used, can)
				}
			}
			for root := range n {
				for _, inPlace := range []bool{false, true} {
					recv := make([]byte, length)
					var wg sync.WaitGroup
					fails := make([]error, n)
					for r := range n {
						wg.Go(func() {
							send, out := contribution(r), []byte(nil)
							if r == root {
								out = recv
								if inPlace {
									copy(out, send)
									send = out
								}
							}
							fails[r] = c.Reduce(r, send, out, 4, op, root)
						})
					}
					wg.Wait()
					what := fmt.Sprintf("Reduce to %d, in place %v", root, inPlace)
					check(what, root, recv, errors.Join(fails...))
					fusedUsed(what)
				}
			}
			recvs, fails := make([][]byte, n), make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					recvs[r] = contribution(r)
					send := recvs[r] // in place on the odd ranks
					if r%2 == 0 {
						send = contribution(r)
					}
					fails[r] = c.Allreduce(r, send, recvs[r], 4, op)
				})
			}
			wg.Wait()
			for r := range n {
				check("Allreduce", r, recvs[r], fails[r])
			}
			fusedUsed("Allreduce")
			// ReduceScatterBlock: rank r's block j is contribution(r)'s, so that every
			// rank's result is want.
			for r := range n {
				wg.Go(func() {
					p := &Part{Send: bytes.Repeat(contribution(r), n), Recv: make([]byte, length), SendBlock: length}
					fails[r], recvs[r] = c.ReduceScatterBlock(r, p, 4, op), p.Recv
				})
			}
			wg.Wait()
			for r := range n {
				check("ReduceScatterBlock", r, recvs[r], fails[r])
			}
			fusedUsed("ReduceScatterBlock")
		}
	}
}

// TestScanSmallPanic: in a small Scan through an episode (elements of 64 bytes,
// which the slot does not take), a rank whose fold panics gets the panic as an
// ErrOp, and the communicator goes on working.
func TestScanSmallPanic(t *testing.T) {
	const n, elem = 4, 64
	c := New(NewJob(), n, 0)
	boom := Op{Fold: func(in, inout []byte) {
		if in[0] == 0xee {
			panic("a fold")
		}
		add(in, inout)
	}}
	scan := func(op Op, first byte) ([][]byte, []error) {
		recvs, fails := make([][]byte, n), make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				send := bytes.Repeat([]byte{1}, elem)
				if r == 1 {
					send[0] = first
				}
				recvs[r] = make([]byte, elem)
				fails[r] = c.Scan(r, &Part{Send: send, Recv: recvs[r]}, elem, op)
			})
		}
		wg.Wait()
		return recvs, fails
	}
	_, fails := scan(boom, 0xee)
	for r := 2; r < n; r++ { // ranks 2 and 3 fold rank 1's piece
		var e *errs.Error
		if !errors.As(fails[r], &e) || e.Class != errs.Op || !strings.Contains(e.Detail, "a fold") {
			t.Fatalf("rank %d returned %v, want the panic as ErrOp", r, fails[r])
		}
	}
	recvs, fails := scan(sum, 1)
	for r := range n {
		if fails[r] != nil || recvs[r][0] != byte(r+1) || recvs[r][elem-1] != byte(r+1) {
			t.Fatalf("the Scan after the panic: rank %d got %v, %v", r, recvs[r][:2], fails[r])
		}
	}
}
