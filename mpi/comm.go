package mpi

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
	"github.com/weft-mpi/weft/internal/xcoll"
)

// The wildcards and the null process, as in MPI.
const (
	AnySource = errs.AnySource // Recv, Probe: a message from any rank
	AnyTag    = errs.AnyTag    // Recv, Probe: a message with any tag
	ProcNull  = errs.ProcNull  // a rank that every send and receive to or from completes at once
	TagUB     = 1<<31 - 1      // the largest tag
	Undefined = -32766         // GetCount of a message that is not a whole number of elements; Waitany with no active request
)

// Comm is one rank's handle on a communicator: a group of ranks and a context that
// keeps its messages apart from every other communicator's.
type Comm struct {
	core   *commCore
	rank   int
	freed  atomic.Bool
	made   uint64                  // calls making communicators (Dup, Split, ...) by this rank on this communicator; under core.mu
	blocks []int                   // the byte counts and displacements of the rank's v-collective in progress (see blocksOf)
	slab   atomic.Pointer[reqSlab] // where the rank's requests on c come from (see request)
}

// commCore is what all the ranks of a communicator share.
type commCore struct {
	p2p.Comm
	job   *job
	world bool
	spans bool       // has ranks in other procs
	coll  *coll.Comm // the collectives' state when every rank is in this proc

	xonce sync.Once
	x     *xcoll.Comm // the collectives' state when spans; see across

	mu      sync.Mutex
	pending map[uint64]*agreement // calls making communicators that some ranks have made and others not yet
}

// agreement lets the k-th call making communicators (Dup, Split, Create, SplitType)
// of every rank of a communicator agree on its result without any message: the first
// rank to arrive makes the shared data, every rank adds its part under the
// communicator's lock, and the last one forgets it and, for calls that must see
// every rank's part, finishes the data and closes done.
type agreement struct {
	op   string
	left int           // ranks yet to arrive
	data any           // the call's shared state
	done chan struct{} // closed once the last rank has finished data; nil if nobody waits
}

// agree joins the calling rank's next call making communicators on c, which every
// rank of c makes in the same order (as MPI requires of collectives). The first rank
// to arrive makes the data with start; every rank then runs join on it under c's
// lock. If finish is not nil, the last rank to arrive runs it outside the lock, then
// closes done, which the others wait for. A rank whose call is not the same operation
// as the others' gets an error without taking part.
func (c *Comm) agree(op string, start func() any, join, finish func(data any)) (*agreement, error) {
	core := c.core
	ranks := c.Size()
	if core.spans {
		ranks = core.across().Local() // the ranks of this proc meet; splitAcross did the rest
	}
	core.mu.Lock()
	seq := c.made
	c.made++
	a := core.pending[seq]
	if a == nil {
		if core.pending == nil {
			core.pending = make(map[uint64]*agreement)
		}
		a = &agreement{op: op, left: ranks, data: start()}
		if finish != nil {
			a.done = make(chan struct{})
		}
		core.pending[seq] = a
	}
	if a.op != op {
		core.mu.Unlock()
		return nil, errs.New(errs.Arg, op, c.rank,
			"call %d making a communicator from this one is %s here but %s on another rank: every rank must make them in the same order", seq+1, op, a.op)
	}
	if join != nil {
		join(a.data)
	}
	a.left--
	last := a.left == 0
	if last {
		delete(core.pending, seq)
	}
	core.mu.Unlock()
	if last && finish != nil {
		finish(a.data)
		close(a.done)
	}
	return a, nil
}

// derive makes this proc's shared state of a new communicator whose ranks are
// peers, in that order, with context ctx and its own collective state.
func (core *commCore) derive(peers []*p2p.Endpoint, ctx uint32) *commCore {
	nc := &commCore{Comm: p2p.Comm{Ctx: ctx, Peers: peers, World: core.World}, job: core.job}
	for _, ep := range peers {
		if !ep.Local() {
			nc.spans = true
			break
		}
	}
	if !nc.spans {
		nc.coll = coll.New(core.job.colls, len(peers), core.World.Config().Spin)
	}
	return nc
}

// across returns the collective state of a communicator that spans procs, made
// on first use (the world communicator's core is made before the collective
// channel is known to it).
func (core *commCore) across() *xcoll.Comm {
	core.xonce.Do(func() {
		procs := make([]int, len(core.Peers))
		for i, ep := range core.Peers {
			procs[i] = ep.Proc()
		}
		core.x = xcoll.New(core.job.net, core.Ctx, procs, core.job.colls, core.World.Config().Spin)
	})
	return core.x
}

// Context ids. Proc p of a job of P procs numbers the communicators it makes
// 1+p, 1+p+P, 1+p+2P, ...: id 1+p+P*k, k counted by the proc's own job.nextCtx,
// which only grows (0 is the world's). A communicator that spans procs takes the
// id that the proc of its rank 0 reserved for the call that made it (see
// splitAcross); every other one an id of this proc. So no two communicators of a
// job share an id, without any central allocator, as long as no proc makes more
// than 2^32/P of them (a single-proc job: 2^32-1); a call that would need more
// fails with ErrIntern across procs (in one proc the ids wrap, as they always did).

// newCtx returns a new context id of this proc.
func (j *job) newCtx() uint32 {
	id, _ := ctxID(j.world, j.world.Self(), uint64(j.nextCtx.Add(1)-1))
	return id
}

// ctxID returns proc's k-th context id, and whether it fits in 32 bits.
func ctxID(wd *p2p.World, proc int, k uint64) (uint32, bool) {
	procs := uint64(1)
	if l := wd.Layout(); l != nil {
		procs = uint64(l.Procs())
	}
	id := 1 + uint64(proc) + procs*k
	return uint32(id), id <= math.MaxUint32
}

// Rank returns the calling rank's number in c, from 0 to Size()-1.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in c.
func (c *Comm) Size() int { return len(c.core.Peers) }

// ThreadLevel returns the thread level provided to the job.
func (c *Comm) ThreadLevel() ThreadLevel { return c.core.job.level }

// String names the communicator and rank, for logs.
func (c *Comm) String() string {
	if c == nil {
		return "Comm(nil)"
	}
	return fmt.Sprintf("Comm(ctx %d, rank %d of %d)", c.core.Ctx, c.rank, c.Size())
}

// usable reports whether c is a live communicator of a running job: check's common
// case, small enough to inline into the checks that every call makes.
func (c *Comm) usable() bool {
	return c != nil && c.core != nil && !c.freed.Load() && c.core.World.Cause() == nil
}

// check validates c itself and that the job still runs.
func (c *Comm) check(op string) error {
	if c.usable() {
		return nil
	}
	if c == nil || c.core == nil {
		return errs.New(errs.Comm, op, NoValue, "the communicator is nil")
	}
	if c.freed.Load() {
		return errs.New(errs.Comm, op, c.rank, "the communicator was freed")
	}
	if cause := c.core.World.Cause(); cause != nil {
		return c.abortError(cause, op, NoValue, NoValue)
	}
	return nil
}

// abortError describes, from this rank's point of view, an operation that the end of
// the job interrupted.
func (c *Comm) abortError(cause *Error, op string, peer, tag int) *Error {
	return &Error{Class: cause.Class, Op: op, Rank: c.rank, Peer: peer, Tag: tag, Code: cause.Code, Detail: cause.Detail}
}

// failed turns an error from the engine into the error of op.
func (c *Comm) failed(err error, op string, peer, tag int) error {
	if err == p2p.ErrAborted {
		return c.abortError(c.core.World.Cause(), op, peer, tag)
	}
	if e, ok := err.(*Error); ok && e.Op == "" { // a lost proc, in errors-return mode
		return c.abortError(e, op, peer, tag)
	}
	return err
}

// Dup returns a new communicator with the same ranks and a new context. Like MPI's,
// it is collective: every rank of c calls it, in the same order as its other calls
// making communicators from c (Dup, Split, SplitType, Create).
func (c *Comm) Dup() (*Comm, error) {
	if err := c.check("Dup"); err != nil {
		return nil, err
	}
	if c.core.spans {
		return c.splitAcross("Dup", 0, c.rank, nil)
	}
	a, err := c.agree("Dup", func() any { return c.core.derive(c.core.Peers, c.core.job.newCtx()) }, nil, nil)
	if err != nil {
		return nil, err
	}
	return &Comm{core: a.data.(*commCore), rank: c.rank}, nil
}

// Free releases the calling rank's handle; using it afterwards is an ErrComm error.
// The world communicator cannot be freed.
func (c *Comm) Free() error {
	if c == nil || c.core == nil {
		return errs.New(errs.Comm, "Free", NoValue, "the communicator is nil")
	}
	if c.core.world {
		return errs.New(errs.Comm, "Free", c.rank, "the world communicator cannot be freed")
	}
	if c.freed.Swap(true) {
		return errs.New(errs.Comm, "Free", c.rank, "the communicator was already freed")
	}
	return nil
}

// Comparison is the result of Compare.
type Comparison int

// The results of Compare, as MPI's.
const (
	Ident     Comparison = iota // the same communicator
	Congruent                   // the same ranks in the same order, another context
	Similar                     // the same ranks in another order
	Unequal                     // other ranks
)

// Compare compares two communicators as MPI_Comm_compare does.
func Compare(a, b *Comm) (Comparison, error) {
	if err := a.check("Compare"); err != nil {
		return Unequal, err
	}
	if err := b.check("Compare"); err != nil {
		return Unequal, err
	}
	if a.core == b.core {
		return Ident, nil
	}
	pa, pb := a.core.Peers, b.core.Peers
	if len(pa) != len(pb) {
		return Unequal, nil
	}
	same, in := true, make(map[*p2p.Endpoint]bool, len(pa))
	for i := range pa {
		same = same && pa[i] == pb[i]
		in[pa[i]] = true
	}
	if same {
		return Congruent, nil
	}
	for _, p := range pb {
		if !in[p] {
			return Unequal, nil
		}
	}
	return Similar, nil
}

// Abort ends the whole job: every rank's waiting and later operations return an
// ErrAborted error carrying code, and Main exits with code. It returns that error.
func (c *Comm) Abort(code int) error {
	rank := NoValue
	if c != nil {
		rank = c.rank
	}
	cause := &Error{Class: errs.Aborted, Op: "Abort", Rank: NoValue, Peer: NoValue, Tag: NoValue, Code: code,
		Detail: fmt.Sprintf("rank %d called Abort(%d)", rank, code)}
	if c == nil || c.core == nil {
		return errs.New(errs.Comm, "Abort", NoValue, "the communicator is nil")
	}
	c.core.World.Abort(cause)
	c.core.job.colls.Abort()
	return c.abortError(c.core.World.Cause(), "Abort", NoValue, NoValue)
}

// self is the calling rank's endpoint.
func (c *Comm) self() *p2p.Endpoint { return c.core.Peers[c.rank] }
