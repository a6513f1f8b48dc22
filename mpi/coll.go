package mpi

import (
	"reflect"
	"unsafe"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/xcoll"
)

// Collectives. Every rank of a communicator calls the same collectives in the same
// order (as MPI requires), blocking and nonblocking (icoll.go) mixed; collectives
// never go through point-to-point matching, so they cannot match a Send or Recv,
// and collectives on a communicator made by Dup are independent of those on the
// original. Different goroutines of a rank may run collectives on different
// communicators at once.
//
// Arguments are checked on each rank before it takes part: a rank whose call is
// invalid (nil or freed communicator, root out of range, an Op not defined on the
// type, a receive buffer too short) returns the error at once without taking part,
// and the others wait for it until the job ends (a rank function returning that
// error ends it). Disagreements between ranks (lengths, roots, element sizes,
// different collectives) are found inside the collective: the ranks involved return
// an error and nobody hangs.
//
// Across procs (a communicator with ranks in several procs) every collective runs
// on two levels (internal/xcoll): the ranks of each proc meet on shared memory,
// one leader per proc talks to the others on the collective channel. There a
// disagreement found in one proc is reported to the ranks of the procs that
// depend on it (for Bcast, the procs below it in the broadcast; for Gather(v),
// the root's proc; for Scatter(v), the proc of the rank whose buffer is too short;
// for the others, every proc that receives from it), not always to every rank.
// Ranks that call different collectives, or name different roots or element
// sizes, get an error when their procs exchange a message or share a leader; ranks
// of different procs naming roots in different procs may not (docs/architecture.md).
//
// In place: pass a nil send slice (or the receive slice itself) to Reduce at the
// root or to Allreduce; the receive buffer then holds the rank's contribution and
// is replaced by the result, as with MPI_IN_PLACE.

// Barrier returns once every rank of c has called it.
func (c *Comm) Barrier() error {
	if l := c.direct(); l != nil {
		return c.collective(l.Barrier(c.rank), "Barrier")
	}
	if x := c.crossing(0); x != nil {
		x.Enter()
		defer x.Leave()
		return c.collective(x.Barrier(c.rank), "Barrier")
	}
	var o collOp
	return c.run(&o, barrierOp(&o, c, "Barrier"))
}

// direct returns the engine of c when a blocking collective of the rank may call
// it straight, without a collOp: c is usable, lives in this proc and the rank has
// no nonblocking collective outstanding on it. A barrier of hundreds of ranks pays
// for every line of stack each rank touches per call, and a small Bcast of 4
// ranks spent a sixth of its time building a collOp and going through run's layers.
// A call that direct turns away goes the collOp's way, whose checks name its fault:
// so a valid call checks c once, here (a 4-rank Bcast: 1,507 -> 1,363 instructions,
// one processor). Every communicator has a rank 0.
func (c *Comm) direct() *coll.Comm { return c.directAt(0) }

// directAt is direct for a collective rooted at root, which must be a rank of c:
// one call in all.
func (c *Comm) directAt(root int) *coll.Comm {
	if !c.usable() || uint(root) >= uint(c.Size()) {
		return nil
	}
	return c.local()
}

// crossing is directAt for a communicator that spans procs: its collectives
// across procs, which the caller brackets with Enter and Leave, as collOp.do
// does. The collOp and run's layers were a sixth of the instructions of a
// Barrier of 4 procs of one rank each (1x4), whose time grows with them: two
// procs share each CPU.
func (c *Comm) crossing(root int) *xcoll.Comm {
	if !c.usable() || !c.core.spans || uint(root) >= uint(c.Size()) {
		return nil
	}
	if !c.queued().Idle() {
		return nil
	}
	return c.core.across()
}

// local is direct for a c already checked: its engine, if c lives in this proc and
// the rank has no nonblocking collective outstanding on it.
func (c *Comm) local() *coll.Comm {
	if c.core.spans {
		return nil
	}
	l := c.core.coll
	if !l.Queued(c.rank).Idle() {
		return nil
	}
	return l
}

func barrierOp(o *collOp, c *Comm, name string) error {
	o.k, o.name = coll.KindBarrier, name
	return c.checkColl(name)
}

// Bcast copies buf of the root into buf of every other rank. Every rank's buf must
// have the root's length: a shorter one is ErrTruncate, a longer one ErrCount, on
// that rank and at the root. Each rank copies once, straight from the root's
// buffer; the root returns once all have copied.
func Bcast[T Elem](c *Comm, buf []T, root int) error {
	if l := c.directAt(root); l != nil {
		return c.collective(l.Bcast(c.rank, bytesOf(buf), sizeOf[T](), root), "Bcast")
	}
	if x := c.crossing(root); x != nil {
		x.Enter()
		defer x.Leave()
		return c.collective(x.Bcast(c.rank, bytesOf(buf), sizeOf[T](), root), "Bcast")
	}
	var o collOp
	return c.run(&o, bcastOp(&o, c, "Bcast", buf, root))
}

func bcastOp[T Elem](o *collOp, c *Comm, name string, buf []T, root int) error {
	o.k, o.name, o.el, o.root, o.p.Send = coll.KindBcast, name, sizeOf[T](), root, bytesOf(buf)
	return c.checkRoot(name, root)
}

// Reduce combines the ranks' send buffers element by element with op into recv at
// the root: recv[i] = send0[i] op send1[i] op ... in rank order (so a non-commutative
// NewOp gets MPI's result). recv is used only at the root (it may be nil elsewhere)
// and must hold at least len(send) elements there; the result fills its first
// len(send). Every rank's send must have the root's length (ErrCount). At the root,
// a nil send (or send equal to recv) means in place: recv holds the root's data.
// Send buffers are never written. The result is the same for the same inputs,
// whatever the timing.
func Reduce[T Reducible](c *Comm, send, recv []T, op Op, root int) error {
	if l := c.directAt(root); l != nil {
		fn, sb, rb, err := reduceBufs(c, "Reduce", send, recv, op, root)
		if err != nil {
			return err
		}
		return c.collective(l.Reduce(c.rank, sb, rb, width[T](), fn, root), "Reduce")
	}
	if x := c.crossing(root); x != nil {
		fn, sb, rb, err := reduceBufs(c, "Reduce", send, recv, op, root)
		if err != nil {
			return err
		}
		x.Enter()
		defer x.Leave()
		return c.collective(x.Reduce(c.rank, sb, rb, width[T](), fn, op.Commutative(), root), "Reduce")
	}
	var o collOp
	return c.run(&o, reduceOp(&o, c, "Reduce", send, recv, op, root))
}

func reduceOp[T Reducible](o *collOp, c *Comm, name string, send, recv []T, op Op, root int) error {
	fn, sb, rb, err := reduceArgs(c, name, send, recv, op, root)
	o.k, o.name, o.el, o.commutative, o.fn, o.root = coll.KindReduce, name, width[T](), op.Commutative(), fn, root
	o.p.Send, o.p.Recv = sb, rb
	return err
}

// reduceArgs checks a Reduce's arguments and returns its kernel and the calling
// rank's buffers (no receive buffer but at the root).
func reduceArgs[T Reducible](c *Comm, name string, send, recv []T, op Op, root int) (fn coll.Op, sb, rb []byte, err error) {
	if err = c.checkRoot(name, root); err != nil {
		return
	}
	return reduceBufs(c, name, send, recv, op, root)
}

// reduceBufs is reduceArgs on a checked c and root: the direct path's.
func reduceBufs[T Reducible](c *Comm, name string, send, recv []T, op Op, root int) (fn coll.Op, sb, rb []byte, err error) {
	if fn, err = op.kernel(reflect.TypeFor[T](), name, c.rank); err != nil {
		return
	}
	if c.rank != root {
		return fn, raw(send), nil, nil
	}
	if send, err = inPlace(c, name, send, recv); err != nil {
		return
	}
	return fn, raw(send), raw(recv), nil
}

// Allreduce is Reduce with the result in every rank's recv, which must hold at
// least len(send) elements. A nil send (or send equal to recv) means in place.
// Lengths are compared with rank 0's.
func Allreduce[T Reducible](c *Comm, send, recv []T, op Op) error {
	if l := c.direct(); l != nil {
		fn, sb, rb, err := allreduceBufs(c, "Allreduce", send, recv, op)
		if err != nil {
			return err
		}
		return c.collective(l.Allreduce(c.rank, sb, rb, width[T](), fn), "Allreduce")
	}
	if x := c.crossing(0); x != nil {
		fn, sb, rb, err := allreduceBufs(c, "Allreduce", send, recv, op)
		if err != nil {
			return err
		}
		x.Enter()
		defer x.Leave()
		return c.collective(x.Allreduce(c.rank, sb, rb, width[T](), fn, op.Commutative()), "Allreduce")
	}
	var o collOp
	return c.run(&o, allreduceOp(&o, c, "Allreduce", send, recv, op))
}

func allreduceOp[T Reducible](o *collOp, c *Comm, name string, send, recv []T, op Op) error {
	fn, sb, rb, err := allreduceArgs(c, name, send, recv, op)
	o.k, o.name, o.el, o.commutative, o.fn = coll.KindAllreduce, name, width[T](), op.Commutative(), fn
	o.p.Send, o.p.Recv = sb, rb
	return err
}

// allreduceArgs checks an Allreduce's arguments and returns its kernel and the
// calling rank's buffers.
func allreduceArgs[T Reducible](c *Comm, name string, send, recv []T, op Op) (fn coll.Op, sb, rb []byte, err error) {
	if err = c.checkColl(name); err != nil {
		return
	}
	return allreduceBufs(c, name, send, recv, op)
}

// allreduceBufs is allreduceArgs on a checked c: the direct path's.
func allreduceBufs[T Reducible](c *Comm, name string, send, recv []T, op Op) (fn coll.Op, sb, rb []byte, err error) {
	if fn, err = op.kernel(reflect.TypeFor[T](), name, c.rank); err != nil {
		return
	}
	if send, err = inPlace(c, name, send, recv); err != nil {
		return
	}
	return fn, raw(send), raw(recv), nil
}

// reduction starts the collOp of a reduction of kind k: c checked, and op's
// function on elements of T.
func reduction[T Reducible](o *collOp, c *Comm, k coll.Kind, name string, op Op) error {
	o.k, o.name, o.el, o.commutative = k, name, width[T](), op.Commutative()
	var err error
	o.fn, err = kernelOf[T](c, name, op)
	return err
}

// kernelOf checks c for a reduction and returns op's function on elements of T.
func kernelOf[T Reducible](c *Comm, name string, op Op) (coll.Op, error) {
	if err := c.checkColl(name); err != nil {
		return coll.Op{}, err
	}
	return op.kernel(reflect.TypeFor[T](), name, c.rank)
}

// checkColl checks c for a collective.
func (c *Comm) checkColl(op string) error { return c.check(op) }

// checkRoot validates c and root.
func (c *Comm) checkRoot(op string, root int) error {
	if err := c.checkColl(op); err != nil {
		return err
	}
	if root < 0 || root >= c.Size() {
		return errs.New(errs.Root, op, c.rank, "root %d is not a rank of this %d-rank communicator (want 0..%d)", root, c.Size(), c.Size()-1)
	}
	return nil
}

// inPlace returns the send buffer of a rank that receives a result: recv itself
// when in place (send nil, or starting where recv starts), else send, checked
// against recv.
func inPlace[T Reducible](c *Comm, op string, send, recv []T) ([]T, error) {
	switch {
	case send == nil:
		return recv, nil
	case len(recv) < len(send):
		return nil, errs.New(errs.Count, op, c.rank, "the receive buffer holds %d elements, fewer than the %d sent", len(recv), len(send))
	case len(send) == 0:
		return send, nil
	case unsafe.SliceData(send) == unsafe.SliceData(recv):
		return send, nil // in place
	}
	sb, rb := raw(send), raw(recv)
	s, r := uintptr(unsafe.Pointer(unsafe.SliceData(sb))), uintptr(unsafe.Pointer(unsafe.SliceData(rb)))
	if s < r+uintptr(len(rb)) && r < s+uintptr(len(sb)) {
		return nil, errs.New(errs.Buffer, op, c.rank, "the send and receive buffers overlap without being the same (for in place, pass a nil send)")
	}
	return send, nil
}

// collective turns what the collective engine returned into the error of op: the
// engine names its collectives as the blocking calls, so the error of a
// nonblocking one is renamed after it.
func (c *Comm) collective(err error, op string) error {
	if err == nil {
		return nil
	}
	return c.collectiveError(err, op)
}

// collectiveError is collective for an error: apart, so that collective inlines.
func (c *Comm) collectiveError(err error, op string) error {
	if err == coll.ErrAborted {
		if cause := c.core.World.Cause(); cause != nil {
			return c.abortError(cause, op, NoValue, NoValue)
		}
		if loss := c.core.World.Loss(); loss != nil {
			return c.abortError(loss, op, NoValue, NoValue)
		}
		return errs.New(errs.Intern, op, c.rank, "a collective was interrupted but the job was not aborted")
	}
	if e, ok := err.(*Error); ok && e.Op != op {
		renamed := *e
		renamed.Op = op
		return &renamed
	}
	return err
}
