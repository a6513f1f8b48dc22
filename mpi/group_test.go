package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// worldRanks lists the world ranks of g's members, translating into the world group.
func worldRanks(g, world *mpi.Group) ([]int, error) {
	ranks := make([]int, g.Size())
	for i := range ranks {
		ranks[i] = i
	}
	return mpi.TranslateRanks(g, ranks, world)
}

// Naive set computations on lists of world ranks, with MPI's order rules.
func naiveUnion(a, b []int) []int {
	out := slices.Clone(a)
	for _, m := range b {
		if !slices.Contains(a, m) {
			out = append(out, m)
		}
	}
	return out
}

func naiveFilter(a, b []int, keep bool) []int {
	out := []int{}
	for _, m := range a {
		if slices.Contains(b, m) == keep {
			out = append(out, m)
		}
	}
	return out
}

func naiveCompare(a, b []int) mpi.Comparison {
	switch {
	case slices.Equal(a, b):
		return mpi.Ident
	case len(a) == len(b) && len(naiveFilter(a, b, true)) == len(a):
		return mpi.Similar
	}
	return mpi.Unequal
}

// sameRanks compares lists, an empty one equal to nil.
func sameRanks(a, b []int) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) }

// TestGroupAlgebra checks Union, Intersection, Difference, CompareGroups, Size and
// Rank against naive computations, on fixed and random subsets of the world.
func TestGroupAlgebra(t *testing.T) {
	const n = 8
	cases := [][2][]int{
		{{}, {}},
		{{0, 1, 2}, {}},
		{{}, {3, 1}},
		{{0, 1, 2}, {0, 1, 2}},
		{{0, 1, 2}, {2, 1, 0}},
		{{0, 1, 2}, {2, 3, 4}},
		{{7, 5, 3, 1}, {1, 2, 3, 4}},
		{{4, 6}, {5, 7}},
		{{0, 1, 2, 3, 4, 5, 6, 7}, {6, 0}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var pair [2][]int
		for i := range pair {
			pair[i] = rng.Perm(n)[:rng.IntN(n+1)]
		}
		cases = append(cases, pair)
	}
	mustRun(t, n, func(c *mpi.Comm) error {
		world, err := c.Group()
		if err != nil {
			return err
		}
		if world.Size() != n || world.Rank() != c.Rank() {
			return fmt.Errorf("world group: size %d rank %d", world.Size(), world.Rank())
		}
		me := c.Rank()
		for _, tc := range cases {
			al, bl := tc[0], tc[1]
			a, err := world.Incl(al...)
			if err != nil {
				return err
			}
			b, err := world.Incl(bl...)
			if err != nil {
				return err
			}
			if wantRank := slices.Index(al, me); a.Size() != len(al) || (wantRank >= 0 && a.Rank() != wantRank) || (wantRank < 0 && a.Rank() != mpi.Undefined) {
				return fmt.Errorf("Incl(%v): size %d rank %d", al, a.Size(), a.Rank())
			}
			ops := []struct {
				name string
				fn   func(a, b *mpi.Group) (*mpi.Group, error)
				want []int
			}{
				{"Union", mpi.Union, naiveUnion(al, bl)},
				{"Intersection", mpi.Intersection, naiveFilter(al, bl, true)},
				{"Difference", mpi.Difference, naiveFilter(al, bl, false)},
			}
			for _, op := range ops {
				g, err := op.fn(a, b)
				if err != nil {
					return fmt.Errorf("%s(%v, %v): %v", op.name, al, bl, err)
				}
				got, err := worldRanks(g, world)
				if err != nil {
					return err
				}
				if !sameRanks(got, op.want) {
					return fmt.Errorf("%s(%v, %v) = %v, want %v", op.name, al, bl, got, op.want)
				}
				wantRank := slices.Index(op.want, me)
				if wantRank < 0 {
					wantRank = mpi.Undefined
				}
				if g.Rank() != wantRank {
					return fmt.Errorf("%s(%v, %v): rank %d, want %d", op.name, al, bl, g.Rank(), wantRank)
				}
			}
			cmp, err := mpi.CompareGroups(a, b)
			if err != nil {
				return err
			}
			if want := naiveCompare(al, bl); cmp != want {
				return fmt.Errorf("CompareGroups(%v, %v) = %v, want %v", al, bl, cmp, want)
			}
			// TranslateRanks from a to b: where each member of a is in b.
			ranks := make([]int, len(al))
			want := make([]int, len(al))
			for i, m := range al {
				ranks[i] = i
				if want[i] = slices.Index(bl, m); want[i] < 0 {
					want[i] = mpi.Undefined
				}
			}
			got, err := mpi.TranslateRanks(a, ranks, b)
			if err != nil {
				return err
			}
			if !sameRanks(got, want) {
				return fmt.Errorf("TranslateRanks(%v, all, %v) = %v, want %v", al, bl, got, want)
			}
		}
		return nil
	})
}

// TestGroupInclExcl checks Incl, Excl, RangeIncl and RangeExcl, and their errors,
// on a group whose order is not the world's.
func TestGroupInclExcl(t *testing.T) {
	const n = 10
	base := []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0} // the world reversed: rank i is world rank 9-i
	pick := func(ranks ...int) []int {
		out := []int{}
		for _, r := range ranks {
			out = append(out, base[r])
		}
		return out
	}
	all := func() []int { return pick(0, 1, 2, 3, 4, 5, 6, 7, 8, 9) }
	without := func(ranks ...int) []int {
		out := []int{}
		for r := range n {
			if !slices.Contains(ranks, r) {
				out = append(out, base[r])
			}
		}
		return out
	}
	type tcase struct {
		name string
		fn   func(g *mpi.Group) (*mpi.Group, error)
		want []int     // world ranks
		err  mpi.Class // or this error
	}
	tests := []tcase{
		{"Incl", func(g *mpi.Group) (*mpi.Group, error) { return g.Incl(3, 0, 9) }, pick(3, 0, 9), 0},
		{"Incl none", func(g *mpi.Group) (*mpi.Group, error) { return g.Incl() }, nil, 0},
		{"Incl duplicate", func(g *mpi.Group) (*mpi.Group, error) { return g.Incl(1, 2, 1) }, nil, mpi.ErrRank},
		{"Incl negative", func(g *mpi.Group) (*mpi.Group, error) { return g.Incl(-1) }, nil, mpi.ErrRank},
		{"Incl too large", func(g *mpi.Group) (*mpi.Group, error) { return g.Incl(n) }, nil, mpi.ErrRank},
		{"Excl", func(g *mpi.Group) (*mpi.Group, error) { return g.Excl(9, 0, 4) }, without(0, 4, 9), 0},
		{"Excl none", func(g *mpi.Group) (*mpi.Group, error) { return g.Excl() }, all(), 0},
		{"Excl all", func(g *mpi.Group) (*mpi.Group, error) { return g.Excl(0, 1, 2, 3, 4, 5, 6, 7, 8, 9) }, nil, 0},
		{"Excl duplicate", func(g *mpi.Group) (*mpi.Group, error) { return g.Excl(2, 2) }, nil, mpi.ErrRank},
		{"Excl out of range", func(g *mpi.Group) (*mpi.Group, error) { return g.Excl(10) }, nil, mpi.ErrRank},
		{"RangeIncl stride 2", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{0, 9, 2}) }, pick(0, 2, 4, 6, 8), 0},
		{"RangeIncl last not reached", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{1, 8, 3}) }, pick(1, 4, 7), 0},
		{"RangeIncl negative stride", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{9, 0, -4}) }, pick(9, 5, 1), 0},
		{"RangeIncl single", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{4, 4, 1}) }, pick(4), 0},
		{"RangeIncl several", func(g *mpi.Group) (*mpi.Group, error) {
			return g.RangeIncl([3]int{5, 9, 2}, [3]int{0, 2, 1}, [3]int{8, 6, -2})
		}, pick(5, 7, 9, 0, 1, 2, 8, 6), 0},
		{"RangeIncl stride 0", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{0, 3, 0}) }, nil, mpi.ErrArg},
		{"RangeIncl wrong direction", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{5, 2, 1}) }, nil, mpi.ErrArg},
		{"RangeIncl first out", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{-1, 2, 1}) }, nil, mpi.ErrRank},
		{"RangeIncl last out", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeIncl([3]int{0, 10, 3}) }, nil, mpi.ErrRank},
		{"RangeIncl interleaved", func(g *mpi.Group) (*mpi.Group, error) {
			return g.RangeIncl([3]int{0, 6, 3}, [3]int{9, 1, -4})
		}, pick(0, 3, 6, 9, 5, 1), 0},
		{"RangeIncl overlap", func(g *mpi.Group) (*mpi.Group, error) {
			return g.RangeIncl([3]int{0, 6, 3}, [3]int{8, 0, -2})
		}, nil, mpi.ErrRank}, // 6 and 0 twice
		{"RangeExcl", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeExcl([3]int{1, 9, 2}) }, pick(0, 2, 4, 6, 8), 0},
		{"RangeExcl several", func(g *mpi.Group) (*mpi.Group, error) {
			return g.RangeExcl([3]int{0, 1, 1}, [3]int{9, 5, -2})
		}, pick(2, 3, 4, 6, 8), 0},
		{"RangeExcl stride 0", func(g *mpi.Group) (*mpi.Group, error) { return g.RangeExcl([3]int{0, 0, 0}) }, nil, mpi.ErrArg},
		{"RangeExcl overlap", func(g *mpi.Group) (*mpi.Group, error) {
			return g.RangeExcl([3]int{0, 4, 1}, [3]int{4, 9, 1})
		}, nil, mpi.ErrRank},
	}
	mustRun(t, n, func(c *mpi.Comm) error {
		world, err := c.Group()
		if err != nil {
			return err
		}
		g, err := world.Incl(base...)
		if err != nil {
			return err
		}
		if g.Rank() != n-1-c.Rank() {
			return fmt.Errorf("rank %d in the reversed group, want %d", g.Rank(), n-1-c.Rank())
		}
		for _, tt := range tests {
			h, err := tt.fn(g)
			if tt.err != 0 {
				var e *mpi.Error
				if !errors.Is(err, tt.err) || !errors.As(err, &e) {
					return fmt.Errorf("%s: error %v, want class %v", tt.name, err, tt.err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %v", tt.name, err)
			}
			got, err := worldRanks(h, world)
			if err != nil {
				return err
			}
			if !sameRanks(got, tt.want) {
				return fmt.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			}
			wantRank := slices.Index(tt.want, c.Rank())
			if wantRank < 0 {
				wantRank = mpi.Undefined
			}
			if h.Rank() != wantRank {
				return fmt.Errorf("%s: rank %d, want %d", tt.name, h.Rank(), wantRank)
			}
		}
		return nil
	})
}

// TestGroupTranslateCompare checks TranslateRanks's ProcNull, Undefined and errors,
// CompareGroups's results, GroupEmpty and the errors of nil groups.
func TestGroupTranslateCompare(t *testing.T) {
	mustRun(t, 6, func(c *mpi.Comm) error {
		world, err := c.Group()
		if err != nil {
			return err
		}
		a, _ := world.Incl(4, 2, 0)
		b, _ := world.Incl(0, 1, 2, 3)
		got, err := mpi.TranslateRanks(a, []int{0, mpi.ProcNull, 2, 1, 1}, b)
		if err != nil {
			return err
		}
		if want := []int{mpi.Undefined, mpi.ProcNull, 0, 2, 2}; !slices.Equal(got, want) {
			return fmt.Errorf("TranslateRanks = %v, want %v", got, want)
		}
		for _, bad := range []int{3, -3, mpi.AnySource, mpi.Undefined} {
			if _, err := mpi.TranslateRanks(a, []int{0, bad}, b); !errors.Is(err, mpi.ErrRank) {
				return fmt.Errorf("TranslateRanks of rank %d: %v, want ErrRank", bad, err)
			}
		}
		if got, err := mpi.TranslateRanks(a, nil, b); err != nil || len(got) != 0 {
			return fmt.Errorf("TranslateRanks of no ranks: %v %v", got, err)
		}
		// Groups of two communicators: the world's and a Dup's are Ident; a Split's reversed is Similar.
		d, err := c.Dup()
		if err != nil {
			return err
		}
		dg, _ := d.Group()
		r, err := c.Split(0, -c.Rank())
		if err != nil {
			return err
		}
		rg, _ := r.Group()
		for _, tt := range []struct {
			a, b *mpi.Group
			want mpi.Comparison
		}{
			{world, world, mpi.Ident}, {world, dg, mpi.Ident}, {world, rg, mpi.Similar}, {rg, world, mpi.Similar},
			{a, b, mpi.Unequal}, {mpi.GroupEmpty, mpi.GroupEmpty, mpi.Ident}, {mpi.GroupEmpty, a, mpi.Unequal},
		} {
			if got, err := mpi.CompareGroups(tt.a, tt.b); err != nil || got != tt.want {
				return fmt.Errorf("CompareGroups(%v, %v) = %v, %v; want %v", tt.a, tt.b, got, err, tt.want)
			}
		}
		if rg.Rank() != c.Size()-1-c.Rank() {
			return fmt.Errorf("rank %d in the reversed split's group", rg.Rank())
		}
		// GroupEmpty.
		if mpi.GroupEmpty.Size() != 0 || mpi.GroupEmpty.Rank() != mpi.Undefined {
			return fmt.Errorf("GroupEmpty: size %d rank %d", mpi.GroupEmpty.Size(), mpi.GroupEmpty.Rank())
		}
		u, err := mpi.Union(mpi.GroupEmpty, world)
		if err != nil {
			return err
		}
		if cmp, _ := mpi.CompareGroups(u, world); cmp != mpi.Ident || u.Rank() != c.Rank() {
			return fmt.Errorf("Union(GroupEmpty, world): %v rank %d", cmp, u.Rank())
		}
		// nil groups.
		var null *mpi.Group
		checks := map[string]error{
			"Incl":           errOf(null.Incl(0)),
			"Excl":           errOf(null.Excl()),
			"RangeIncl":      errOf(null.RangeIncl()),
			"RangeExcl":      errOf(null.RangeExcl()),
			"Union":          errOf(mpi.Union(a, null)),
			"Intersection":   errOf(mpi.Intersection(null, a)),
			"Difference":     errOf(mpi.Difference(null, null)),
			"TranslateRanks": errOf(mpi.TranslateRanks(a, []int{0}, null)),
			"CompareGroups":  errOf(mpi.CompareGroups(null, a)),
			"Create":         errOf(c.Create(null)),
		}
		for op, err := range checks {
			if !errors.Is(err, mpi.ErrGroup) {
				return fmt.Errorf("%s with a nil group: %v, want ErrGroup", op, err)
			}
		}
		if null.Size() != 0 || null.Rank() != mpi.Undefined {
			return errors.New("a nil group must have size 0 and rank Undefined")
		}
		return nil
	})
}
