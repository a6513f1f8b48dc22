package p2p

import (
	"runtime"
	"slices"
	"time"

	"github.com/weft-mpi/weft/internal/spin"
)

// NullStatus is the status of an operation with ProcNull, or of a null or inactive request.
var NullStatus = Status{Source: ProcNull, Tag: AnyTag}

// Send sends buf from rank me of c to rank dest and returns when buf may be reused.
func (c *Comm) Send(me int, buf []byte, dest, tag int, mode Mode) error {
	if dest == ProcNull {
		return nil
	}
	if to := c.Peers[dest]; to.peer != nil {
		return c.sendRemote(me, buf, to, tag, mode, nil)
	}
	if mode == Standard || mode == Ready {
		if _, ok := c.Peers[dest].deposit(buf, key{c.Ctx, int32(me), int32(tag)}, true); ok {
			return nil
		}
	}
	if m, _, err := c.sendCopy(me, buf, dest, tag, mode, false); m != nil || err != nil {
		return err
	}
	r := NewRequest()
	var err error
	queued := c.sendDirect(me, buf, dest, tag, mode, r)
	if queued {
		err = c.Peers[me].Wait(r)
	}
	if !queued || r.Done() { // else a receiver's Mprobe holds it after an abort
		Recycle(r)
	}
	return err
}

// Isend starts a send into the user's request r, which must be new or Reset.
func (c *Comm) Isend(me int, buf []byte, dest, tag int, mode Mode, r *Request) error {
	if dest == ProcNull {
		r.fire()
		return nil
	}
	if to := c.Peers[dest]; to.peer != nil {
		return c.sendRemote(me, buf, to, tag, mode, r)
	}
	m, gen, err := c.sendCopy(me, buf, dest, tag, mode, true)
	if m == nil && err == nil && c.sendDirect(me, buf, dest, tag, mode, r) {
		return nil // queued: the receiver completes r
	}
	if m != nil {
		r.msg, r.msgGen, r.ep = m, gen, c.Peers[dest]
	}
	r.err = err
	r.fire()
	return err
}

// Early is the outcome of an operation that completed as it started, with no
// request of the engine's: a receive that found its message come already, or a send
// that left its data at its receiver, in a slot of its mailbox or in an eager or
// buffered copy. A pooled Request taken, reset, fired, read and given back was a
// tenth of each small Isend and Irecv in a stream of them (osu_bw's window of 64),
// and the eager copy (taken from a pool on the sender's core and given back on the
// receiver's) much of the rest. Early is small, as the user's handle that holds it
// must be.
type Early struct {
	src, tag  int32    // a receive's envelope
	len       int      // a receive's message length
	ticket    uint64   // a send's message in a slot (see ticketOf), which Cancel withdraws while no receive has taken it
	sent      *Request // a send's copy at its receiver, which Cancel withdraws likewise
	gen       uint32   // the incarnation of sent that the send made
	cancelled bool
}

// Status stores in st the status of an early operation whose buffer holds blen bytes.
func (e *Early) Status(st *Status, blen int) {
	st.Source, st.Tag, st.Len, st.Bytes, st.Cancelled = int(e.src), int(e.tag), e.len, min(e.len, blen), e.cancelled
}

// SendEarly sends buf as Isend would when the send completes as it starts (to
// ProcNull, or for a rank of this proc: into a free slot of its mailbox, else as a
// copy, small and standard while the pool has room, or buffered), keeping in e what
// Cancel needs. Unlike a blocking send it never waits for a slot. It reports false,
// having sent nothing, when the send needs a request; a buffered send's error is
// returned.
func (c *Comm) SendEarly(me int, buf []byte, dest, tag int, mode Mode, e *Early) (bool, error) {
	if dest == ProcNull {
		return true, nil
	}
	to := c.Peers[dest]
	if to.peer != nil {
		return false, nil
	}
	if mode == Standard || mode == Ready {
		if t, ok := to.deposit(buf, key{c.Ctx, int32(me), int32(tag)}, false); ok {
			e.ticket = t
			return true, nil
		}
	}
	m, gen, err := c.sendCopy(me, buf, dest, tag, mode, true)
	if m == nil {
		return false, err
	}
	e.sent, e.gen = m, gen
	return true, nil
}

// RecvEarly receives into buf a matching message that has come already, its
// envelope into e, and returns nil; else it starts the receive as Irecv does, in a
// pooled request that it returns.
func (c *Comm) RecvEarly(me int, buf []byte, src, tag int, e *Early) *Request {
	var st Status
	if src == ProcNull {
		st = NullStatus
	} else if r, ok := c.startRecv(me, buf, src, tag, nil, postNow, &st); !ok {
		return r
	}
	e.src, e.tag, e.len = int32(st.Source), int32(st.Tag), st.Len
	return nil
}

// CancelEarly withdraws what early send e of rank me, with tag, left for rank dest
// while no receive has taken it, and then marks e cancelled.
func (c *Comm) CancelEarly(me, dest, tag int, e *Early) {
	ep := c.Peers[dest]
	switch {
	case e.ticket != 0:
		ep.mu.Lock()
		e.cancelled = ep.withdrawSlot(key{c.Ctx, int32(me), int32(tag)}, e.ticket)
		ep.mu.Unlock()
	case e.sent != nil:
		e.cancelled = withdrawCopy(e.sent, e.gen, ep)
	}
	e.ticket, e.sent = 0, nil // a second Cancel finds nothing to withdraw
}

// withdrawCopy takes incarnation gen of the eager or buffered copy m back from its
// receiver ep, unless a receive has taken it, and reports whether it did.
func withdrawCopy(m *Request, gen uint32, ep *Endpoint) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.drain()
	if m.gen.Load() != gen || m.where == nowhere {
		return false
	}
	ep.dequeue(m)
	ep.release(m)
	return true
}

// sendCopy sends a small standard send, or a buffered one, as a copy left in the
// receiver's inbox: the sender returns at once. It returns nil when the send must
// go directly instead (synchronous, large, or the pool full). A copy that an Isend
// may cancel is marked so, and gen is its incarnation (see withdrawCopy).
func (c *Comm) sendCopy(me int, buf []byte, dest, tag int, mode Mode, cancel bool) (m *Request, gen uint32, err error) {
	k := key{c.Ctx, int32(me), int32(tag)}
	switch {
	case mode == Buffered:
		if m, err = c.Peers[me].bufferedCopy(buf, k, dest); err != nil {
			return nil, 0, err
		}
	case mode != Synchronous && len(buf) <= c.World.cfg.EagerLimit:
		m = c.Peers[me].eagerCopy(buf, k)
	}
	if m == nil {
		return nil, 0, nil
	}
	if cancel {
		m.flags |= cancellable
		gen = m.gen.Load()
	}
	c.Peers[dest].push(m)
	return m, gen, nil
}

// sendDirect locks the receiver, drains its inbox (so that an earlier small message
// from the same sender matches first) and copies buf straight into the earliest
// matching posted receive (the sender arrives second), or else queues r for the
// receiver to copy from buf and complete. It reports whether r was queued.
func (c *Comm) sendDirect(me int, buf []byte, dest, tag int, mode Mode, r *Request) bool {
	ep := c.Peers[dest]
	k := key{c.Ctx, int32(me), int32(tag)}
	ep.mu.Lock()
	ep.drain()
	ep.takeBox(nil, nil, nil, ep.stamp()) // our own small messages still in flight go first
	if rr := ep.takePosted(k); rr != nil {
		ep.mu.Unlock()
		deliver(rr, buf, k)
		return false
	}
	r.kind, r.mode, r.key = sendKind, mode, k
	r.setBuf(buf)
	ep.queue(r)
	ep.mu.Unlock()
	return true
}

// deliver copies message data with envelope k into the posted receive r and completes it.
func deliver(r *Request, data []byte, k key) {
	copyShared(r.buf(), data, r)
	r.delivered(k, len(data))
}

// delivered completes the posted receive r, into whose buffer a message of envelope
// k and n bytes has been copied (as far as it fits).
func (r *Request) delivered(k key, n int) {
	r.key, r.mlen = k, n
	r.fire()
}

// take receives the unexpected message m into buf: an eager or buffered copy there
// and then, under ep.mu which the caller holds and take releases; a send still in its
// sender's buffer after releasing ep.mu, completing that send.
func (ep *Endpoint) take(m *Request, buf []byte) Status {
	ep.dequeue(m)
	ep.moved()
	st := Status{Source: int(m.key.src), Tag: int(m.key.tag), Len: m.blen}
	if m.kind != sendKind {
		st.Bytes = copy(buf, m.buf())
		ep.release(m)
		ep.mu.Unlock()
		return st
	}
	ep.mu.Unlock()
	st.Bytes = copyShared(buf, m.buf(), m)
	m.fire() // the sender may reuse its buffer: m is no longer ours
	return st
}

// Recv receives into buf at rank me of c from src with tag (wildcards allowed), and
// its status into st. (A status returned as a result was copied through the stack
// at every layer of the call: a send and its receive by one goroutine took 174 ns of
// CPU that way, 108 this way.)
//
// When no message matches yet, it polls for arrivals within the spin budget
// before it posts a receive, and takes a message that arrives meanwhile as an
// unexpected one: no request to post, match, complete and recycle, which on a
// hand-off between spinning ranks is most of the receiver's work. Receives that
// other goroutines of the rank post meanwhile are matched first, as MPI allows for
// calls made at the same time. One receive of a rank polls at a time: the others
// post themselves at once, so that every arrival does not send them all to the
// lock. A receive that may match a message from another proc posts itself at
// once too, so that the message goes straight into its buffer.
func (c *Comm) Recv(me int, buf []byte, src, tag int, st *Status) error {
	if src == ProcNull {
		*st = NullStatus
		return nil
	}
	ep := c.Peers[me]
	var (
		r     *Request
		ok    bool
		start int64
		err   error
	)
	if c.local(src) {
		r, ok, start = c.pollRecv(me, buf, src, tag, st)
	} else {
		r, ok = c.startRecv(me, buf, src, tag, nil, postNow, st)
	}
	switch {
	case ok:
		return nil
	case r != nil && c.DaemonOnly(src):
		err = ep.parkFor(r, tagsOf(tag))
	case r != nil: // posted, or a message still at its sender's proc claimed
		err = ep.wait(r, tagsOf(tag))
	default: // polled through the spin: post, then park
		if r, ok = c.startRecv(me, buf, src, tag, nil, postAfterPoll, st); ok {
			return nil
		}
		err = ep.sleep(r, start, tagsOf(tag))
	}
	r.Result(st)
	if r.Done() {
		Recycle(r)
	}
	return err
}

// pollRecv receives a matching message into buf, and its status into st (ok), if one
// has come; else, as the rank's polling receive, polls for arrivals within the spin
// that began at start, looking again at each, without posting a receive, and returns
// still polling (neither ok nor r) if none matched; it posts r at once if another
// receive of the rank polls. Senders that queue a message unexpected (a direct send,
// a drain by another goroutine) bump ep.queued, which it watches besides the inbox
// and the mailbox.
func (c *Comm) pollRecv(me int, buf []byte, src, tag int, st *Status) (r *Request, ok bool, start int64) {
	ep := c.Peers[me]
	seen := ep.queued.Load()
	if r, ok = c.startRecv(me, buf, src, tag, nil, pollOrPost, st); ok || r != nil {
		return
	}
	_, start = ep.spinFor(func() bool {
		if ep.queued.Load() == seen && !ep.arrivedFor(int32(tag)) {
			return false
		}
		seen = ep.queued.Load()
		r, ok = c.startRecv(me, buf, src, tag, nil, pollOn, st)
		return ok || r != nil
	})
	return
}

// recvMode says what startRecv does when no message matches. One receive of a rank
// polls at a time in each lane of its mailbox, and one with AnyTag (Endpoint.polling,
// under the lock that startRecv takes anyway, so that polling costs no atomic
// operation of its own on a hand-off's path).
type recvMode uint8

const (
	postNow       recvMode = iota // post the receive
	pollOrPost                    // become the rank's polling receive, or post if another polls
	pollOn                        // the caller polls: it goes on polling
	postAfterPoll                 // the caller polled in vain: it stops polling and posts
)

// pollBit is the bit of Endpoint.polling of a receive of tag (maybe AnyTag).
func pollBit(tag int32) uint16 {
	if tag == AnyTag {
		return 1 << mailboxLanes
	}
	return 1 << laneOf(tag)
}

// local reports whether a message from src (maybe AnySource) can only come from a
// rank of this proc.
func (c *Comm) local(src int) bool {
	if src == AnySource {
		return c.World.layout == nil
	}
	return c.Peers[src].peer == nil
}

// Irecv starts a receive into the user's request r, which must be new or Reset.
func (c *Comm) Irecv(me int, buf []byte, src, tag int, r *Request) {
	if src == ProcNull {
		r.kind, r.key = recvKind, key{src: ProcNull, tag: AnyTag}
		r.fire()
		return
	}
	var st Status
	if _, ok := c.startRecv(me, buf, src, tag, r, postNow, &st); ok {
		r.kind, r.key, r.mlen = recvKind, key{c.Ctx, int32(st.Source), int32(st.Tag)}, st.Len
		r.setBuf(buf)
		r.fire()
	}
}

// startRecv receives the earliest matching unexpected message into buf, and its
// status into st (ok), or else, as mode says, polls or posts a receive: r, or a
// pooled request when r is nil, which it returns. A matching message still at its
// sender's proc is claimed with such a request, which it returns too. The mailbox's
// next message, when nothing queued could come before it, takes a short path
// (takeNext).
func (c *Comm) startRecv(me int, buf []byte, src, tag int, r *Request, mode recvMode, st *Status) (posted *Request, ok bool) {
	ep := c.Peers[me]
	pat := key{c.Ctx, int32(src), int32(tag)}
	poll := pollBit(pat.tag)
	ep.mu.Lock()
	if mode == pollOn || mode == postAfterPoll {
		ep.polling &^= poll // set again below if the caller goes on polling
	}
	if ep.takeNext(pat, buf, st) {
		ep.mu.Unlock()
		return nil, true
	}
	m := ep.unexp.match(pat)
	if m == nil {
		if ok, _ := ep.takeBox(&pat, buf, st, published); ok {
			ep.mu.Unlock()
			return nil, true
		}
		ep.drainInbox() // not the lanes again: a message that came meanwhile would be left (see waiting)
		m = ep.unexp.match(pat)
	}
	if m != nil {
		if m.kind == remoteKind {
			return ep.claim(m, buf, r), false
		}
		*st = ep.take(m, buf)
		return nil, true
	}
	if mode == pollOn || mode == pollOrPost && ep.polling&poll == 0 {
		ep.polling |= poll
		ep.mu.Unlock()
		return nil, false
	}
	if r == nil {
		r = NewRequest()
	}
	r.kind, r.key = recvKind, pat
	r.setBuf(buf)
	if c.World.cfg.ErrorsReturn { // a lost proc fails receives: see peer.fail
		if err := c.lostSource(src); err != nil {
			ep.mu.Unlock()
			r.err = err
			r.fire()
			return r, false
		}
		r.comm = c
	}
	ep.post(r)
	ep.mu.Unlock()
	return r, false
}

// Wait blocks a rank of ep until r completes and returns its error; on abort it
// returns ErrAborted.
func (ep *Endpoint) Wait(r *Request) error { return ep.wait(r, allTags) }

// wait is Wait for a request that only messages of the tag classes tags complete.
func (ep *Endpoint) wait(r *Request, tags uint64) error {
	if ep.await(r, tags) || r.Done() {
		return r.err
	}
	return abandon(r)
}

// WaitWith is Wait for a request whose messages come from, or go to, rank peer of c:
// without a spin when only a receive daemon can complete it (see DaemonOnly).
func (c *Comm) WaitWith(me int, r *Request, peer int) error {
	if c.DaemonOnly(peer) {
		return c.Peers[me].parkFor(r, allTags)
	}
	return c.Peers[me].Wait(r)
}

// DaemonOnly reports whether what rank src of c sends reaches a rank of c only through
// a receive daemon: src is a rank of another proc, and this proc has no rings, which
// a waiting rank would poll itself (spinFor). A rank waiting for such a message (or a
// send waiting for src's answer) parks at once (parkFor): the daemon that will
// deliver it already polls its socket, and a spinning rank only takes the processor
// it needs (2 procs of one rank
// on 2 CPUs over TCP, 8-byte ping-pong: 5.38-5.44 µs instead of 5.81-6.10 while the
// VM's CPUs share a cache, Open MPI 5.32-5.52; 7.0-7.4 either way while they do not).
func (c *Comm) DaemonOnly(src int) bool {
	if src < 0 || c.Peers[src].peer == nil { // AnySource, ProcNull, or a rank of this proc
		return false
	}
	np := c.World.poller
	return np == nil || !np.Polls()
}

// parkFor is Wait without a spin, and without a say in the spin budget of the
// rank's other waits (see DaemonOnly).
func (ep *Endpoint) parkFor(r *Request, tags uint64) error {
	if r.Done() || ep.park([]*Request{r}, tags) || r.Done() {
		return r.err
	}
	return abandon(r)
}

// sleep is Wait without its spin, after a spin that began at start (see spinFor):
// parkFor, then the spin budget adapted to how long the wait took.
func (ep *Endpoint) sleep(r *Request, start int64, tags uint64) error {
	if r.Done() {
		return r.err
	}
	err := ep.parkFor(r, tags)
	ep.settleSince(r, start)
	return err
}

// abandon settles r after an abort: out of its queue if it still is, else (someone
// matched it and is copying) once that copy is done. A send that a receiver took with
// Mprobe is left to that receiver.
func abandon(r *Request) error {
	ep := r.ep
	ep.mu.Lock()
	if r.where != nowhere {
		ep.dequeue(r)
		ep.mu.Unlock()
		r.err = ErrAborted
		r.fire()
		return ErrAborted
	}
	taken := r.flags&probed != 0
	ep.mu.Unlock()
	if taken {
		return ErrAborted
	}
	if r.from != nil && r.from.forget(r) {
		r.err = ErrAborted
		r.fire()
		return ErrAborted
	}
	for !r.Done() {
		runtime.Gosched()
	}
	return r.err
}

// WaitAny blocks a rank of ep until one of rs completes and returns its index. It
// spins first if polls, else parks at once (when only receive daemons can complete
// rs: see DaemonOnly).
func (ep *Endpoint) WaitAny(rs []*Request, polls bool) (int, error) {
	done := func() int {
		for i, r := range rs {
			if r.Done() {
				return i
			}
		}
		return -1
	}
	if i := done(); i >= 0 {
		return i, nil
	}
	var (
		ok    bool
		start int64
	)
	if polls {
		if ok, start = ep.spinFor(func() bool { ep.Progress(); return done() >= 0 }); ok {
			return done(), nil
		}
	}
	ok = ep.park(rs, allTags)
	if polls {
		ep.settle(time.Duration(spin.Now() - start))
	}
	if ok {
		return done(), nil
	}
	for _, r := range rs {
		if !r.Done() {
			abandon(r)
		}
	}
	return -1, ErrAborted
}

// Cancel withdraws r if no receive or send has matched it yet; Cancelled in its
// status then says so. A send whose eager copy still waits at the receiver is
// cancelled by withdrawing that copy.
func Cancel(r *Request) {
	if r.from != nil && r.kind == sendKind {
		cancelRemote(r)
		return
	}
	if m := r.msg; m != nil {
		if withdrawCopy(m, r.msgGen, r.ep) {
			r.flags |= cancelled
		}
		return
	}
	if r.ep != nil && r.ep.withdraw(r) {
		r.flags |= cancelled
		r.fire()
	}
}

// probeParked, when a test sets it, runs where a blocking Probe has counted itself
// parked and has not yet taken its last look, so that a test can have a sender
// claim a slot between the two (TestProbeSeesClaimedSlot).
var probeParked func()

// Probe waits for a message matching (src, tag) at rank me and returns its status;
// with take it also removes the message and returns it, for Mrecv (Mprobe).
func (c *Comm) Probe(me, src, tag int, take bool) (*Request, Status, error) {
	ep := c.Peers[me]
	pat := key{c.Ctx, int32(src), int32(tag)}
	w := waiters.Get().(*waiter)
	defer waiters.Put(w)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	losses := c.World.losses.Load()
	for {
		ep.merge()
		if m, st := ep.peek(pat, take); m != nil {
			return m, st, nil
		}
		if err := c.probeLost(src, losses); err != nil {
			return nil, Status{}, err
		}
		ep.probes = append(ep.probes, w)
		ep.want(allTags, 1)
		ep.parked.Add(1)
		ep.mu.Unlock()
		c.World.flushDeferred()
		if probeParked != nil {
			probeParked()
		}
		var aborted bool
		if !ep.pending() { // not arrived: a slot's publication may not show yet, its claim does
			select {
			case <-w.ch:
			case <-c.World.abort:
				aborted = true
			}
		}
		ep.mu.Lock()
		ep.parked.Add(-1)
		ep.want(allTags, -1)
		ep.probes = slices.DeleteFunc(ep.probes, func(x *waiter) bool { return x == w })
		if aborted {
			return nil, Status{}, ErrAborted
		}
	}
}

// probeLost returns the error of a probe from src on c that a lost proc ends, or
// nil: a rank of its own was src, or, for AnySource, the loss came while it waited
// (losses counted the losses before).
func (c *Comm) probeLost(src int, losses uint32) error {
	if src != AnySource {
		return c.lostSource(src)
	}
	if c.World.losses.Load() == losses {
		return nil
	}
	for _, p := range c.World.peers {
		if p != nil && p.lost.Load() && c.waitsFor(AnySource, p) {
			return p.lostErr()
		}
	}
	return nil
}

// Iprobe is Probe without waiting: m is nil when nothing matches, and err says
// when nothing ever will, src's proc being lost (errors-return mode).
func (c *Comm) Iprobe(me, src, tag int, take bool) (*Request, Status, error) {
	ep := c.Peers[me]
	c.World.flushDeferred()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.merge()
	if m, st := ep.peek(key{c.Ctx, int32(src), int32(tag)}, take); m != nil {
		return m, st, nil
	}
	return nil, Status{}, c.lostSource(src)
}

// peek finds the earliest unexpected message matching pat and, with take, removes it.
// Caller holds ep.mu.
func (ep *Endpoint) peek(pat key, take bool) (*Request, Status) {
	m := ep.unexp.match(pat)
	if m == nil {
		return nil, Status{}
	}
	if take {
		ep.dequeue(m)
		m.flags |= probed
	}
	return m, Status{Source: int(m.key.src), Tag: int(m.key.tag), Bytes: m.blen, Len: m.blen}
}

// Mrecv receives a message taken by Probe or Iprobe with take.
func Mrecv(m *Request, buf []byte) (Status, error) {
	ep := m.ep
	ep.mu.Lock()
	if m.kind != remoteKind {
		return ep.take(m, buf), nil
	}
	r := ep.claim(m, buf, nil)
	err := ep.Wait(r)
	var st Status
	r.Result(&st)
	if r.Done() {
		Recycle(r)
	}
	return st, err
}
