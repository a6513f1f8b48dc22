package coll

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
)

// TestReduceInSlot: small Reduces go through the ring slot, lap after lap, at
// every root, and give every sum, with and without spinning ranks, their pieces in
// the slot's line or, at every other call, in its claim's line too.
func TestReduceInSlot(t *testing.T) {
	const n, calls = 4, 3 * ringSize
	piece := func(r, i int) []byte {
		p := []byte{byte(i), byte(r), 1, 2, 3, 4, 5, byte(r * i)}
		if i%2 == 1 {
			p = append(p, p...)
		}
		return p
	}
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		c := New(NewJob(), n, spin)
		got := make([][]byte, calls)
		onEveryRank(t, c, calls, fmt.Sprintf("spin %v: the Reduces", spin), func(r, i int) error {
			root, send, out := i%n, piece(r, i), []byte(nil)
			if r == root {
				out = make([]byte, len(send))
				got[i] = out
			}
			return c.Reduce(r, send, out, 1, sum, root)
		})
		for i, b := range got {
			want := make([]byte, len(piece(0, i)))
			for r := range n {
				add(piece(r, i), want)
			}
			if string(b) != string(want) {
				t.Fatalf("spin %v, call %d: root %d got %v, want %v", spin, i, i%n, b, want)
			}
		}
		if c.ring[0].lit.Load()&slotTag == 0 {
			t.Fatalf("spin %v: the Reduces did not go through the slot", spin)
		}
		// A small Bcast's root still leaves its copy in a slot that a Reduce held.
		s := c.ranks[0].seq.Load()
		onEveryRank(t, c, 1, fmt.Sprintf("spin %v: the Bcast after", spin), func(r, _ int) error {
			return c.Bcast(r, []byte{7}, 1, 0)
		})
		if !c.ring[s%ringSize].holds(s) {
			t.Fatalf("spin %v: the Bcast after the Reduces did not go through the slot", spin)
		}
	}
}

// TestGatherInSlot: small Gathers go through the ring slot, lap after lap, at every
// root, in place at the root or not, with and without spinning ranks, and every
// block lands where it belongs.
func TestGatherInSlot(t *testing.T) {
	const n, calls = 4, 3 * ringSize
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		c := New(NewJob(), n, spin)
		got := make([][]byte, calls)
		onEveryRank(t, c, calls, fmt.Sprintf("spin %v: the Gathers", spin), func(r, i int) error {
			root := i % n
			p := Part{Send: []byte{byte(i), byte(r), 7, byte(r * i)}}
			if r == root {
				p.Recv, p.RecvBlock = make([]byte, 4*n+3), 4 // longer than the blocks
				got[i] = p.Recv
				if i%3 == 0 { // in place
					copy(p.Recv[4*r:], p.Send)
					p.Send = p.Recv[4*r : 4*r+4]
				}
			}
			return c.Gather(r, &p, 1, root)
		})
		for i, b := range got {
			want := make([]byte, 4*n+3)
			for r := range n {
				copy(want[4*r:], []byte{byte(i), byte(r), 7, byte(r * i)})
			}
			if string(b) != string(want) {
				t.Fatalf("spin %v, call %d: root %d got %v, want %v", spin, i, i%n, b, want)
			}
		}
		if v, held := c.slotHeld(calls - 1); !held || slotKind(v) != gather {
			t.Fatalf("spin %v: the Gathers did not go through the slot", spin)
		}
	}
}

// onEveryRank runs call(r, i) for i from 0 to calls-1 on every rank r of c, each in a
// goroutine of its own, stopping a rank at its first error.
func onEveryRank(t *testing.T, c *Comm, calls int, what string, call func(r, i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	for r := range c.n {
		wg.Go(func() {
			for i := range calls {
				if err := call(r, i); err != nil {
					t.Errorf("%s, call %d: rank %d: %v", what, i, r, err)
					return
				}
			}
		})
	}
	awaitRanks(t, &wg, 20*time.Second, what)
}

// TestReduceInSlotFaults: when one rank's small Reduce differs from the others'
// (its length, both short enough for the slot, or too long for it; its root; its
// element size), or the rank calls another collective, the root gets an error,
// whether the odd rank is the root or not, and whoever came first; nobody hangs,
// and the communicator goes on working. (An odd rank other than the root may have
// left before anybody saw the difference, as the others of a small Reduce leave at
// once.)
func TestReduceInSlotFaults(t *testing.T) {
	const n, root, last = 4, 1, -2 // last: the odd rank calls once the others have returned
	type call func(c *Comm, r int) error
	reduce := func(send []byte, elem, root int) call {
		return func(c *Comm, r int) error {
			var out []byte
			if r == root {
				out = make([]byte, len(send))
			}
			return c.Reduce(r, send, out, elem, sum, root)
		}
	}
	cases := []struct {
		name     string
		odd      call
		class    errs.Class
		namesOdd bool // the root's error names the odd rank, when that is not the root
	}{
		{"length", reduce(make([]byte, 4), 1, root), errs.Count, true},
		{"long", reduce(make([]byte, 12), 1, root), errs.Count, true},
		{"root", reduce(make([]byte, 8), 1, 3), errs.Root, false},
		{"element size", reduce(make([]byte, 8), 2, root), errs.Count, false},
		{"Bcast", func(c *Comm, r int) error { return c.Bcast(r, make([]byte, 8), 1, 0) }, errs.Arg, false},
		{"Barrier", func(c *Comm, r int) error { return c.Barrier(r) }, errs.Arg, false},
		{"Gather", func(c *Comm, r int) error { // as short: through the slot too
			return c.Gather(r, &Part{Send: make([]byte, 8), Recv: make([]byte, 8*n), RecvBlock: 8}, 1, root)
		}, errs.Arg, false},
	}
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		for _, tc := range cases {
			for _, odd := range []int{2, root} {
				if odd == root && tc.name == "root" {
					continue // the root's own call names another root: nobody waits
				}
				for _, first := range []int{odd, 3, -1, last} {
					if first == last && odd != root {
						continue // the others wait for the odd rank
					}
					c := New(NewJob(), n, spin)
					s := c.ranks[0].seq.Load()
					opened := func() bool {
						return c.ranks[first].seq.Load() != s || c.claims[s%ringSize].s.Load() != 0
					}
					results := make([]error, n)
					var wg, others sync.WaitGroup
					others.Add(n - 1)
					for r := range n {
						wg.Go(func() {
							switch {
							case first == last && r == odd:
								others.Wait()
							case first == last:
								defer others.Done()
							}
							for first >= 0 && r != first && !opened() {
								time.Sleep(time.Millisecond)
							}
							if r == odd {
								results[r] = tc.odd(c, r)
							} else {
								results[r] = reduce(make([]byte, 8), 1, root)(c, r)
							}
						})
					}
					what := fmt.Sprintf("spin %v, odd %s at rank %d, first %d", spin, tc.name, odd, first)
					awaitRanks(t, &wg, 10*time.Second, what)
					var e *errs.Error
					if !errors.As(results[root], &e) || e.Class != tc.class || tc.namesOdd && odd != root && (e.Peer != odd || !strings.Contains(e.Detail, "rank 2 has")) {
						t.Fatalf("%s: the root returned %v, want an error of class %v", what, results[root], tc.class)
					}
					// And on: a Reduce of every rank through the slot.
					outs := make([]byte, 8)
					for r := range n {
						wg.Go(func() {
							var out []byte
							if r == root {
								out = outs
							}
							results[r] = c.Reduce(r, []byte{1, 1, 1, 1, 1, 1, 1, byte(r)}, out, 1, sum, root)
						})
					}
					awaitRanks(t, &wg, 10*time.Second, what+": the Reduce after")
					for r, err := range results {
						if err != nil {
							t.Fatalf("%s: the Reduce after: rank %d: %v", what, r, err)
						}
					}
					if want := []byte{n, n, n, n, n, n, n, 0 + 1 + 2 + 3}; string(outs) != string(want) {
						t.Fatalf("%s: the Reduce after gave %v, want %v", what, outs, want)
					}
				}
			}
		}
	}
}

// TestReduceInSlotAbort: a root waiting in the slot for a rank that never comes is
// released by Job.Abort with ErrAborted.
func TestReduceInSlotAbort(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		j := NewJob()
		c := New(j, 4, spin)
		done := make(chan error, 3)
		for r := range 3 {
			go func() {
				var out []byte
				if r == 0 {
					out = make([]byte, 8)
				}
				done <- c.Reduce(r, make([]byte, 8), out, 1, sum, 0)
			}()
		}
		for range 2 { // the others leave at once
			if err := <-done; err != nil {
				t.Fatalf("spin %v: a rank other than the root: %v", spin, err)
			}
		}
		defer func() { // and a rank that comes after the end gets ErrAborted
			if err := c.Reduce(3, make([]byte, 8), nil, 1, sum, 0); !errors.Is(err, ErrAborted) {
				t.Errorf("spin %v: the last rank, after Abort, returned %v, want ErrAborted", spin, err)
			}
		}()
		select {
		case err := <-done:
			t.Fatalf("spin %v: the root returned %v before the last rank came", spin, err)
		case <-time.After(50 * time.Millisecond):
		}
		j.Abort()
		select {
		case err := <-done:
			if !errors.Is(err, ErrAborted) {
				t.Fatalf("spin %v: the root returned %v, want ErrAborted", spin, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("spin %v: the root still waits after Abort", spin)
		}
	}
}

// TestScanInSlotFaults: when rank 1's small Scan differs from the others' (its
// length, both short enough for the slot, or too long for it), or rank 1 calls an
// Exscan or a Reduce, rank 3, which waits for rank 1's contribution, gets an error,
// whoever came first; nobody hangs, and Scans and Exscans go on giving every rank
// the product of the ranks before it, in rank order, through the slot.
func TestScanInSlotFaults(t *testing.T) {
	const n, odd, last = 4, 1, 3
	prefix := func(k kind, length int) func(c *Comm, r int) error {
		return func(c *Comm, r int) error {
			p := Part{Send: make([]byte, length), Recv: make([]byte, length)}
			copy(p.Send, matrix(r))
			if k == exscan {
				return c.Exscan(r, &p, 4, matmul)
			}
			return c.Scan(r, &p, 4, matmul)
		}
	}
	cases := []struct {
		name  string
		odd   func(c *Comm, r int) error
		class errs.Class
	}{
		{"length", prefix(scan, 8), errs.Count},
		{"long", prefix(scan, 12), errs.Count},
		{"Exscan", prefix(exscan, 4), errs.Arg},
		{"Reduce", func(c *Comm, r int) error { return c.Reduce(r, matrix(r), nil, 4, matmul, 0) }, errs.Arg},
	}
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		for _, tc := range cases {
			for _, first := range []int{odd, last, -1} {
				c := New(NewJob(), n, spin)
				s := c.ranks[0].seq.Load()
				opened := func() bool {
					return c.ranks[first].seq.Load() != s || c.claims[s%ringSize].s.Load() != 0
				}
				results := make([]error, n)
				var wg sync.WaitGroup
				for r := range n {
					wg.Go(func() {
						for first >= 0 && r != first && !opened() {
							time.Sleep(time.Millisecond)
						}
						if r == odd {
							results[r] = tc.odd(c, r)
						} else {
							results[r] = prefix(scan, 4)(c, r)
						}
					})
				}
				what := fmt.Sprintf("spin %v, odd %s, first %d", spin, tc.name, first)
				awaitRanks(t, &wg, 10*time.Second, what)
				var e *errs.Error
				if !errors.As(results[last], &e) || e.Class != tc.class {
					t.Fatalf("%s: rank %d returned %v, want an error of class %v", what, last, results[last], tc.class)
				}
				scanAll(t, c, n)
			}
		}
	}
}

// TestEveryoneInSlot: on ranks with a processor each, Barriers and Allreduces go
// through the slot, lap after lap, and give every rank the fold in rank order; a
// rank calling a Barrier where the others call an Allreduce gets an error, as does
// every other rank, whoever came first; Job.Abort releases ranks waiting there.
func TestEveryoneInSlot(t *testing.T) {
	const n = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	c := New(NewJob(), n, 20*time.Microsecond)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for i := range 2 * ringSize {
				if err := c.Barrier(r); err != nil {
					t.Errorf("Barrier %d: rank %d: %v", i, r, err)
					return
				}
				got := make([]byte, 4)
				if err := c.Allreduce(r, matrix(r), got, 4, matmul); err != nil || string(got) != string(inOrder(n)) {
					t.Errorf("Allreduce %d: rank %d got %v (%v), want %v", i, r, got, err, inOrder(n))
					return
				}
			}
		})
	}
	awaitRanks(t, &wg, 20*time.Second, "the Barriers and Allreduces")
	if s := c.ranks[0].seq.Load() - 1; !held(c, s) {
		t.Fatal("the Allreduces did not go through the slot")
	}
	for _, first := range []int{1, 3, -1} {
		s := c.ranks[0].seq.Load()
		results := make([]error, n)
		for r := range n {
			wg.Go(func() {
				for first >= 0 && r != first && c.ranks[first].seq.Load() == s && c.claims[s%ringSize].s.Load() != slotTag|(s+1) {
					time.Sleep(time.Millisecond)
				}
				if r == 1 {
					results[r] = c.Barrier(r)
				} else {
					results[r] = c.Allreduce(r, matrix(r), make([]byte, 4), 4, matmul)
				}
			})
		}
		awaitRanks(t, &wg, 10*time.Second, fmt.Sprintf("first %d: a Barrier among Allreduces", first))
		for r, err := range results {
			var e *errs.Error
			if !errors.As(err, &e) || e.Class != errs.Arg {
				t.Fatalf("first %d: a Barrier among Allreduces: rank %d returned %v, want an error of class %v", first, r, err, errs.Arg)
			}
		}
	}
	j := NewJob()
	c = New(j, n, 20*time.Microsecond)
	done := make(chan error, n-1)
	for r := range n - 1 {
		go func() { done <- c.Barrier(r) }()
	}
	time.Sleep(50 * time.Millisecond)
	j.Abort()
	for range n - 1 {
		select {
		case err := <-done:
			if !errors.Is(err, ErrAborted) {
				t.Fatalf("a rank waiting in the slot's Barrier returned %v, want ErrAborted", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a rank still waits in the slot's Barrier after Abort")
		}
	}
}

// TestExchangeInSlot: on ranks that spin, small Allgathers, Alltoalls and
// ReduceScatterBlocks go through the ring slot lap after lap, in place or not, and
// every block lands where it belongs, each reduction in rank order; a rank whose blocks are of another length (short enough for the slot or
// not), or that calls the other of the two, gives every rank an error, whoever
// comes first, and the communicator goes on working.
func TestExchangeInSlot(t *testing.T) {
	const n = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	c := New(NewJob(), n, 20*time.Microsecond)
	gatherAll := func(r, i, b int) error {
		p := Part{Send: make([]byte, b), Recv: make([]byte, n*b), RecvBlock: b}
		for k := range b {
			p.Send[k] = byte(10*i + r + k)
		}
		if i%3 == 0 { // in place
			copy(p.Recv[r*b:], p.Send)
			p.Send = p.Recv[r*b : (r+1)*b]
		}
		if err := c.Allgather(r, &p, 1); err != nil {
			return err
		}
		for j := range n {
			for k := range b {
				if p.Recv[j*b+k] != byte(10*i+j+k) {
					return fmt.Errorf("Allgather %d: rank %d got %v", i, r, p.Recv)
				}
			}
		}
		return nil
	}
	toAll := func(r, i, b int) error {
		p := Part{Send: make([]byte, n*b), Recv: make([]byte, n*b), SendBlock: b, RecvBlock: b}
		for k := range p.Send {
			p.Send[k] = byte(i + 10*r + k)
		}
		if err := c.Alltoall(r, &p, 1); err != nil {
			return err
		}
		for j := range n {
			for k := range b {
				if p.Recv[j*b+k] != byte(i+10*j+r*b+k) {
					return fmt.Errorf("Alltoall %d: rank %d got %v", i, r, p.Recv)
				}
			}
		}
		return nil
	}
	block := func(r, j int) []byte { // block j of rank r's ReduceScatterBlock: matrix(r) to the power j+1
		m := matrix(r)
		for range j {
			mul(matrix(r), m)
		}
		return m
	}
	scatterAll := func(r, i int) error {
		p := Part{Send: make([]byte, 4*n), Recv: make([]byte, 4), SendBlock: 4}
		for j := range n {
			copy(p.Send[4*j:], block(r, j))
		}
		if err := c.ReduceScatterBlock(r, &p, 4, matmul); err != nil {
			return err
		}
		want := block(n-1, r)
		for j := n - 2; j >= 0; j-- {
			mul(block(j, r), want)
		}
		if string(p.Recv) != string(want) {
			return fmt.Errorf("ReduceScatterBlock %d: rank %d got %v, want %v", i, r, p.Recv, want)
		}
		return nil
	}
	onEveryRank(t, c, 2*ringSize, "the Allgathers, Alltoalls and ReduceScatterBlocks", func(r, i int) error {
		if err := gatherAll(r, i, 8); err != nil {
			return err
		}
		if err := toAll(r, i, 2); err != nil {
			return err
		}
		return scatterAll(r, i)
	})
	var wg sync.WaitGroup
	for back, k := range []kind{reduceScatterBlock, alltoall, allgather} {
		if v, ok := c.slotHeld(c.ranks[0].seq.Load() - 1 - uint64(back)); !ok || slotKind(v) != k {
			t.Fatalf("the %vs did not go through the slot", k)
		}
	}
	longBlocks := func(r int) error { // too long for the slot: through an episode
		return c.ReduceScatterBlock(r, &Part{Send: make([]byte, 64*n), Recv: make([]byte, 64), SendBlock: 64}, 4, matmul)
	}
	for _, tc := range []struct {
		name string
		odd  func(r int) error
		want errs.Class
		rest func(r int) error // the others' call, when not an Allgather of 8-byte blocks
	}{
		{"short blocks", func(r int) error { return gatherAll(r, 1, 4) }, errs.Count, nil},
		{"long blocks", func(r int) error { return gatherAll(r, 1, 16) }, errs.Count, nil},
		{"Alltoall", func(r int) error { return toAll(r, 1, 2) }, errs.Arg, nil},
		{"long ReduceScatterBlock blocks", longBlocks, errs.Count, func(r int) error { return scatterAll(r, 1) }},
	} {
		for _, first := range []int{1, 3, -1} {
			s := c.ranks[0].seq.Load()
			results := make([]error, n)
			for r := range n {
				wg.Go(func() {
					if first >= 0 && r != first {
						for c.ranks[first].seq.Load() == s && c.claims[s%ringSize].s.Load() != slotTag|(s+1) {
							time.Sleep(time.Millisecond)
						}
					}
					switch {
					case r == 1:
						results[r] = tc.odd(r)
					case tc.rest != nil:
						results[r] = tc.rest(r)
					default:
						results[r] = gatherAll(r, 1, 8)
					}
				})
			}
			what := fmt.Sprintf("%s at rank 1, first %d", tc.name, first)
			awaitRanks(t, &wg, 10*time.Second, what)
			for r, err := range results {
				var e *errs.Error
				if !errors.As(err, &e) || e.Class != tc.want {
					t.Fatalf("%s: rank %d returned %v, want an error of class %v", what, r, err, tc.want)
				}
			}
			for r := range n {
				wg.Go(func() {
					if err := gatherAll(r, 2, 8); err != nil {
						t.Errorf("%s: the Allgather after: %v", what, err)
					}
				})
			}
			awaitRanks(t, &wg, 10*time.Second, what+": the Allgather after")
		}
	}
}

// held reports whether a small reduction went through episode s's slot.
func held(c *Comm, s uint64) bool {
	_, ok := c.slotHeld(s)
	return ok
}

// TestSlotStaleWord: a Reduce's word left in a slot, every bit set, with its
// pieces still there, whose episode number's low bits are those of a later
// episode of the slot (as if 2^16 collectives had gone by without touching it), is
// not taken for that episode's Reduce: the episode that uses the slot next,
// through an episode of its own, clears it.
func TestSlotStaleWord(t *testing.T) {
	const n, root = 4, 2
	const start, later = ringSize, 2 * ringSize // episodes of slot 0
	c := New(NewJob(), n, 0)                    // no spin: Barriers go through episodes
	for r := range n {
		c.ranks[r].seq.Store(start)
	}
	c.ring[0].lit.Store(slotWord(later, reduce, root, 8, 1, 0) | 1<<n - 1)
	copy(c.ring[0].data[:], "stale pieces of another Reduce..")
	got := make([]byte, 8)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for range later - start {
				if err := c.Barrier(r); err != nil {
					t.Errorf("rank %d: %v", r, err)
					return
				}
			}
			var out []byte
			if r == root {
				out = got
			}
			if err := c.Reduce(r, []byte{1, 2, 3, 4, 5, 6, 7, byte(r)}, out, 1, sum, root); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		})
	}
	awaitRanks(t, &wg, 10*time.Second, "the Barriers and the Reduce")
	if want := []byte{n, 2 * n, 3 * n, 4 * n, 5 * n, 6 * n, 7 * n, 0 + 1 + 2 + 3}; string(got) != string(want) {
		t.Fatalf("the root got %v, want %v", got, want)
	}
}

// TestGathervInSlot: Gathervs of blocks of every length, short enough for their
// piece of the slot, for their share of its wide area (up to 256 bytes), or set
// aside (as a copy up to asideEager bytes, or thousands itself), in place or
// not, to every root in turn, with ranks that spin or not, go through the slot and
// land where the root's counts and displacements say, even though every non-root
// scribbles over its block once its call returns; a block of another length than
// the root's count for it gives the root an error naming its rank, which a rank
// whose block the root copies from its buffer learns too, and the next Gatherv
// works.
func TestGathervInSlot(t *testing.T) {
	const n, calls = 4, 300
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	length := func(r, i int) int {
		switch {
		case (i+r)%17 == 0:
			return 3000 + r
		case (i+r)%7 == 0: // 250-262 bytes: the wide area's share up to 256, then set aside as a copy
			return 250 + (i+r)%13
		}
		return (i*3 + r) % 24 // from 18 bytes on, in the wide area
	}
	fill := func(r, i int, b []byte) {
		for k := range b {
			b[k] = byte(i + 7*r + k)
		}
	}
	call := func(c *Comm, r, i, root int, bad int) error {
		p := Part{Send: make([]byte, length(r, i))}
		fill(r, i, p.Send)
		if r != root {
			err := c.Gatherv(r, &p, 1, root)
			clear(p.Send) // the root has the block, or a copy of it
			return err
		}
		counts, displs, at := make([]int, n), make([]int, n), 0
		for j := n - 1; j >= 0; j-- { // blocks in reverse rank order, a gap after each
			counts[j], displs[j] = length(j, i), at
			at += counts[j] + 1
		}
		if bad >= 0 {
			counts[bad]++
		}
		p.Recv, p.RecvCounts, p.RecvDispls = make([]byte, at), counts, displs
		if i%5 == 0 { // in place
			copy(p.Recv[displs[r]:], p.Send)
			p.Send = p.Recv[displs[r] : displs[r]+len(p.Send)]
		}
		if err := c.Gatherv(r, &p, 1, root); err != nil || bad >= 0 {
			return err
		}
		if err := blocksLanded(p.Recv, counts, displs, func(j int, b []byte) { fill(j, i, b) }); err != nil {
			return fmt.Errorf("Gatherv %d to %d: %w", i, root, err)
		}
		return nil
	}
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		c := New(NewJob(), n, spin)
		onEveryRank(t, c, calls, fmt.Sprintf("spin %v", spin), func(r, i int) error {
			return call(c, r, i, i%n, -1)
		})
		s := c.ranks[0].seq.Load() - 1
		if v, held := c.slotHeld(s); !held || slotKind(v) != gatherv {
			t.Fatalf("spin %v: the last Gatherv's slot holds %#x, want a Gatherv's word", spin, v)
		}
		// In the last call, rank 2's block of 252 bytes lay in the wide area.
		if piece := c.slotPiece(s, 2, c.stride); length(2, calls-1) != 252 || piece[0] != gathervWide ||
			int(piece[1])|int(piece[2])<<8 != 252 {
			t.Fatalf("spin %v: rank 2's piece of the last Gatherv starts %v, want the wide area's mark and 252", spin, piece[:3])
		}
		// The root counts one more element from rank bad: at call 15 rank 2's block
		// is 3002 bytes (set aside itself), rank 1's 22 (in the wide area), rank 3's
		// empty; at call 20 rank 1's is 258 (a copy set aside).
		for _, bad := range []struct{ i, rank int }{{15, 2}, {15, 1}, {15, 3}, {20, 1}} {
			const root = 0
			i := bad.i
			results := make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() { results[r] = call(c, r, i, root, bad.rank) })
			}
			awaitRanks(t, &wg, 10*time.Second, fmt.Sprintf("spin %v, call %d, bad %d", spin, i, bad.rank))
			var e *errs.Error
			if !errors.As(results[root], &e) || e.Class != errs.Count || e.Peer != bad.rank || e.Rank != root {
				t.Fatalf("spin %v, call %d, bad %d: the root returned %v, want ErrCount naming rank %d", spin, i, bad.rank, results[root], bad.rank)
			}
			for r := 1; r < n; r++ {
				waits := length(r, i) > asideEager
				if waits && !errors.As(results[r], &e) || !waits && results[r] != nil {
					t.Fatalf("spin %v, call %d, bad %d: rank %d (waits for the root: %v) returned %v", spin, i, bad.rank, r, waits, results[r])
				}
			}
			onEveryRank(t, c, 3, fmt.Sprintf("spin %v, after call %d, bad %d", spin, bad.i, bad.rank), func(r, i int) error {
				return call(c, r, i, 1, -1)
			})
		}
	}
}

// TestAllgathervInSlot: on ranks that spin, Allgathervs whose blocks fit the slot
// go through it lap after lap (with blocks too long for it between them, through
// an episode), in place or not, every block landing where the counts and
// displacements say; a rank sending more or fewer elements than its counts say
// gives every rank an error; a rank whose counts for another's block differ from
// that block learns it; and the communicator goes on working.
func TestAllgathervInSlot(t *testing.T) {
	const n, calls = 4, 300
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	c := New(NewJob(), n, 20*time.Microsecond)
	count := func(j, i int) int {
		if i%7 == 0 && j == 2 {
			return 40 // too long for the slot: every rank goes through an episode
		}
		return (i + j) % 5
	}
	fill := func(j, i int, b []byte) {
		for k := range b {
			b[k] = byte(3*i + 11*j + k)
		}
	}
	// call is rank r's Allgatherv number i, whose block has extra bytes and whose
	// count for rank 3 is off by skew.
	call := func(r, i, extra, skew int) error {
		counts, displs, at := make([]int, n), make([]int, n), 1
		for j := n - 1; j >= 0; j-- {
			counts[j], displs[j] = count(j, i), at
			at += counts[j] + 2
		}
		counts[3] += skew
		p := Part{Send: make([]byte, count(r, i)+extra), Recv: make([]byte, at+4), RecvCounts: counts, RecvDispls: displs}
		fill(r, i, p.Send)
		if i%4 == 1 && extra == 0 { // in place
			copy(p.Recv[displs[r]:], p.Send)
			p.Send = p.Recv[displs[r] : displs[r]+len(p.Send)]
		}
		if err := c.Allgatherv(r, &p, 1); err != nil {
			return err
		}
		if err := blocksLanded(p.Recv, counts, displs, func(j int, b []byte) { fill(j, i, b) }); err != nil {
			return fmt.Errorf("Allgatherv %d: rank %d: %w", i, r, err)
		}
		return nil
	}
	onEveryRank(t, c, calls, "laps", func(r, i int) error { return call(r, i, 0, 0) })
	if v, held := c.slotHeld(c.ranks[0].seq.Load() - 1); !held || slotKind(v) != allgatherv {
		t.Fatalf("the last Allgatherv's slot holds %#x, want an Allgatherv's word", v)
	}
	faults := []struct {
		name        string
		extra, skew int // of rank 0's block; of rank 1's count for rank 3
		class       errs.Class
		everyRank   bool
	}{
		{"longer block", 1, 0, errs.Truncate, true},
		{"longer than a piece", 9, 0, errs.Truncate, true},
		{"shorter block", -1, 0, errs.Count, true},
		{"counts differ", 0, -1, errs.Truncate, false},
		{"counts differ, longest", 0, 9, errs.Count, true}, // pieces of another length: the word differs
	}
	for _, tc := range faults {
		const i = 3 // blocks of 3, 4, 0 and 1 bytes
		results := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				extra, skew := 0, 0
				if r == 0 {
					extra = tc.extra
				}
				if r == 1 {
					skew = tc.skew
				}
				results[r] = call(r, i, extra, skew)
			})
		}
		awaitRanks(t, &wg, 10*time.Second, tc.name)
		for r := range n {
			var e *errs.Error
			switch failed := errors.As(results[r], &e); {
			case (tc.everyRank || r == 1) && (!failed || e.Class != tc.class):
				t.Fatalf("%s: rank %d returned %v, want an error of class %v", tc.name, r, results[r], tc.class)
			case !tc.everyRank && r != 1 && results[r] != nil:
				t.Fatalf("%s: rank %d returned %v, want nil", tc.name, r, results[r])
			case tc.extra != 0 && (e.Peer != 0 || !strings.Contains(e.Detail, "rank 0 sends") || !strings.Contains(e.Detail, "its counts give")):
				t.Fatalf("%s: rank %d returned %v, want rank 0 named", tc.name, r, results[r])
			}
		}
		onEveryRank(t, c, 3, "after "+tc.name, func(r, i int) error { return call(r, i+1, 0, 0) })
	}
}

// blocksLanded checks that block j of recv (at displs[j], counts[j] bytes) holds
// what fill(j) writes.
func blocksLanded(recv []byte, counts, displs []int, fill func(j int, b []byte)) error {
	for j := range counts {
		want := make([]byte, counts[j])
		fill(j, want)
		if got := recv[displs[j] : displs[j]+counts[j]]; !bytes.Equal(got, want) {
			return fmt.Errorf("block %d is %v, want %v", j, got, want)
		}
	}
	return nil
}

// TestWideSlot: small collectives whose pieces are too long for the slot's lines go
// through its wide area, up to wideBytes of pieces in all, on 2 and 4 ranks that
// spin or not, lap after lap, and every result is right, every reduction in rank
// order; with pieces a word longer they take an episode instead, and are right too.
func TestWideSlot(t *testing.T) {
	const calls = 3 * ringSize
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(5))
	// piece is rank r's contribution to call i: w/4 matrices that commute with no
	// other rank's, each of them different.
	piece := func(r, i, w int) []byte {
		b := make([]byte, w)
		for k := 0; k < w; k += 4 {
			copy(b[k:], []byte{byte(r + 1), byte(i + k), 1, 0})
		}
		return b
	}
	// folded is the product of ranks from to to's pieces, in rank order.
	folded := func(from, to, i, w int) []byte {
		acc := piece(to, i, w)
		for r := to - 1; r >= from; r-- {
			mul(piece(r, i, w), acc)
		}
		return acc
	}
	for _, n := range []int{2, 4} {
		for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
			for _, w := range []int{36, wideBytes / n, wideBytes/n + 4} {
				c := New(NewJob(), n, spin)
				what := fmt.Sprintf("%d ranks, spin %v, %d-byte pieces", n, spin, w)
				onEveryRank(t, c, calls, what, func(r, i int) error {
					root := i % n
					var out []byte
					if r == root {
						out = make([]byte, w)
					}
					if err := c.Reduce(r, piece(r, i, w), out, 4, matmul, root); err != nil {
						return err
					}
					if r == root && string(out) != string(folded(0, n-1, i, w)) {
						return fmt.Errorf("Reduce: the root got %v", out[:8])
					}
					p := Part{Send: piece(r, i, w), Recv: make([]byte, w)}
					if err := c.Scan(r, &p, 4, matmul); err != nil || string(p.Recv) != string(folded(0, r, i, w)) {
						return fmt.Errorf("Scan: got %v (%v)", p.Recv[:8], err)
					}
					p = Part{Send: piece(r, i, w), Recv: make([]byte, w)}
					if err := c.Exscan(r, &p, 4, matmul); err != nil || r > 0 && string(p.Recv) != string(folded(0, r-1, i, w)) {
						return fmt.Errorf("Exscan: got %v (%v)", p.Recv[:8], err)
					}
					p = Part{Send: piece(r, i, w)}
					if r == root {
						p.Recv, p.RecvBlock = make([]byte, n*w), w
					}
					if err := c.Gather(r, &p, 1, root); err != nil {
						return err
					}
					for j := 0; r == root && j < n; j++ {
						if string(p.Recv[j*w:(j+1)*w]) != string(piece(j, i, w)) {
							return fmt.Errorf("Gather: block %d is %v", j, p.Recv[j*w:j*w+8])
						}
					}
					all := make([]byte, w)
					if err := c.Allreduce(r, piece(r, i, w), all, 4, matmul); err != nil || string(all) != string(folded(0, n-1, i, w)) {
						return fmt.Errorf("Allreduce: got %v (%v)", all[:8], err)
					}
					p = Part{Send: piece(r, i, w), Recv: make([]byte, n*w), RecvBlock: w}
					if err := c.Allgather(r, &p, 1); err != nil {
						return err
					}
					for j := range n {
						if string(p.Recv[j*w:(j+1)*w]) != string(piece(j, i, w)) {
							return fmt.Errorf("Allgather: block %d is %v", j, p.Recv[j*w:j*w+8])
						}
					}
					return nil
				})
				s := c.ranks[0].seq.Load() - 1 // the last Allgather: through the slot on ranks that spin
				if _, slotted := c.slotHeld(s); slotted != (spin > 0 && w <= wideBytes/n) {
					t.Errorf("%s: the last Allgather went through the slot: %v", what, slotted)
				}
				if _, slotted := c.slotHeld(s - 5); slotted != (w <= wideBytes/n) { // the last Reduce
					t.Errorf("%s: the last Reduce went through the slot: %v", what, slotted)
				}
			}
		}
	}
}

// TestSlotWord: a slot's word gives back the call it was made of, for every field
// at its largest (a piece of up to 1023 bytes: the wide area's), and tells an
// episode from the other episodes of its slot.
func TestSlotWord(t *testing.T) {
	for _, k := range slotKinds {
		for _, f := range [][4]int{{0, 0, 0, 0}, {15, 1023, 63, 15}, {3, 512, 8, 9}, {15, 33, 1, 0}} {
			s := uint64(ringSize*5 + 7)
			v := slotWord(s, k, f[0], f[1], f[2], f[3]) | (1<<slotRanks - 1)
			gk, root, w, elem, opener := slotCallOf(v)
			if gk != k || root != f[0] || w != f[1] || elem != f[2] || opener != f[3] {
				t.Errorf("%v %v: the word %#x gives %v %d %d %d %d", k, f, v, gk, root, w, elem, opener)
			}
			if v&slotFault != 0 || slotStale(v, s) || !slotStale(v, s+ringSize) || !slotStale(v, s-ringSize) {
				t.Errorf("%v %v: the word %#x is flagged, or stale for its own episode, or not for its slot's others", k, f, v)
			}
		}
	}
}
