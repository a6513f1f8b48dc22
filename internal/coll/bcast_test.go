package coll

import (
	"errors"
	"fmt"
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
			if got := c.ring[s].lit.Load(); got != s+1 {
				t.Fatalf("spin %v: slot %d holds the copy of episode %d, want %d", spin, s, got-1, s)
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
		}
		recv := func(r, from, to int) error {
			for i := from; i < to; i++ {
				w, bad := wrong[i]
				if r != 2 || !bad {
					w.len, w.elem, w.root = 8, 1, 0
				}
				buf := make([]byte, w.len)
				err := c.Bcast(r, buf, w.elem, w.root)
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
