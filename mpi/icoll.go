package mpi

import (
	"slices"
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/xcoll"
)

// Nonblocking collectives. Ibarrier, Ibcast, Ireduce, ... take the arguments of
// their blocking twins, check them at once in the same way (a bad argument is an
// error of the call, and no request is made), and return a Request that completes
// when the collective is over on this rank; Wait, Test and the rest of the family
// return its error, named after the nonblocking call. Buffers must not be touched
// until then, as in MPI. Several may be outstanding on a communicator, and every
// rank must issue a communicator's collectives, blocking and nonblocking mixed, in
// the same order: they match in that order.
//
// Each rank keeps its collectives on a communicator in a queue (coll.Queue): a
// nonblocking collective runs, on a goroutine of the queue's, once those issued
// before it are over, whether or not the rank calls into Weft meanwhile; a
// blocking collective issued while the queue is not empty waits its turn there,
// and otherwise runs on the caller's goroutine as if nothing else existed. So
// nonblocking collectives overlap the rank's computation and its point-to-point
// traffic, and collectives of one communicator run one after another.

// collOp is one collective call, checked and ready to run: what the engines of
// internal/coll and internal/xcoll take. The functions that make one (bcastOp,
// scatterOp, ...) fill in the fields of a zero collOp one by one: a composite
// literal assigned through the pointer (or to its Part) is built on the stack and
// then copied, which was 13% of a 4-rank Scatter's samples.
type collOp struct {
	k           coll.Kind
	name        string // the call, for errors
	root, el    int    // the root (rooted collectives), the element size in bytes
	p           coll.Part
	fn          coll.Op // reductions
	commutative bool
}

// run runs a blocking collective, or returns err, its arguments' error. When the
// rank has nonblocking collectives outstanding on c, it waits for them in c's queue.
// It takes o by pointer, as issue does: a collOp is a few hundred bytes, and copying
// it on every call cost a tenth of a 4-rank Bcast.
func (c *Comm) run(o *collOp, err error) error {
	if err != nil {
		return err
	}
	if l := c.local(); l != nil {
		return c.collective(o.local(c.rank, l), o.name)
	}
	return c.runBehind(o)
}

// runBehind runs o once the rank's outstanding nonblocking collectives on c are
// over, if it has any.
func (c *Comm) runBehind(o *collOp) error {
	if q := c.queued(); !q.Idle() {
		done := make(chan error, 1)
		behind := *o
		q.Go(func() { done <- behind.do(c) })
		return c.collective(<-done, o.name)
	}
	return c.collective(o.do(c), o.name)
}

// issue starts a nonblocking collective behind the rank's outstanding ones on c,
// or returns err, its arguments' error.
func (c *Comm) issue(op *collOp, err error) (*Request, error) {
	if err != nil {
		return nil, err
	}
	nb, o := &icoll{name: op.name, done: make(chan struct{})}, *op
	for _, s := range []*[]int{&o.p.SendCounts, &o.p.SendDispls, &o.p.RecvCounts, &o.p.RecvDispls} {
		*s = slices.Clone(*s) // the rank's memory for them serves its next call (blocksOf)
	}
	c.queue().Go(func() { nb.finish(c.collective(o.do(c), o.name)) })
	r := c.request()
	r.c, r.nbc = c, nb
	return r, nil
}

// queued returns the calling rank's queue of collectives on c, nil if it never
// issued a nonblocking one there.
func (c *Comm) queued() *coll.Queue {
	if c.core.spans {
		return c.core.across().Queued(c.rank)
	}
	return c.core.coll.Queued(c.rank)
}

// queue returns the calling rank's queue of collectives on c.
func (c *Comm) queue() *coll.Queue {
	if c.core.spans {
		return c.core.across().Queue(c.rank)
	}
	return c.core.coll.Queue(c.rank)
}

// icoll is the state of a nonblocking collective that its Request waits for.
type icoll struct {
	name  string                        // the call that started it, for errors
	over  atomic.Bool                   // set, after err, when the collective is over
	done  chan struct{}                 // closed when over is set, for Wait to park on
	err   error                         // the outcome
	watch atomic.Pointer[chan struct{}] // a Waitany's doorbell, rung when over
}

// finish records the collective's outcome and wakes its waiters. Waitany stores
// its doorbell and then loads over; finish stores over and then loads the doorbell:
// one of them sees the other.
func (nb *icoll) finish(err error) {
	nb.err = err
	nb.over.Store(true)
	close(nb.done)
	if bell := nb.watch.Load(); bell != nil {
		select {
		case *bell <- struct{}{}:
		default:
		}
	}
}

// do runs the collective on the calling rank's goroutine or its queue's, and
// returns the engine's error.
func (o *collOp) do(c *Comm) error {
	if !c.core.spans {
		return o.local(c.rank, c.core.coll)
	}
	x := c.core.across()
	x.Enter() // the device's daemons poll on while we are inside it
	defer x.Leave()
	return o.across(c.rank, x)
}

// across runs the collective as rank r of a communicator that spans procs.
func (o *collOp) across(r int, x *xcoll.Comm) error {
	p := &o.p
	switch o.k {
	case coll.KindBarrier:
		return x.Barrier(r)
	case coll.KindBcast:
		return x.Bcast(r, p.Send, o.el, o.root)
	case coll.KindReduce:
		return x.Reduce(r, p.Send, p.Recv, o.el, o.fn, o.commutative, o.root)
	case coll.KindAllreduce:
		return x.Allreduce(r, p.Send, p.Recv, o.el, o.fn, o.commutative)
	case coll.KindGather:
		return x.Gather(r, p.Send, p.Recv, o.el, o.root)
	case coll.KindAllgather:
		return x.Allgather(r, p.Send, p.Recv, o.el)
	}
	return x.Exchange(o.k, r, o.root, o.el, o.fn, p)
}

// local runs the collective as rank r of a communicator within this proc.
func (o *collOp) local(r int, l *coll.Comm) error {
	p := &o.p
	switch o.k {
	case coll.KindBarrier:
		return l.Barrier(r)
	case coll.KindBcast:
		return l.Bcast(r, p.Send, o.el, o.root)
	case coll.KindReduce:
		return l.Reduce(r, p.Send, p.Recv, o.el, o.fn, o.root)
	case coll.KindAllreduce:
		return l.Allreduce(r, p.Send, p.Recv, o.el, o.fn)
	}
	return l.Exchange(o.k, r, o.root, o.el, o.fn, p)
}

// Ibarrier starts a Barrier: the request completes once every rank has called it.
func (c *Comm) Ibarrier() (*Request, error) {
	var o collOp
	return c.issue(&o, barrierOp(&o, c, "Ibarrier"))
}

// Ibcast starts a Bcast.
func Ibcast[T Elem](c *Comm, buf []T, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, bcastOp(&o, c, "Ibcast", buf, root))
}

// Ireduce starts a Reduce.
func Ireduce[T Reducible](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, reduceOp(&o, c, "Ireduce", send, recv, op, root))
}

// Iallreduce starts an Allreduce.
func Iallreduce[T Reducible](c *Comm, send, recv []T, op Op) (*Request, error) {
	var o collOp
	return c.issue(&o, allreduceOp(&o, c, "Iallreduce", send, recv, op))
}

// Igather starts a Gather.
func Igather[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, gatherOp(&o, c, "Igather", send, recv, root))
}

// Igatherv starts a Gatherv.
func Igatherv[T Elem](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, gathervOp(&o, c, "Igatherv", send, recv, counts, displs, root))
}

// Iscatter starts a Scatter.
func Iscatter[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, scatterOp(&o, c, "Iscatter", send, recv, root))
}

// Iscatterv starts a Scatterv.
func Iscatterv[T Elem](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	var o collOp
	return c.issue(&o, scattervOp(&o, c, "Iscatterv", send, counts, displs, recv, root))
}

// Iallgather starts an Allgather.
func Iallgather[T Elem](c *Comm, send, recv []T) (*Request, error) {
	var o collOp
	return c.issue(&o, allgatherOp(&o, c, "Iallgather", send, recv))
}

// Iallgatherv starts an Allgatherv.
func Iallgatherv[T Elem](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	var o collOp
	return c.issue(&o, allgathervOp(&o, c, "Iallgatherv", send, recv, counts, displs))
}

// Ialltoall starts an Alltoall.
func Ialltoall[T Elem](c *Comm, send, recv []T) (*Request, error) {
	var o collOp
	return c.issue(&o, alltoallOp(&o, c, "Ialltoall", send, recv))
}

// Ialltoallv starts an Alltoallv.
func Ialltoallv[T Elem](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*Request, error) {
	var o collOp
	return c.issue(&o, alltoallvOp(&o, c, "Ialltoallv", send, sendCounts, sendDispls, recv, recvCounts, recvDispls))
}

// Iscan starts a Scan.
func Iscan[T Reducible](c *Comm, send, recv []T, op Op) (*Request, error) {
	var o collOp
	return c.issue(&o, scanOp(&o, c, coll.KindScan, "Iscan", send, recv, op))
}

// Iexscan starts an Exscan.
func Iexscan[T Reducible](c *Comm, send, recv []T, op Op) (*Request, error) {
	var o collOp
	return c.issue(&o, scanOp(&o, c, coll.KindExscan, "Iexscan", send, recv, op))
}

// IreduceScatterBlock starts a ReduceScatterBlock.
func IreduceScatterBlock[T Reducible](c *Comm, send, recv []T, op Op) (*Request, error) {
	var o collOp
	return c.issue(&o, reduceScatterBlockOp(&o, c, "IreduceScatterBlock", send, recv, op))
}

// IreduceScatter starts a ReduceScatter.
func IreduceScatter[T Reducible](c *Comm, send, recv []T, counts []int, op Op) (*Request, error) {
	var o collOp
	return c.issue(&o, reduceScatterOp(&o, c, "IreduceScatter", send, recv, counts, op))
}
