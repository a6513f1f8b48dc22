package mpi

import (
	"reflect"
	"unsafe"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
)

// Collectives. Every rank of a communicator calls the same collectives in the same
// order (as MPI requires); collectives never go through point-to-point matching, so
// they cannot match a Send or Recv, and collectives on a communicator made by Dup
// are independent of those on the original. Different goroutines of a rank may run
// collectives on different communicators at once.
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
	if err := c.checkColl("Barrier"); err != nil {
		return err
	}
	if c.core.spans {
		return c.collective(c.core.across().Barrier(c.rank), "Barrier")
	}
	return c.collective(c.core.coll.Barrier(c.rank), "Barrier")
}

// Bcast copies buf of the root into buf of every other rank. Every rank's buf must
// have the root's length: a shorter one is ErrTruncate, a longer one ErrCount, on
// that rank and at the root. Each rank copies once, straight from the root's
// buffer; the root returns once all have copied.
func Bcast[T Elem](c *Comm, buf []T, root int) error {
	if err := c.checkRoot("Bcast", root); err != nil {
		return err
	}
	if c.core.spans {
		return c.collective(c.core.across().Bcast(c.rank, bytesOf(buf), sizeOf[T](), root), "Bcast")
	}
	return c.collective(c.core.coll.Bcast(c.rank, bytesOf(buf), sizeOf[T](), root), "Bcast")
}

// Reduce combines the ranks' send buffers element by element with op into recv at
// the root: recv[i] = send0[i] op send1[i] op ... in rank order (so a non-commutative
// NewOp gets MPI's result). recv is used only at the root (it may be nil elsewhere)
// and must hold at least len(send) elements there; the result fills its first
// len(send). Every rank's send must have the root's length (ErrCount). At the root,
// a nil send (or send equal to recv) means in place: recv holds the root's data.
// Send buffers are never written. The result is the same for the same inputs,
// whatever the timing.
func Reduce[T Elem](c *Comm, send, recv []T, op Op, root int) error {
	const name = "Reduce"
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	fn, err := op.kernel(reflect.TypeFor[T](), name, c.rank)
	if err != nil {
		return err
	}
	if c.rank == root {
		if send, err = inPlace(c, name, send, recv); err != nil {
			return err
		}
	} else {
		recv = nil
	}
	if c.core.spans {
		return c.collective(c.core.across().Reduce(c.rank, bytesOf(send), bytesOf(recv), sizeOf[T](), fn, op.Commutative(), root), name)
	}
	return c.collective(c.core.coll.Reduce(c.rank, bytesOf(send), bytesOf(recv), sizeOf[T](), fn, root), name)
}

// Allreduce is Reduce with the result in every rank's recv, which must hold at
// least len(send) elements. A nil send (or send equal to recv) means in place.
// Lengths are compared with rank 0's.
func Allreduce[T Elem](c *Comm, send, recv []T, op Op) error {
	const name = "Allreduce"
	if err := c.checkColl(name); err != nil {
		return err
	}
	fn, err := op.kernel(reflect.TypeFor[T](), name, c.rank)
	if err != nil {
		return err
	}
	if send, err = inPlace(c, name, send, recv); err != nil {
		return err
	}
	if c.core.spans {
		return c.collective(c.core.across().Allreduce(c.rank, bytesOf(send), bytesOf(recv), sizeOf[T](), fn, op.Commutative()), name)
	}
	return c.collective(c.core.coll.Allreduce(c.rank, bytesOf(send), bytesOf(recv), sizeOf[T](), fn), name)
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
func inPlace[T Elem](c *Comm, op string, send, recv []T) ([]T, error) {
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
	sb, rb := bytesOf(send), bytesOf(recv)
	s, r := uintptr(unsafe.Pointer(unsafe.SliceData(sb))), uintptr(unsafe.Pointer(unsafe.SliceData(rb)))
	if s < r+uintptr(len(rb)) && r < s+uintptr(len(sb)) {
		return nil, errs.New(errs.Buffer, op, c.rank, "the send and receive buffers overlap without being the same (for in place, pass a nil send)")
	}
	return send, nil
}

// collective turns what the collective engine returned into the error of op.
func (c *Comm) collective(err error, op string) error {
	if err == nil {
		return nil
	}
	if err == coll.ErrAborted {
		if cause := c.core.World.Cause(); cause != nil {
			return c.abortError(cause, op, NoValue, NoValue)
		}
		return errs.New(errs.Intern, op, c.rank, "a collective was interrupted but the job was not aborted")
	}
	return err
}
