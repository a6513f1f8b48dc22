package mpi

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
)

// reqState is where a Request is in its life.
type reqState uint8

const (
	active   reqState = iota // started, not yet completed by Wait or Test
	inactive                 // persistent, not started (or completed)
	consumed                 // non-persistent, completed by Wait or Test: MPI's MPI_REQUEST_NULL
	freed                    // released by Free
)

// Request is a nonblocking or persistent operation. A nil *Request is MPI's null
// request: waiting on it returns at once with an empty status.
//
// Waitall, Waitany, Waitsome, Testall, Testany and Testsome set the entries of their
// slice that they complete to nil, as MPI sets them to MPI_REQUEST_NULL (persistent
// requests stay, inactive). Using a completed non-persistent request through another
// copy of the pointer is an ErrRequest error, as is using a freed one.
//
// A nonblocking collective's Request (Ibarrier, Iallreduce, ...) works with all of
// these, and its Status is empty, as a null request's; Cancel of one is an
// ErrRequest error (MPI says it is erroneous), and Free lets the collective run to
// its end unobserved.
//
// A Request is a small handle. An operation that completes as it starts (a small
// Isend left at its receiver, an Irecv whose message had come) keeps its outcome in
// the handle; otherwise the engine's request behind it (a few cache lines) comes
// from a pool when the operation starts and goes back to it when Wait or Test
// completes it, so that streams of nonblocking operations allocate only handles;
// a persistent request keeps its engine request for its whole life.
type Request struct {
	r          *p2p.Request // the engine's request; nil when not started, consumed, early, or a collective
	c          *Comm
	bufp       *byte
	blen       int
	nbc        *icoll    // a nonblocking collective; nil for point-to-point
	early      p2p.Early // the outcome of an operation that completed as it started, with no engine request
	peer, tag  int32
	mode       p2p.Mode
	recv       bool
	persistent bool
	state      reqState
	busy       atomic.Bool // held by the goroutine using the request
}

// sendNames are the calls that make send requests, by persistence and mode.
var sendNames = [2][4]string{
	{p2p.Standard: "Isend", p2p.Buffered: "Ibsend", p2p.Synchronous: "Issend", p2p.Ready: "Irsend"},
	{p2p.Standard: "SendInit", p2p.Buffered: "BsendInit", p2p.Synchronous: "SsendInit", p2p.Ready: "RsendInit"},
}

// name is the MPI call that made r, for errors.
func (r *Request) name() string {
	switch {
	case r.nbc != nil:
		return r.nbc.name
	case r.recv && r.persistent:
		return "RecvInit"
	case r.recv:
		return "Irecv"
	case r.persistent:
		return sendNames[1][r.mode]
	}
	return sendNames[0][r.mode]
}

func newRequest(c *Comm, b []byte, peer, tag int, recv bool, mode p2p.Mode, persistent bool) *Request {
	r := c.request()
	r.c, r.bufp, r.blen, r.peer, r.tag, r.recv, r.mode, r.persistent = c, unsafe.SliceData(b), len(b), int32(peer), int32(tag), recv, mode, persistent
	if persistent {
		r.state = inactive
	}
	return r
}

// reqSlab is memory for a rank's requests on a communicator, handed out one at a
// time and never again: a stream of nonblocking calls allocates once every slab
// instead of once a request. Slabs double in size up to slabMax, so that a rank
// that makes a request or two holds a small one; the collector keeps a slab while
// any of its requests is reachable.
type reqSlab struct {
	next atomic.Int32 // requests handed out (may pass len(reqs): the slab is then used up)
	reqs []Request
}

const (
	slabMin = 4
	slabMax = 63 // 6,048 bytes: with the header Go puts before it, a slab fills its 6 KiB size class
)

// request returns a zeroed Request from the rank's slab, making a new slab when it
// is used up.
func (c *Comm) request() *Request {
	for {
		s := c.slab.Load()
		size := slabMin
		if s != nil {
			if i := int(s.next.Add(1)) - 1; i < len(s.reqs) {
				return &s.reqs[i]
			}
			size = min(2*len(s.reqs), slabMax)
		}
		fresh := &reqSlab{reqs: make([]Request, size)}
		fresh.next.Store(1)
		if c.slab.CompareAndSwap(s, fresh) {
			return &fresh.reqs[0]
		}
	}
}

// start begins the operation: without an engine request if it completes as it
// starts (an early receive or send), else in a pooled one, or the persistent
// request's own.
func (r *Request) start() error {
	c := r.c
	r.state = active
	peer, tag := int(r.peer), int(r.tag)
	buf := unsafe.Slice(r.bufp, r.blen)
	if r.recv && !r.persistent {
		r.r = c.core.RecvEarly(c.rank, buf, peer, tag, &r.early)
		return nil
	}
	var early bool
	var err error
	if !r.persistent {
		early, err = c.core.SendEarly(c.rank, buf, peer, tag, r.mode, &r.early)
	}
	if !early && err == nil {
		if r.r == nil {
			r.r = p2p.NewRequest()
		} else {
			r.r.Reset()
		}
		if r.recv {
			c.core.Irecv(c.rank, buf, peer, tag, r.r)
			return nil
		}
		err = c.core.Isend(c.rank, buf, peer, tag, r.mode, r.r)
	}
	if err != nil {
		r.state = inactive
		return c.failed(err, r.name(), peer, tag)
	}
	return nil
}

func isend(c *Comm, b []byte, dest, tag int, mode p2p.Mode) (*Request, error) {
	if err := c.checkDest(sendNames[0][mode], dest, tag); err != nil {
		return nil, err
	}
	r := newRequest(c, b, dest, tag, false, mode, false)
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

func sendInit(c *Comm, b []byte, dest, tag int, mode p2p.Mode) (*Request, error) {
	if err := c.checkDest(sendNames[1][mode], dest, tag); err != nil {
		return nil, err
	}
	return newRequest(c, b, dest, tag, false, mode, true), nil
}

// Isend starts a standard send; buf must not change until the request completes.
func Isend[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return isend(c, bytesOf(buf), dest, tag, p2p.Standard)
}

// Ibsend starts a buffered send (see Bsend).
func Ibsend[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return isend(c, bytesOf(buf), dest, tag, p2p.Buffered)
}

// Issend starts a synchronous send: it completes once a receive has matched it.
func Issend[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return isend(c, bytesOf(buf), dest, tag, p2p.Synchronous)
}

// Irsend starts a ready send (see Rsend).
func Irsend[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return isend(c, bytesOf(buf), dest, tag, p2p.Ready)
}

// Irecv starts a receive into buf.
func Irecv[T Elem](c *Comm, buf []T, source, tag int) (*Request, error) {
	if err := c.checkSource("Irecv", source, tag); err != nil {
		return nil, err
	}
	r := newRequest(c, bytesOf(buf), source, tag, true, 0, false)
	r.start()
	return r, nil
}

// SendInit makes a persistent standard send of buf; each Start sends buf's contents.
func SendInit[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return sendInit(c, bytesOf(buf), dest, tag, p2p.Standard)
}

// BsendInit makes a persistent buffered send.
func BsendInit[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return sendInit(c, bytesOf(buf), dest, tag, p2p.Buffered)
}

// SsendInit makes a persistent synchronous send.
func SsendInit[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return sendInit(c, bytesOf(buf), dest, tag, p2p.Synchronous)
}

// RsendInit makes a persistent ready send.
func RsendInit[T Elem](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return sendInit(c, bytesOf(buf), dest, tag, p2p.Ready)
}

// RecvInit makes a persistent receive into buf.
func RecvInit[T Elem](c *Comm, buf []T, source, tag int) (*Request, error) {
	if err := c.checkSource("RecvInit", source, tag); err != nil {
		return nil, err
	}
	return newRequest(c, bytesOf(buf), source, tag, true, 0, true), nil
}

// acquire takes the request for one caller; MPI forbids two threads to use one
// request at once, and Weft says so instead of misbehaving.
func (r *Request) acquire(op string) error {
	if !r.busy.CompareAndSwap(false, true) {
		return errs.New(errs.Request, op, r.c.rank, "another goroutine is using this %s request", r.name())
	}
	var why string
	switch r.state {
	case freed:
		why = "the %s request was freed"
	case consumed:
		why = "the %s request already completed (an earlier Wait or Test returned it, and MPI would have set it to MPI_REQUEST_NULL)"
	default:
		return nil
	}
	r.busy.Store(false)
	return errs.New(errs.Request, op, r.c.rank, why, r.name())
}

func (r *Request) release() { r.busy.Store(false) }

// done reports whether the operation has completed.
func (r *Request) done() bool {
	if r.nbc != nil {
		return r.nbc.over.Load()
	}
	return r.r == nil || r.r.Done()
}

// finish turns the outcome of a completed operation into the caller's status and
// error, and retires the request (inactive if persistent, else consumed). err, if not
// nil, is why waiting stopped.
func (r *Request) finish(err error) (Status, error) {
	var s Status
	err = r.finishInto(&s, err)
	return s, err
}

// finishInto is finish storing the status in s, for the hottest callers: a status
// returned by value through two calls was copied in wider moves than its fields
// were stored in, each waiting for those stores to leave the core.
func (r *Request) finishInto(s *Status, err error) error {
	if r.nbc != nil {
		r.state = consumed
		*s = nullStatus
		s.Err = r.nbc.err
		return r.nbc.err
	}
	var st p2p.Status // the engine's status, likewise stored in place
	if r.r != nil {
		if rerr := r.r.Result(&st); err == nil {
			err = rerr
		}
	} else {
		r.early.Status(&st, r.blen)
	}
	peer, tag := int(r.peer), int(r.tag)
	if r.recv {
		err = r.c.receivedInto(s, &st, err, r.name(), peer, tag)
	} else {
		if err != nil {
			err = r.c.failed(err, r.name(), peer, tag)
		}
		*s = Status{Source: peer, Tag: tag, Cancelled: st.Cancelled, Err: err}
	}
	if r.persistent {
		r.state = inactive
		return err
	}
	r.state = consumed
	if r.r != nil && r.r.Done() { // else (after an abort) a receiver that took the send with Mprobe still holds it
		p2p.Recycle(r.r)
	}
	r.r = nil
	return err
}

// Wait blocks until the operation completes and returns its status.
func (r *Request) Wait() (Status, error) {
	var s Status
	err := r.waitInto(&s)
	return s, err
}

// waitInto is Wait storing the status in s (see finishInto): all of it, so that
// WaitallInto's caller may hand it a status of an earlier call.
func (r *Request) waitInto(s *Status) error {
	if r == nil {
		*s = nullStatus
		return nil
	}
	if err := r.acquire("Wait"); err != nil {
		*s = Status{}
		return err
	}
	defer r.release()
	if r.state == inactive {
		*s = nullStatus
		return nil
	}
	if r.nbc != nil {
		<-r.nbc.done
		return r.finishInto(s, nil)
	}
	if r.r == nil {
		return r.finishInto(s, nil)
	}
	return r.finishInto(s, r.c.core.WaitWith(r.c.rank, r.r, int(r.peer)))
}

// Test reports whether the operation has completed, and if so its status, without blocking.
func (r *Request) Test() (Status, bool, error) {
	if r == nil {
		return nullStatus, true, nil
	}
	if err := r.acquire("Test"); err != nil {
		return Status{}, false, err
	}
	defer r.release()
	if r.state == inactive {
		return nullStatus, true, nil
	}
	if r.nbc != nil {
		if !r.nbc.over.Load() {
			return Status{}, false, nil
		}
		st, err := r.finish(nil)
		return st, true, err
	}
	if r.r == nil {
		st, err := r.finish(nil)
		return st, true, err
	}
	r.c.self().Progress()
	if !r.r.Done() {
		if r.c.core.World.Cause() == nil {
			return Status{}, false, nil
		}
		st, err := r.finish(r.c.self().Wait(r.r))
		return st, true, err
	}
	st, err := r.finish(nil)
	return st, true, err
}

// Cancel asks to cancel the operation; it succeeds when no receive (for a send) or no
// message (for a receive) has matched it yet, and Status.Cancelled then says so.
// The request must still be completed with Wait or Test. Cancelling a nonblocking
// collective is an ErrRequest error: the other ranks take part in it regardless.
func (r *Request) Cancel() error {
	if r == nil {
		return errs.New(errs.Request, "Cancel", NoValue, "the request is nil (MPI_REQUEST_NULL)")
	}
	if err := r.acquire("Cancel"); err != nil {
		return err
	}
	defer r.release()
	if r.state != active {
		return errs.New(errs.Request, "Cancel", r.c.rank, "the persistent %s request is not started", r.name())
	}
	if r.nbc != nil {
		return errs.New(errs.Request, "Cancel", r.c.rank, "%s is a nonblocking collective, which MPI does not let a rank cancel", r.name())
	}
	if r.r == nil {
		r.c.core.CancelEarly(r.c.rank, int(r.peer), int(r.tag), &r.early)
		return nil
	}
	p2p.Cancel(r.r)
	return nil
}

// Free releases the request. An operation in progress still completes (a send still
// delivers, a nonblocking collective still runs with the other ranks), but nobody
// can wait for it any more.
func (r *Request) Free() error {
	if r == nil {
		return errs.New(errs.Request, "Free", NoValue, "the request is nil (MPI_REQUEST_NULL)")
	}
	if err := r.acquire("Free"); err != nil {
		return err
	}
	defer r.release()
	r.state = freed
	return nil
}

// Start starts a persistent request.
func (r *Request) Start() error {
	if r == nil {
		return errs.New(errs.Request, "Start", NoValue, "the request is nil (MPI_REQUEST_NULL)")
	}
	if err := r.acquire("Start"); err != nil {
		return err
	}
	defer r.release()
	switch {
	case !r.persistent:
		return errs.New(errs.Request, "Start", r.c.rank, "%s made a non-persistent request; Start takes one from SendInit or RecvInit", r.name())
	case r.state == active:
		return errs.New(errs.Request, "Start", r.c.rank, "the persistent %s request is already active; Wait for it first", r.name())
	}
	if err := r.c.check("Start"); err != nil {
		return err
	}
	return r.start()
}

// Startall starts every request in reqs.
func Startall(reqs ...*Request) error {
	var all []error
	for _, r := range reqs {
		if err := r.Start(); err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// retire sets reqs[i] to nil when Wait or Test consumed it.
func retire(reqs []*Request, i int) {
	if reqs[i] != nil && reqs[i].state == consumed {
		reqs[i] = nil
	}
}

// Waitall waits for every request and returns their statuses in order; the error
// joins the failed operations' errors (each also in its Status.Err).
func Waitall(reqs ...*Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	return sts, WaitallInto(sts, reqs...)
}

// WaitallInto is Waitall storing the statuses in sts, one per request, as
// MPI_Waitall fills its caller's array; a nil sts ignores them
// (MPI_STATUSES_IGNORE). A loop of windows of requests then allocates nothing
// for their statuses, where Waitall's cost a stream of 8-byte messages about a
// fifth of its time (docs/benchmarks.md). Each status is written whole, so a
// reused sts keeps nothing of an earlier call. An sts shorter than reqs is an
// ErrArg error, and nothing is waited for.
func WaitallInto(sts []Status, reqs ...*Request) error {
	if err := statusRoom("WaitallInto", sts, reqs); err != nil {
		return err
	}
	var all []error
	var ignored Status
	for i, r := range reqs {
		st := statusAt(sts, i, &ignored)
		if err := r.waitInto(st); err != nil {
			st.Err = err
			all = append(all, err)
		}
		retire(reqs, i)
	}
	return errors.Join(all...)
}

// Testall reports whether every request has completed; only then does it complete
// them all and return their statuses.
func Testall(reqs ...*Request) ([]Status, bool, error) {
	if !allDone(reqs) {
		return nil, false, nil
	}
	sts, err := Waitall(reqs...)
	return sts, true, err
}

// TestallInto is Testall storing the statuses in sts, as WaitallInto does, once
// every request has completed.
func TestallInto(sts []Status, reqs ...*Request) (bool, error) {
	if err := statusRoom("TestallInto", sts, reqs); err != nil {
		return false, err
	}
	if !allDone(reqs) {
		return false, nil
	}
	return true, WaitallInto(sts, reqs...)
}

// allDone reports whether every request has completed (or the job has ended).
func allDone(reqs []*Request) bool {
	progress(reqs)
	for _, r := range reqs {
		if r != nil && r.state == active && !r.done() && r.c.core.World.Cause() == nil {
			return false
		}
	}
	return true
}

// statusRoom checks that sts, unless nil, holds a status for every request.
func statusRoom(op string, sts []Status, reqs []*Request) error {
	if sts == nil || len(sts) >= len(reqs) {
		return nil
	}
	return errs.New(errs.Arg, op, rankOf(reqs), "%d statuses for %d requests: sts must hold one per request, or be nil to ignore them", len(sts), len(reqs))
}

// progress lets the engine move messages that arrived for the ranks of reqs, so that
// a Test can see them.
func progress(reqs []*Request) {
	for _, r := range reqs {
		if r != nil {
			r.c.self().Progress()
			return
		}
	}
}

// pending lists the indices of the active requests in idx (from its start, growing
// it past its room) and takes each for this caller.
func pending(op string, reqs []*Request, idx []int) ([]int, error) {
	idx = idx[:0]
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if err := r.acquire(op); err != nil {
			for _, j := range idx {
				reqs[j].release()
			}
			return nil, err
		}
		if r.state == active {
			idx = append(idx, i)
		} else {
			r.release()
		}
	}
	return idx, nil
}

// Waitany waits until one request completes and returns its index and status, or
// Undefined when no request is active.
func Waitany(reqs ...*Request) (int, Status, error) {
	var room [pendingRoom]int
	idx, err := pending("Waitany", reqs, room[:])
	if err != nil || len(idx) == 0 {
		return Undefined, nullStatus, err
	}
	k, werr := waitAny(reqs, idx)
	for kk, i := range idx {
		if kk != k {
			reqs[i].release()
		}
	}
	i := idx[k]
	st, err := reqs[i].finish(werr)
	reqs[i].release()
	retire(reqs, i)
	return i, st, err
}

// waitAny waits until one of reqs[idx] completes and returns its place in idx; at
// the job's end, the place of one to finish with the error. Point-to-point requests alone park on the
// engine; nonblocking collectives ring a doorbell when they end. The engine's
// requests ring only their own waiters, so in a mix of both kinds the
// point-to-point ones are polled, less and less often (up to every millisecond).
func waitAny(reqs []*Request, idx []int) (int, error) {
	colls := 0
	for k, i := range idx {
		if reqs[i].r == nil && reqs[i].nbc == nil { // early: complete already
			return k, nil
		}
		if reqs[i].nbc != nil {
			colls++
		}
	}
	ep := reqs[idx[0]].c.self()
	if colls == 0 {
		prs := make([]*p2p.Request, len(idx))
		polls := false // spin only if a rank may complete one: see p2p.Comm.DaemonOnly
		for k, i := range idx {
			r := reqs[i]
			prs[k] = r.r
			polls = polls || !r.c.core.DaemonOnly(int(r.peer))
		}
		k, err := ep.WaitAny(prs, polls)
		if err != nil {
			k = 0
		}
		return k, err
	}
	bell := make(chan struct{}, 1)
	for _, i := range idx {
		if nb := reqs[i].nbc; nb != nil {
			nb.watch.Store(&bell)
			defer nb.watch.CompareAndSwap(&bell, nil)
		}
	}
	var timer *time.Timer
	pause := time.Microsecond
	for {
		if colls < len(idx) {
			ep.Progress()
		}
		for k, i := range idx {
			if reqs[i].done() {
				return k, nil
			}
		}
		if colls == len(idx) {
			<-bell
			continue
		}
		if ep.World.Cause() != nil { // the job ended: settle a point-to-point request as Wait does
			for k, i := range idx {
				if reqs[i].nbc == nil {
					return k, ep.Wait(reqs[i].r)
				}
			}
		}
		if timer == nil {
			timer = time.NewTimer(pause)
			defer timer.Stop()
		} else {
			timer.Reset(pause)
		}
		select { // since Go 1.23 a Reset timer never delivers a stale tick
		case <-bell:
		case <-timer.C:
		}
		pause = min(2*pause, time.Millisecond)
	}
}

// Waitsome waits until at least one request completes and returns the indices and
// statuses of all that have; it returns none when no request is active.
func Waitsome(reqs ...*Request) ([]int, []Status, error) {
	return someNew("Waitsome", reqs, waitsome)
}

// WaitsomeInto is Waitsome storing the n indices in idx[:n] and their statuses in
// sts[:n], as MPI_Waitsome fills its caller's arrays; a nil sts ignores the
// statuses. A loop that waits for some of a set of requests again and again (a
// server, a pipeline) then allocates nothing for them. n is 0 when no request is
// active. idx, and sts unless nil, must hold one entry per request (ErrArg
// otherwise, and nothing is waited for).
func WaitsomeInto(idx []int, sts []Status, reqs ...*Request) (n int, err error) {
	return someInto("WaitsomeInto", idx, sts, reqs, waitsome)
}

// waitsome is Waitsome into idx and sts (see some).
func waitsome(op string, idx []int, sts []Status, reqs []*Request) (int, error) {
	i, st, err := Waitany(reqs...)
	if i == Undefined {
		return 0, err
	}
	// reqs[i] is done with (nil, or inactive if persistent): the others fit idx[1:].
	n, merr := testsome(op, idx[1:], after(sts), reqs)
	idx[0] = i
	if sts != nil {
		sts[0] = st
	}
	return 1 + n, errors.Join(err, merr)
}

// Testany returns the index and status of a completed request, if any; ok is also
// true, with index Undefined, when no request is active.
func Testany(reqs ...*Request) (index int, st Status, ok bool, err error) {
	var room [pendingRoom]int
	idx, err := pending("Testany", reqs, room[:])
	if err != nil {
		return Undefined, Status{}, false, err
	}
	progress(reqs)
	index, ok, st = Undefined, len(idx) == 0, nullStatus
	for _, i := range idx {
		if !ok && reqs[i].done() {
			st, err = reqs[i].finish(nil)
			index, ok = i, true
		}
		reqs[i].release()
	}
	if index != Undefined {
		retire(reqs, index)
	}
	return index, st, ok, err
}

// Testsome returns the indices and statuses of every completed request, without blocking.
func Testsome(reqs ...*Request) ([]int, []Status, error) {
	return someNew("Testsome", reqs, testsome)
}

// TestsomeInto is Testsome storing the indices and statuses as WaitsomeInto does; n
// is 0 when no request has completed, or none is active.
func TestsomeInto(idx []int, sts []Status, reqs ...*Request) (n int, err error) {
	return someInto("TestsomeInto", idx, sts, reqs, testsome)
}

// some is waitsome or testsome: it completes requests of reqs, storing their indices
// in idx and statuses in sts (unless nil), which have room for every active one, and
// returns how many.
type some func(op string, idx []int, sts []Status, reqs []*Request) (int, error)

// someNew is Waitsome or Testsome (fn): into new slices, of which it returns the
// filled part, or none.
func someNew(op string, reqs []*Request, fn some) ([]int, []Status, error) {
	idx, sts := make([]int, len(reqs)), make([]Status, len(reqs))
	n, err := fn(op, idx, sts, reqs)
	if n == 0 {
		return nil, nil, err
	}
	return idx[:n:n], sts[:n:n], err
}

// someInto is WaitsomeInto or TestsomeInto (fn): into the caller's slices, once
// their room is checked.
func someInto(op string, idx []int, sts []Status, reqs []*Request, fn some) (int, error) {
	if err := someRoom(op, idx, sts, reqs); err != nil {
		return 0, err
	}
	return fn(op, idx, sts, reqs)
}

// testsome is Testsome into idx and sts (see some).
func testsome(op string, idx []int, sts []Status, reqs []*Request) (int, error) {
	var room [pendingRoom]int
	active, err := pending(op, reqs, room[:])
	if err != nil {
		return 0, err
	}
	progress(reqs)
	var all []error
	var ignored Status
	n := 0
	for _, i := range active {
		if reqs[i].done() {
			if err := reqs[i].finishInto(statusAt(sts, n, &ignored), nil); err != nil {
				all = append(all, err)
			}
			idx[n] = i
			n++
		}
		reqs[i].release()
		retire(reqs, i)
	}
	return n, errors.Join(all...)
}

// pendingRoom is how many active requests a Waitany, Testany or Testsome lists
// without allocating: a window of 64 messages' requests, as the streaming
// benchmarks' (bench/peers/p2p.c).
const pendingRoom = 64

// statusAt is where status i goes: sts[i], or ignored when sts is nil.
func statusAt(sts []Status, i int, ignored *Status) *Status {
	if sts == nil {
		return ignored
	}
	return &sts[i]
}

// after is sts past its first status, or nil for statuses ignored.
func after(sts []Status) []Status {
	if sts == nil {
		return nil
	}
	return sts[1:]
}

// rankOf is the rank of the first request of reqs that has one, for errors.
func rankOf(reqs []*Request) int {
	for _, r := range reqs {
		if r != nil && r.c != nil {
			return r.c.rank
		}
	}
	return NoValue
}

// someRoom checks that idx, and sts unless nil, hold an entry for every request.
func someRoom(op string, idx []int, sts []Status, reqs []*Request) error {
	if len(idx) >= len(reqs) {
		return statusRoom(op, sts, reqs)
	}
	return errs.New(errs.Arg, op, rankOf(reqs), "%d indices for %d requests: idx must hold one per request", len(idx), len(reqs))
}
