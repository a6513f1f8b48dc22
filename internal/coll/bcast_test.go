package coll

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
)

// TestBcastInSlot: a root that runs a lap ahead leaves each small Bcast's copy in
// its ring slot; the ranks that come later get every broadcast in order from there,
// a rank whose length, root or element size differs from the root's gets the
// fault's class, and the next lap, which rewrites the slots while the others read
// them, delivers as well.
func TestBcastInSlot(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		c := New(NewJob(), 3, spin)
		msg := func(i int) []byte { return []byte{byte(i), byte(i >> 8), 7, 1, 2, 3, 4, 5} }
		for i := range ringSize {
			if err := c.Bcast(0, msg(i), 1, 0); err != nil {
				t.Fatalf("spin %v: root's Bcast %d: %v", spin, i, err)
			}
		}
		for s := range uint64(ringSize) {
			if got := c.ring[s].lit.Load(); got != s+1 || c.ring[s].p.Load() != nil {
				t.Fatalf("spin %v: slot %d holds the copy of episode %d (want %d), and episode %p (want none: nobody came before the root)",
					spin, s, got-1, s, c.ring[s].p.Load())
			}
		}
		wrong := map[int]struct {
			len, elem, root int
			class           errs.Class
		}{
			3:  {7, 1, 0, errs.Truncate},
			4:  {9, 1, 0, errs.Count},
			5:  {8, 1, 1, errs.Root},
			6:  {8, 2, 0, errs.Count},
			63: {0, 1, 0, errs.Truncate},
			7:  {8, 1, 2, errs.Root}, // rank 2 calls itself the root
			8:  {class: errs.Arg},    // rank 2 calls Barrier
			9:  {class: errs.Arg},    // rank 2 calls Reduce
		}
		recv := func(r, from, to int) error {
			for i := from; i < to; i++ {
				w, bad := wrong[i]
				if r != 2 || !bad {
					w.len, w.elem, w.root = 8, 1, 0
				}
				buf := make([]byte, w.len)
				var err error
				switch {
				case r == 2 && i == 8:
					err = c.Barrier(r)
				case r == 2 && i == 9:
					err = c.Reduce(r, []byte{1}, nil, 1, matmul, 0)
				default:
					err = c.Bcast(r, buf, w.elem, w.root)
				}
				if r == 2 && bad {
					if !errors.Is(err, w.class) {
						return fmt.Errorf("rank 2's Bcast %d with %d bytes of %d, root %d: %v, want %v", i, w.len, w.elem, w.root, err, w.class)
					}
					continue
				}
				if err != nil || string(buf) != string(msg(i)) {
					return fmt.Errorf("rank %d's Bcast %d: %v (%v), want %v", r, i, buf, err, msg(i))
				}
			}
			return nil
		}
		for r := 1; r < 3; r++ {
			if err := recv(r, 0, ringSize); err != nil {
				t.Fatalf("spin %v: %v", spin, err)
			}
		}
		// Another lap with every rank at once: the root rewrites the slots behind the others.
		var wg sync.WaitGroup
		fails := make([]error, 3)
		wg.Go(func() {
			for i := ringSize; i < 3*ringSize; i++ {
				if err := c.Bcast(0, msg(i), 1, 0); err != nil {
					fails[0] = err
					return
				}
			}
		})
		for r := 1; r < 3; r++ {
			wg.Go(func() { fails[r] = recv(r, ringSize, 3*ringSize) })
		}
		wg.Wait()
		if err := errors.Join(fails...); err != nil {
			t.Fatalf("spin %v: %v", spin, err)
		}
	}
}

// TestBcastRace: ranks that come before a small Bcast's root make its episode, the
// root that comes first makes none, and slots keep episodes many laps old: every
// rank still gets every broadcast, in order, with Reduces (made by whoever comes
// first) in between. (A rank that had loaded the slot's episode before it waited for
// the lap once swapped out an episode that had meanwhile been reused for its own
// call: two ranks then waited in an episode that the root never saw.)
func TestBcastRace(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		const n, calls = 4, 200000
		c := New(NewJob(), n, spin)
		var wg sync.WaitGroup
		fails := make([]error, n)
		for r := range n {
			wg.Go(func() {
				buf := make([]byte, 8)
				for i := range calls {
					if i%4999 == 0 {
						var out []byte
						if r == 0 {
							out = make([]byte, 4)
						}
						if err := c.Reduce(r, matrix(r), out, 4, matmul, 0); err != nil || r == 0 && string(out) != string(inOrder(n)) {
							fails[r] = fmt.Errorf("rank %d, call %d: Reduce gave %v (%v)", r, i, out, err)
							return
						}
						continue
					}
					if r == 0 {
						buf[0], buf[7] = byte(i), byte(i>>8)
					}
					if err := c.Bcast(r, buf, 1, 0); err != nil || buf[0] != byte(i) || buf[7] != byte(i>>8) {
						fails[r] = fmt.Errorf("rank %d, call %d: Bcast gave %v (%v)", r, i, buf, err)
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("spin %v: the Bcasts hang", spin)
		}
		if err := errors.Join(fails...); err != nil {
			t.Fatalf("spin %v: %v", spin, err)
		}
	}
}

// TestEpisodesReused: in a long run of small Bcasts and Reduces, episodes made by
// the ranks come back to be made again (reuse): almost no allocation per call.
func TestEpisodesReused(t *testing.T) {
	const n, calls = 3, 20 * ringSize
	c := New(NewJob(), n, 0)
	run := func() {
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				buf, in, out := make([]byte, 8), matrix(r), make([]byte, 4)
				for range calls {
					c.Bcast(r, buf, 1, 1)
					c.Reduce(r, in, out, 4, matmul, 2)
				}
			})
		}
		wg.Wait()
	}
	run() // the episodes of two laps are made
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / (2 * calls); per > 0.25 {
		t.Errorf("%.2f allocations per collective, want almost none (%d in all; a rank that loses the race to make an episode drops the one it took)", per, after.Mallocs-before.Mallocs)
	}
}
