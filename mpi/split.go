package mpi

import (
	"runtime"
	"slices"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
	"github.com/weft-mpi/weft/internal/spin"
)

// The kinds of SplitType.
const (
	// SplitShared groups the ranks that share memory: the ranks of one host
	// (MPI_COMM_TYPE_SHARED).
	SplitShared = iota + 1
	// SplitProc groups the ranks of one OS process, a Weft extension: they share
	// the process's collectives on shared memory and its pool.
	SplitProc
)

// Split partitions c (MPI_Comm_split): the ranks that pass the same color get a new
// communicator, whose ranks are ordered by key, then by rank in c. A rank passing
// color Undefined gets none: a nil *Comm and a nil error. color must otherwise be
// at least 0 (ErrArg).
//
// Split is collective: every rank of c calls it, in the same order as its other
// calls making communicators from c (Dup, Split, Create, SplitType). It takes no
// message: the ranks meet in state that c's ranks share, and each returns once
// every rank of c has given its color and key. Each new communicator has its own
// context, so its messages never match those of c or of any other communicator,
// and its own collectives.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if err := c.check("Split"); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, errs.New(errs.Arg, "Split", c.rank, "color %d: want a color of at least 0, or Undefined", color)
	}
	return c.split("Split", color, key, nil)
}

// SplitType partitions c by where its ranks run (MPI_Comm_split_type): kind
// SplitShared groups the ranks of each host, SplitProc those of each process, and
// key orders the ranks of each new communicator, ties broken by rank in c. A rank
// passing kind Undefined gets none (a nil *Comm and a nil error). It is collective
// as Split is.
//
// Today every rank of a job runs in one process, so both kinds give every rank a
// communicator with all the ranks of c, ordered by key.
func (c *Comm) SplitType(kind, key int) (*Comm, error) {
	if err := c.check("SplitType"); err != nil {
		return nil, err
	}
	color := 0
	switch kind {
	case SplitShared, SplitProc:
	case Undefined:
		color = Undefined
	default:
		return nil, errs.New(errs.Arg, "SplitType", c.rank, "kind %d: want SplitShared, SplitProc or Undefined", kind)
	}
	return c.split("SplitType", color, key, nil)
}

// Create returns a communicator of the ranks of g, in g's order (MPI_Comm_create).
// g must be a subgroup of c's group (else ErrGroup), and every rank of c must pass
// the same group (else every rank gets an ErrGroup error). The ranks of c that are
// not in g get a nil *Comm and a nil error. Create is collective as Split is.
func (c *Comm) Create(g *Group) (*Comm, error) {
	if err := c.check("Create"); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errs.New(errs.Group, "Create", c.rank, "the group is nil")
	}
	// The position of each member of g in c.
	at := make(map[int]int, len(c.core.Peers))
	for i, ep := range c.core.Peers {
		at[ep.Rank] = i
	}
	color, key := Undefined, 0
	for i, m := range g.members {
		if _, ok := at[m]; !ok {
			return nil, errs.New(errs.Group, "Create", c.rank, "world rank %d is in the group but not in the communicator", m)
		}
		if at[m] == c.rank {
			color, key = 0, i
		}
	}
	return c.split("Create", color, key, g)
}

// splitting is what the ranks of one Split, SplitType or Create share.
type splitting struct {
	color, key []int       // by rank in the parent
	groups     []*Group    // Create: each rank's group
	cores      []*commCore // by rank in the parent: its new communicator, nil for none
	ranks      []int       // by rank in the parent: its rank in its new communicator
	fault      *Error      // why the call failed on every rank
}

// split runs the calling rank's part of a Split (or SplitType, or Create when g is
// not nil).
func (c *Comm) split(op string, color, key int, g *Group) (*Comm, error) {
	n := c.Size()
	rank := c.rank
	a, err := c.agree(op,
		func() any {
			s := &splitting{color: make([]int, n), key: make([]int, n)}
			if g != nil {
				s.groups = make([]*Group, n)
			}
			return s
		},
		func(data any) {
			s := data.(*splitting)
			s.color[rank], s.key[rank] = color, key
			if s.groups != nil {
				s.groups[rank] = g
			}
		},
		func(data any) { data.(*splitting).finish(c.core) })
	if err != nil {
		return nil, err
	}
	if err := c.await(op, a.done); err != nil {
		return nil, err
	}
	s := a.data.(*splitting)
	if s.fault != nil {
		f := *s.fault
		f.Rank = c.rank
		return nil, &f
	}
	if s.cores[rank] == nil {
		return nil, nil
	}
	return &Comm{core: s.cores[rank], rank: s.ranks[rank]}, nil
}

// finish makes the new communicators once every rank of parent has given its part:
// one per color, in increasing order of color, each with its ranks ordered by key
// then by rank in parent.
func (s *splitting) finish(parent *commCore) {
	n := len(s.color)
	for i := 1; i < len(s.groups); i++ {
		if cmp, _ := CompareGroups(s.groups[0], s.groups[i]); cmp != Ident {
			s.fault = errs.New(errs.Group, "Create", NoValue, "rank 0 passed %v but rank %d passed %v: every rank must pass the same group", s.groups[0], i, s.groups[i])
			return
		}
	}
	order := make([]int, 0, n)
	for r := range n {
		if s.color[r] != Undefined {
			order = append(order, r)
		}
	}
	slices.SortFunc(order, func(x, y int) int {
		if s.color[x] != s.color[y] {
			return s.color[x] - s.color[y]
		}
		if s.key[x] != s.key[y] {
			if s.key[x] < s.key[y] {
				return -1
			}
			return 1
		}
		return x - y
	})
	s.cores, s.ranks = make([]*commCore, n), make([]int, n)
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && s.color[order[end]] == s.color[order[start]] {
			end++
		}
		peers := make([]*p2p.Endpoint, end-start)
		for i, r := range order[start:end] {
			peers[i] = parent.Peers[r]
		}
		core := parent.derive(peers)
		for i, r := range order[start:end] {
			s.cores[r], s.ranks[r] = core, i
		}
		start = end
	}
}

// await waits until done is closed or the job is aborted: it polls briefly (when the
// ranks of c do not outnumber the processors), then parks.
func (c *Comm) await(op string, done chan struct{}) error {
	closed := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	if closed() {
		return nil
	}
	if d := c.core.World.Config().Spin; c.Size() <= runtime.GOMAXPROCS(0) && spin.Until(d, closed) {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-c.core.World.Aborted():
		return c.abortError(c.core.World.Cause(), op, NoValue, NoValue)
	}
}
