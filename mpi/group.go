package mpi

import (
	"fmt"

	"github.com/weft-mpi/weft/internal/errs"
)

// Group is an ordered set of ranks, as MPI_Group: rank i of the group is its i-th
// member. A Group is immutable; every operation returns a new one, and there is
// nothing to free (the garbage collector does it). Members are named by their world
// rank, the rank of their endpoint in the job: a group made from one communicator
// can be compared with, or translated into, one made from another.
//
// A Group also remembers the rank that made it, for Rank: the groups derived from
// it, by Incl, Union and the rest, are that rank's too.
type Group struct {
	members []int // world ranks, by rank in the group
	self    int   // the world rank of the rank that made the group, or -1
	rank    int   // self's rank in the group, or Undefined
}

// GroupEmpty is the group without members, MPI_GROUP_EMPTY.
var GroupEmpty = &Group{self: -1, rank: Undefined}

// newGroup makes the group of members (which it keeps) as seen by world rank self.
func newGroup(members []int, self int) *Group {
	g := &Group{members: members, self: self, rank: Undefined}
	for i, m := range members {
		if m == self {
			g.rank = i
			break
		}
	}
	return g
}

// Group returns the group of c: its ranks in order, MPI_Comm_group.
func (c *Comm) Group() (*Group, error) {
	if err := c.check("Group"); err != nil {
		return nil, err
	}
	members := make([]int, len(c.core.Peers))
	for i, ep := range c.core.Peers {
		members[i] = ep.Rank
	}
	return newGroup(members, c.self().Rank), nil
}

// Size returns the number of ranks in g; a nil group has none.
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.members)
}

// Rank returns the calling rank's rank in g, or Undefined if it is not a member.
func (g *Group) Rank() int {
	if g == nil {
		return Undefined
	}
	return g.rank
}

// String lists the world ranks of g's members, for logs.
func (g *Group) String() string {
	if g == nil {
		return "Group(nil)"
	}
	return fmt.Sprintf("Group%v", g.members)
}

// index maps g's members to their ranks in g.
func (g *Group) index() map[int]int {
	idx := make(map[int]int, len(g.members))
	for i, m := range g.members {
		idx[m] = i
	}
	return idx
}

// checkGroups returns an ErrGroup error if any of gs is nil.
func checkGroups(op string, gs ...*Group) error {
	for _, g := range gs {
		if g == nil {
			return errs.New(errs.Group, op, NoValue, "the group is nil")
		}
	}
	return nil
}

// Incl returns the group of g's ranks listed in ranks, in that order
// (MPI_Group_incl). Each must be a rank of g, at most once: otherwise ErrRank.
func (g *Group) Incl(ranks ...int) (*Group, error) {
	if err := checkGroups("Incl", g); err != nil {
		return nil, err
	}
	if err := g.checkRanks("Incl", ranks); err != nil {
		return nil, err
	}
	members := make([]int, len(ranks))
	for i, r := range ranks {
		members[i] = g.members[r]
	}
	return newGroup(members, g.self), nil
}

// Excl returns the group of g's ranks not listed in ranks, in g's order
// (MPI_Group_excl). Each must be a rank of g, at most once: otherwise ErrRank.
func (g *Group) Excl(ranks ...int) (*Group, error) {
	if err := checkGroups("Excl", g); err != nil {
		return nil, err
	}
	if err := g.checkRanks("Excl", ranks); err != nil {
		return nil, err
	}
	return g.without(ranks), nil
}

// checkRanks checks that ranks are distinct ranks of g.
func (g *Group) checkRanks(op string, ranks []int) error {
	seen := make([]bool, len(g.members))
	for i, r := range ranks {
		if r < 0 || r >= len(g.members) {
			return errs.New(errs.Rank, op, NoValue, "ranks[%d] is %d, not a rank of a group of %d", i, r, len(g.members))
		}
		if seen[r] {
			return errs.New(errs.Rank, op, NoValue, "rank %d is listed twice", r)
		}
		seen[r] = true
	}
	return nil
}

// without returns g without its ranks listed in ranks (valid and distinct).
func (g *Group) without(ranks []int) *Group {
	drop := make([]bool, len(g.members))
	for _, r := range ranks {
		drop[r] = true
	}
	members := make([]int, 0, len(g.members)-len(ranks))
	for i, m := range g.members {
		if !drop[i] {
			members = append(members, m)
		}
	}
	return newGroup(members, g.self)
}

// RangeIncl returns the group of g's ranks given by the triplets (first, last,
// stride), in order (MPI_Group_range_incl): a triplet stands for first,
// first+stride, ... up to last, the ranks first + k*stride for k from 0 to
// (last-first)/stride. first and last must be ranks of g, stride must not be 0
// (ErrArg) and must go from first towards last (ErrArg), and no rank may be given
// twice, by one triplet or several (ErrRank).
func (g *Group) RangeIncl(ranges ...[3]int) (*Group, error) {
	if err := checkGroups("RangeIncl", g); err != nil {
		return nil, err
	}
	ranks, err := g.expand("RangeIncl", ranges)
	if err != nil {
		return nil, err
	}
	return g.Incl(ranks...)
}

// RangeExcl returns the group of g's ranks not given by the triplets, in g's order
// (MPI_Group_range_excl). The triplets obey RangeIncl's rules.
func (g *Group) RangeExcl(ranges ...[3]int) (*Group, error) {
	if err := checkGroups("RangeExcl", g); err != nil {
		return nil, err
	}
	ranks, err := g.expand("RangeExcl", ranges)
	if err != nil {
		return nil, err
	}
	return g.Excl(ranks...)
}

// expand lists the ranks that the triplets stand for, checking them.
func (g *Group) expand(op string, ranges [][3]int) ([]int, error) {
	n := len(g.members)
	seen := make([]bool, n)
	var ranks []int
	for i, t := range ranges {
		first, last, stride := t[0], t[1], t[2]
		switch {
		case first < 0 || first >= n || last < 0 || last >= n:
			return nil, errs.New(errs.Rank, op, NoValue, "triplet %d %v: first and last must be ranks of a group of %d", i, t, n)
		case stride == 0:
			return nil, errs.New(errs.Arg, op, NoValue, "triplet %d %v: the stride is 0", i, t)
		case stride > 0 && first > last || stride < 0 && first < last:
			return nil, errs.New(errs.Arg, op, NoValue, "triplet %d %v: the stride goes away from last", i, t)
		}
		for k := 0; k <= (last-first)/stride; k++ {
			r := first + k*stride
			if seen[r] {
				return nil, errs.New(errs.Rank, op, NoValue, "triplet %d %v gives rank %d, given before", i, t, r)
			}
			seen[r] = true
			ranks = append(ranks, r)
		}
	}
	return ranks, nil
}

// Union returns the members of a, in a's order, then those of b not in a, in b's
// order (MPI_Group_union).
func Union(a, b *Group) (*Group, error) {
	if err := checkGroups("Union", a, b); err != nil {
		return nil, err
	}
	in := a.index()
	members := append(make([]int, 0, len(a.members)+len(b.members)), a.members...)
	for _, m := range b.members {
		if _, ok := in[m]; !ok {
			members = append(members, m)
		}
	}
	return newGroup(members, pick(a, b)), nil
}

// Intersection returns the members of a that are in b, in a's order
// (MPI_Group_intersection).
func Intersection(a, b *Group) (*Group, error) {
	if err := checkGroups("Intersection", a, b); err != nil {
		return nil, err
	}
	return filter(a, b, true), nil
}

// Difference returns the members of a that are not in b, in a's order
// (MPI_Group_difference).
func Difference(a, b *Group) (*Group, error) {
	if err := checkGroups("Difference", a, b); err != nil {
		return nil, err
	}
	return filter(a, b, false), nil
}

// filter returns the members of a that are in b (keep) or not (!keep), in a's order.
func filter(a, b *Group, keep bool) *Group {
	in := b.index()
	var members []int
	for _, m := range a.members {
		if _, ok := in[m]; ok == keep {
			members = append(members, m)
		}
	}
	return newGroup(members, pick(a, b))
}

// pick is the rank that made a group combining a and b: a's maker if known, else b's.
func pick(a, b *Group) int {
	if a.self >= 0 {
		return a.self
	}
	return b.self
}

// TranslateRanks returns the ranks in b of the members of a whose ranks in a are
// given (MPI_Group_translate_ranks): Undefined for a member not in b, and ProcNull
// for ProcNull. A rank that is not a rank of a is ErrRank.
func TranslateRanks(a *Group, ranks []int, b *Group) ([]int, error) {
	if err := checkGroups("TranslateRanks", a, b); err != nil {
		return nil, err
	}
	in := b.index()
	out := make([]int, len(ranks))
	for i, r := range ranks {
		switch {
		case r == ProcNull:
			out[i] = ProcNull
		case r < 0 || r >= len(a.members):
			return nil, errs.New(errs.Rank, "TranslateRanks", NoValue, "ranks[%d] is %d, not a rank of a group of %d", i, r, len(a.members))
		default:
			if j, ok := in[a.members[r]]; ok {
				out[i] = j
			} else {
				out[i] = Undefined
			}
		}
	}
	return out, nil
}

// CompareGroups compares two groups as MPI_Group_compare does: Ident if they have
// the same members in the same order, Similar if the same members in another order,
// else Unequal.
func CompareGroups(a, b *Group) (Comparison, error) {
	if err := checkGroups("CompareGroups", a, b); err != nil {
		return Unequal, err
	}
	if len(a.members) != len(b.members) {
		return Unequal, nil
	}
	same := true
	for i := range a.members {
		same = same && a.members[i] == b.members[i]
	}
	if same {
		return Ident, nil
	}
	in := a.index()
	for _, m := range b.members {
		if _, ok := in[m]; !ok {
			return Unequal, nil
		}
	}
	return Similar, nil
}
