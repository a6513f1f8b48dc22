package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// exercise checks that d works on its own: a ring of point-to-point messages
// carrying world ranks, a Barrier and an Allreduce of the world ranks, whose sum
// must be wantSum. world is the world rank of the caller, ring the world ranks of
// d's ranks in order.
func exercise(d *mpi.Comm, world int, ring []int) error {
	n, r := d.Size(), d.Rank()
	next, prev := (r+1)%n, (r-1+n)%n
	got := []int{-1}
	if _, err := mpi.Sendrecv(d, []int{world}, next, 5, got, prev, 5); err != nil {
		return err
	}
	if got[0] != ring[prev] {
		return fmt.Errorf("rank %d of %d got %d from rank %d, want world rank %d", r, n, got[0], prev, ring[prev])
	}
	if err := d.Barrier(); err != nil {
		return err
	}
	sum := []int64{int64(world)}
	if err := mpi.Allreduce(d, nil, sum, mpi.Sum); err != nil {
		return err
	}
	want := int64(0)
	for _, w := range ring {
		want += int64(w)
	}
	if sum[0] != want {
		return fmt.Errorf("Allreduce: %d, want %d", sum[0], want)
	}
	return nil
}

// TestSplit splits by rank%3 with keys reversing the order, checks sizes and ranks,
// and that point-to-point and collectives work on the new communicators without
// matching a receive posted on the parent with AnySource and AnyTag.
func TestSplit(t *testing.T) {
	for _, n := range []int{1, 3, 7, 20} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			mustRun(t, n, func(c *mpi.Comm) error {
				me := c.Rank()
				// A wildcard receive on the parent that nothing on the split may match.
				parent := []int{-1}
				req, err := mpi.Irecv(c, parent, mpi.AnySource, mpi.AnyTag)
				if err != nil {
					return err
				}
				d, err := c.Split(me%3, -me)
				if err != nil {
					return err
				}
				var ring []int // the world ranks of d, by key: descending
				for w := n - 1; w >= 0; w-- {
					if w%3 == me%3 {
						ring = append(ring, w)
					}
				}
				if d.Size() != len(ring) || d.Rank() != slices.Index(ring, me) {
					return fmt.Errorf("split: rank %d of %d, want %d of %d", d.Rank(), d.Size(), slices.Index(ring, me), len(ring))
				}
				if err := exercise(d, me, ring); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil { // every rank's traffic on the splits is over
					return err
				}
				if _, done, err := req.Test(); err != nil || done {
					return fmt.Errorf("the parent's wildcard receive completed (%v) during traffic on the split", err)
				}
				if err := c.Barrier(); err != nil { // every rank has tested before any sends on the parent
					return err
				}
				if err := mpi.Send(c, []int{1000 + me}, (me+1)%n, 9); err != nil {
					return err
				}
				st, err := req.Wait()
				if err != nil {
					return err
				}
				if prev := (me - 1 + n) % n; st.Source != prev || st.Tag != 9 || parent[0] != 1000+prev {
					return fmt.Errorf("parent receive: %+v %d", st, parent[0])
				}
				g, err := d.Group()
				if err != nil {
					return err
				}
				if got, err := worldRanks(g, mustGroup(c)); err != nil || !slices.Equal(got, ring) {
					return fmt.Errorf("split's group %v (%v), want %v", got, err, ring)
				}
				cmp, err := mpi.Compare(c, d)
				if err != nil {
					return err
				}
				want := mpi.Unequal
				if n == 1 {
					want = mpi.Congruent
				}
				if cmp != want {
					return fmt.Errorf("Compare(world, split) = %v, want %v", cmp, want)
				}
				return d.Free()
			})
		})
	}
}

func mustGroup(c *mpi.Comm) *mpi.Group {
	g, err := c.Group()
	if err != nil {
		panic(err)
	}
	return g
}

// TestSplitCompare checks Compare on communicators made by Split.
func TestSplitCompare(t *testing.T) {
	mustRun(t, 5, func(c *mpi.Comm) error {
		same, err := c.Split(3, 0) // keys equal: the parent's order
		if err != nil {
			return err
		}
		reversed, err := c.Split(0, -c.Rank())
		if err != nil {
			return err
		}
		halves, err := c.Split(c.Rank()/3, 0)
		if err != nil {
			return err
		}
		for _, tt := range []struct {
			name string
			a, b *mpi.Comm
			want mpi.Comparison
		}{
			{"same", c, same, mpi.Congruent}, {"reversed", c, reversed, mpi.Similar},
			{"halves", c, halves, mpi.Unequal}, {"self", halves, halves, mpi.Ident},
		} {
			if got, err := mpi.Compare(tt.a, tt.b); err != nil || got != tt.want {
				return fmt.Errorf("%s: Compare %v %v, want %v", tt.name, got, err, tt.want)
			}
		}
		return nil
	})
}

// TestSplitUndefined: the ranks passing Undefined get no communicator, the others
// one of their own.
func TestSplitUndefined(t *testing.T) {
	mustRun(t, 6, func(c *mpi.Comm) error {
		color := 1
		if c.Rank()%2 == 0 {
			color = mpi.Undefined
		}
		d, err := c.Split(color, 0)
		if err != nil {
			return err
		}
		if color == mpi.Undefined {
			if d != nil {
				return fmt.Errorf("color Undefined gave %v", d)
			}
		} else if err := exercise(d, c.Rank(), []int{1, 3, 5}); err != nil {
			return err
		}
		all, err := c.Split(mpi.Undefined, 0)
		if all != nil || err != nil {
			return fmt.Errorf("everyone Undefined: %v %v", all, err)
		}
		if _, err := c.Split(-5, 0); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("color -5: %v, want ErrArg", err)
		}
		return nil
	})
}

// TestSplitNested splits a split, and checks that the grandchildren work.
func TestSplitNested(t *testing.T) {
	const n = 12
	mustRun(t, n, func(c *mpi.Comm) error {
		me := c.Rank()
		half, err := c.Split(me%2, me)
		if err != nil {
			return err
		}
		quarter, err := half.Split(half.Rank()%2, half.Rank())
		if err != nil {
			return err
		}
		var ring []int
		for w := range n {
			if w%4 == me%4 {
				ring = append(ring, w)
			}
		}
		if quarter.Size() != len(ring) || quarter.Rank() != slices.Index(ring, me) {
			return fmt.Errorf("quarter: rank %d of %d, want %d of %d", quarter.Rank(), quarter.Size(), slices.Index(ring, me), len(ring))
		}
		if err := exercise(quarter, me, ring); err != nil {
			return err
		}
		dup, err := quarter.Dup()
		if err != nil {
			return err
		}
		if cmp, _ := mpi.Compare(dup, quarter); cmp != mpi.Congruent {
			return fmt.Errorf("Dup of a split: %v", cmp)
		}
		return exercise(dup, me, ring)
	})
}

// TestSplitMany keeps thousands of communicators made by Split, Dup, Create and
// SplitType alive, then uses some of them.
func TestSplitMany(t *testing.T) {
	const n, rounds = 4, 3000
	mustRun(t, n, func(c *mpi.Comm) error {
		me := c.Rank()
		world := mustGroup(c)
		pair, _ := world.Incl(2, 0)
		var comms []*mpi.Comm
		var ids []int // the round that made each of comms
		for i := range rounds {
			var d *mpi.Comm
			var err error
			switch i % 4 {
			case 0:
				d, err = c.Split((me+i)%2, i*me%3)
			case 1:
				d, err = c.Dup()
			case 2:
				d, err = c.Create(pair) // only ranks 2 and 0 get one
			case 3:
				d, err = c.SplitType(mpi.SplitProc, -me)
			}
			if err != nil {
				return fmt.Errorf("round %d: %v", i, err)
			}
			if d != nil {
				comms, ids = append(comms, d), append(ids, i)
			}
		}
		// Messages between the same ranks with the same tag on many communicators:
		// each must arrive on its own.
		var reqs []*mpi.Request
		bufs := make([][]int, len(comms))
		for i, d := range comms {
			bufs[i] = []int{-1}
			r, err := mpi.Irecv(d, bufs[i], (d.Rank()+d.Size()-1)%d.Size(), 0)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for i := len(comms) - 1; i >= 0; i-- {
			d := comms[i]
			if err := mpi.Send(d, []int{ids[i]}, (d.Rank()+1)%d.Size(), 0); err != nil {
				return err
			}
		}
		if _, err := mpi.Waitall(reqs...); err != nil {
			return err
		}
		for i := range comms {
			if bufs[i][0] != ids[i] {
				return fmt.Errorf("communicator of round %d received %d", ids[i], bufs[i][0])
			}
		}
		for i := range comms {
			if ids[i] < rounds-8 {
				continue
			}
			v := []int64{1}
			if err := mpi.Allreduce(comms[i], nil, v, mpi.Sum); err != nil {
				return err
			}
			if v[0] != int64(comms[i].Size()) {
				return fmt.Errorf("communicator %d: Allreduce %d, want %d", i, v[0], comms[i].Size())
			}
		}
		return nil
	})
}

// TestCreate makes a communicator of a subset of the world, in the group's order.
func TestCreate(t *testing.T) {
	mustRun(t, 7, func(c *mpi.Comm) error {
		me := c.Rank()
		world := mustGroup(c)
		g, err := world.Incl(5, 1, 3)
		if err != nil {
			return err
		}
		d, err := c.Create(g)
		if err != nil {
			return err
		}
		ring := []int{5, 1, 3}
		if !slices.Contains(ring, me) {
			if d != nil {
				return fmt.Errorf("rank %d not in the group got %v", me, d)
			}
		} else {
			if d.Size() != 3 || d.Rank() != slices.Index(ring, me) {
				return fmt.Errorf("Create: rank %d of %d", d.Rank(), d.Size())
			}
			if err := exercise(d, me, ring); err != nil {
				return err
			}
			dg, _ := d.Group()
			if cmp, _ := mpi.CompareGroups(dg, g); cmp != mpi.Ident {
				return fmt.Errorf("the new communicator's group is %v to the one passed", cmp)
			}
			// A group of the subcommunicator, with members not in the world group order.
			sub, _ := dg.Incl(2, 0)
			e, err := d.Create(sub)
			if err != nil {
				return err
			}
			if (e != nil) != (me == 3 || me == 5) {
				return fmt.Errorf("nested Create: %v", e)
			}
			if e != nil {
				if err := exercise(e, me, []int{3, 5}); err != nil {
					return err
				}
			}
		}
		// The whole group: congruent to c.
		all, err := c.Create(world)
		if err != nil {
			return err
		}
		if cmp, _ := mpi.Compare(all, c); cmp != mpi.Congruent {
			return fmt.Errorf("Create(world group): %v", cmp)
		}
		// The empty group: nobody gets a communicator.
		if none, err := c.Create(mpi.GroupEmpty); none != nil || err != nil {
			return fmt.Errorf("Create(GroupEmpty): %v %v", none, err)
		}
		// A group with members outside the communicator.
		if d != nil {
			if _, err := d.Create(world); !errors.Is(err, mpi.ErrGroup) {
				return fmt.Errorf("Create of a group not in the communicator: %v, want ErrGroup", err)
			}
		}
		// Ranks passing different groups all get ErrGroup.
		mine, _ := world.Incl(me)
		if _, err := c.Create(mine); !errors.Is(err, mpi.ErrGroup) {
			return fmt.Errorf("Create of different groups: %v, want ErrGroup", err)
		}
		return nil
	})
}

// TestSplitType: both kinds give the whole communicator today, ordered by key.
func TestSplitType(t *testing.T) {
	const n = 5
	mustRun(t, n, func(c *mpi.Comm) error {
		for _, kind := range []int{mpi.SplitShared, mpi.SplitProc} {
			d, err := c.SplitType(kind, -c.Rank())
			if err != nil {
				return err
			}
			if d.Size() != n || d.Rank() != n-1-c.Rank() {
				return fmt.Errorf("SplitType(%d): rank %d of %d", kind, d.Rank(), d.Size())
			}
			if err := exercise(d, c.Rank(), []int{4, 3, 2, 1, 0}); err != nil {
				return err
			}
		}
		if d, err := c.SplitType(mpi.Undefined, 0); d != nil || err != nil {
			return fmt.Errorf("SplitType(Undefined): %v %v", d, err)
		}
		if _, err := c.SplitType(77, 0); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("SplitType(77): %v, want ErrArg", err)
		}
		return nil
	})
}

// TestSplitFree: a freed split communicator is ErrComm; its parent still works.
func TestSplitFree(t *testing.T) {
	mustRun(t, 4, func(c *mpi.Comm) error {
		d, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		if err := d.Free(); err != nil {
			return err
		}
		checks := map[string]error{
			"Send":    mpi.Send(d, []int{1}, 0, 0),
			"Recv":    errOf(mpi.Recv(d, []int{0}, 0, 0)),
			"Barrier": d.Barrier(),
			"Split":   errOf(d.Split(0, 0)),
			"Create":  errOf(d.Create(mpi.GroupEmpty)),
			"Group":   errOf(d.Group()),
			"Dup":     errOf(d.Dup()),
			"Free":    d.Free(),
		}
		for op, err := range checks {
			if !errors.Is(err, mpi.ErrComm) {
				return fmt.Errorf("%s on a freed split: %v, want ErrComm", op, err)
			}
		}
		return c.Barrier()
	})
}

// TestSplitAbort: ranks waiting in a Split for a rank that fails are released with
// ErrProcFailed.
func TestSplitAbort(t *testing.T) {
	const n = 6
	errs := make([]error, n)
	err := run(t, n, func(c *mpi.Comm) error {
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond)
			return errors.New("rank 0 gives up")
		}
		_, errs[c.Rank()] = c.Split(0, 0)
		return nil
	})
	if err == nil {
		t.Fatal("Run returned nil")
	}
	for r := 1; r < n; r++ {
		if !errors.Is(errs[r], mpi.ErrProcFailed) {
			t.Errorf("rank %d: Split returned %v, want ErrProcFailed", r, errs[r])
		}
	}
}

// TestSplitMismatch: a rank calling Dup while the others call Split gets an error
// instead of a hang, and the job ends.
func TestSplitMismatch(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	var got []error
	err := run(t, n, func(c *mpi.Comm) error {
		var err error
		if c.Rank() == 2 {
			_, err = c.Dup()
		} else {
			_, err = c.Split(0, 0)
		}
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
		return err
	})
	if !errors.Is(err, mpi.ErrArg) {
		t.Fatalf("Run: %v, want an ErrArg", err)
	}
	if len(got) != n {
		t.Fatalf("%d ranks returned", len(got))
	}
}
