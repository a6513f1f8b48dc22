package mpi

import (
	"hash/fnv"
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
// calls making communicators from c (Dup, Split, Create, SplitType). Within one
// proc it takes no message: the ranks meet in state that c's ranks share; across
// procs they exchange colors and keys in one Allgather. Each returns once every
// rank of c has given its color and key. Each new communicator has its own
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
// In a job of one process both kinds give every rank a communicator with all the
// ranks of c, ordered by key.
func (c *Comm) SplitType(kind, key int) (*Comm, error) {
	if err := c.check("SplitType"); err != nil {
		return nil, err
	}
	color := 0
	switch kind {
	case SplitShared, SplitProc:
		if l := c.core.World.Layout(); l != nil {
			color = c.self().Proc()
			if kind == SplitShared {
				color, _ = l.HostOf(color)
			}
		}
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
	if c.core.spans {
		return c.splitAcross(op, color, key, g)
	}
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
		func(data any) {
			s := data.(*splitting)
			if s.sameGroups() {
				s.finish(c.core, func(peers []*p2p.Endpoint, _ int) *commCore { return c.core.derive(peers, c.core.job.newCtx()) })
			}
		})
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

// sameGroups checks that every rank of a Create passed the same group, and
// records the fault otherwise.
func (s *splitting) sameGroups() bool {
	for i := 1; i < len(s.groups); i++ {
		if cmp, _ := CompareGroups(s.groups[0], s.groups[i]); cmp != Ident {
			s.fault = errs.New(errs.Group, "Create", NoValue, "rank 0 passed %v but rank %d passed %v: every rank must pass the same group", s.groups[0], i, s.groups[i])
			return false
		}
	}
	return true
}

// finish makes the new communicators once every rank of parent has given its part:
// one per color, in increasing order of color, each with its ranks ordered by key
// then by rank in parent. newCore returns the shared state of one, given its ranks'
// endpoints and the parent rank of its rank 0, or nil for one that this proc does
// not hold.
func (s *splitting) finish(parent *commCore, newCore func(peers []*p2p.Endpoint, first int) *commCore) {
	n := len(s.color)
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
		core := newCore(peers, order[start])
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

// splitAcross is split for a communicator that spans procs. Every rank gives its
// color, its key, a context id that its proc reserves for it, and a fingerprint
// of Create's group in one Allgather across procs, so that every rank holds the
// same table. Each new communicator takes the id reserved by its rank 0's proc
// (see ctxID), which every proc computes alike. Then the ranks of each proc meet
// in an agreement: the first to arrive makes, from the table, this proc's shared
// state of every new communicator with a rank here.
func (c *Comm) splitAcross(op string, color, key int, g *Group) (*Comm, error) {
	const fields = 4
	n, wd := c.Size(), c.core.World
	mine := []int64{int64(color), int64(key), int64(c.core.job.nextCtx.Add(1) - 1), fingerprint(g)}
	table := make([]int64, fields*n)
	if err := c.collective(c.core.across().Allgather(c.rank, bytesOf(mine), bytesOf(table), sizeOf[int64]()), op); err != nil {
		return nil, err
	}
	row := func(r int) []int64 { return table[fields*r : fields*(r+1)] }
	for r := range n {
		if row(r)[3] != row(0)[3] {
			return nil, errs.New(errs.Group, op, c.rank, "rank 0 and rank %d passed different groups: every rank must pass the same group", r)
		}
		if _, ok := ctxID(wd, c.core.Peers[r].Proc(), uint64(row(r)[2])); !ok {
			return nil, errs.New(errs.Intern, op, c.rank, "proc %d has made all the %d communicators it can", c.core.Peers[r].Proc(), row(r)[2])
		}
	}
	a, err := c.agree(op, func() any {
		s := &splitting{color: make([]int, n), key: make([]int, n)}
		for r := range n {
			s.color[r], s.key[r] = int(row(r)[0]), int(row(r)[1])
		}
		s.finish(c.core, func(peers []*p2p.Endpoint, first int) *commCore {
			if !slices.ContainsFunc(peers, (*p2p.Endpoint).Local) {
				return nil
			}
			id, _ := ctxID(wd, peers[0].Proc(), uint64(row(first)[2]))
			return c.core.derive(peers, id)
		})
		return s
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	s := a.data.(*splitting)
	if s.cores[c.rank] == nil {
		return nil, nil
	}
	return &Comm{core: s.cores[c.rank], rank: s.ranks[c.rank]}, nil
}

// fingerprint names the members of g, in order, in 64 bits (0 for no group), so
// that ranks of several procs can check that they passed the same group.
func fingerprint(g *Group) int64 {
	if g == nil {
		return 0
	}
	h := fnv.New64a()
	var b [8]byte
	for _, m := range g.members {
		for i := range b {
			b[i] = byte(uint64(m) >> (8 * i))
		}
		h.Write(b[:])
	}
	return int64(h.Sum64() | 1)
}
