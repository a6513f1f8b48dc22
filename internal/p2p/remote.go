package p2p

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/spin"
)

// Messages to and from the ranks of other procs travel through the network device
// (internal/netd) as a wire header and a payload; docs/protocol.md has the flows.
// A sender of a small message copies it into the pool and sends it at once (Eager):
// the sender returns, and keeps the copy until the receiving proc acknowledges that
// it holds the data, because a receiver whose pool is full drops the payload and
// pulls it when a receive matches (TMPI Fig. 8 b). Larger messages, and synchronous
// ones, go in three phases: RTS, then a CTS when a receive matches, then the data,
// straight from the sender's buffer into the receiver's. A receive daemon of the
// device, or a waiting rank that polls it (PollNet), hands each message to
// World.Handle, which matches it under the receiving rank's lock like a local
// sender would, after draining the inbox: a proc's messages to a rank arrive on one
// connection in the order sent, so matching sees them in that order.

// Net is the network device as the engine uses it (netd.Device).
type Net interface {
	Send(proc int, ch netd.Channel, h *wire.Header, payload []byte) error
	Post(proc int, ch netd.Channel, h *wire.Header, payload []byte, done func(error))
	Queue(proc int, ch netd.Channel, h *wire.Header, payload []byte, now bool, ordered func()) error
	Flush(proc int, ch netd.Channel) error
	Rings(proc int, ch netd.Channel) bool
}

// ackEvery is how many eager messages a receiver holds before it acknowledges them
// (sooner when an RTS or a pull shows the sender may be short of pool).
const ackEvery = 16

// peer is another proc of the job as this proc's engine sees it.
type peer struct {
	wd   *World
	proc int

	sendMu   sync.Mutex  // orders sequence numbers as they go on the wire
	seq      uint64      // Eager and RTS messages sent to it; each one's SendReq
	hdr      wire.Header // the header being sent, under sendMu: the Net copies it before it lets go of sendMu
	unlockMu func()      // sendMu.Unlock, made once: a method value per send would allocate

	wrote    atomic.Int64 // when (spin.Now) a send to it last wrote its message itself
	deferred atomic.Bool  // messages to it wait for the send daemon (see send)
	answered atomic.Bool  // a message came from it since a send last wrote (see exchanging)

	mu      sync.Mutex
	held    list                 // our eager copies it may still pull, oldest first
	sends   map[uint64]*Request  // our RTS sends waiting for a CTS, by sequence number
	recvs   map[uint64]*Request  // our receives waiting for its Data, by id
	cancels map[uint64]chan bool // our cancel requests waiting for a reply, by sequence number
	nextID  uint64               // ids of our receives
	filling *Request             // the receive a daemon is reading Data into
	heard   uint64               // the last sequence number received from it
	settled uint64               // the last one taken in: data held, or its drop recorded
	acked   uint64               // the last one acknowledged
	unacked int                  // eager messages held since the last Ack
	drops   []uint64             // its eager messages whose payload we dropped and have not pulled, ascending

	lost  atomic.Bool                // set once, when the link to it broke
	cause atomic.Pointer[errs.Error] // why, set before lost
}

func newPeer(wd *World, proc int) *peer {
	p := &peer{wd: wd, proc: proc, sends: map[uint64]*Request{}, recvs: map[uint64]*Request{}, cancels: map[uint64]chan bool{}}
	p.unlockMu = p.sendMu.Unlock
	return p
}

// Connect gives the world its network device. Call it before any rank runs.
// A device that counts the ranks waiting for other procs (netd.Device) is
// told of every parked wait.
func (wd *World) Connect(n Net) {
	wd.net = n
	if d, ok := n.(demander); ok {
		wd.demand = d.Demand()
	}
}

// PollNet has the world's waiting ranks poll p for messages from other procs
// within their spin (see spinFor). Call it before any rank runs.
func (wd *World) PollNet(p netd.Poller) { wd.poller = p }

// demander is a Net that polls harder while ranks wait (netd.Device).
type demander interface{ Demand() *netd.Demand }

// lostErr is the error of an operation whose other proc was lost, once p is lost
// (fail stores the cause first). A loss aborts the job, so it is ErrAborted, which
// the caller explains with World.Cause; in errors-return mode the job goes on, and
// it is the loss itself (ErrProcFailed).
func (p *peer) lostErr() error {
	if !p.wd.cfg.ErrorsReturn {
		return ErrAborted
	}
	return p.cause.Load()
}

// sendRemote sends buf from rank me of c to the rank dest of another proc. With a
// user's request r it starts the send and returns; without, it waits until buf may
// be reused.
func (c *Comm) sendRemote(me int, buf []byte, to *Endpoint, tag int, mode Mode, r *Request) error {
	p := to.peer
	k := key{c.Ctx, int32(me), int32(tag)}
	h := wire.Header{Context: c.Ctx, Source: int32(me), Dest: int32(to.Rank), Tag: int32(tag), Len: uint64(len(buf))}
	switch mode {
	case Synchronous:
		h.Flags = wire.FlagSsend
	case Ready:
		h.Flags = wire.FlagReady
	}
	small := len(buf) <= c.World.cfg.NetEagerLimit
	var m *Request // our copy of the data, when the send need not wait for the receiver
	switch {
	case mode == Buffered:
		var err error
		if m, err = c.Peers[me].bufferedCopy(buf, k, int(to.Rank)); err != nil {
			return err
		}
	case mode != Synchronous && small:
		m = c.Peers[me].eagerCopy(buf, k)
	}
	if r != nil {
		r.from, r.dest, r.kind, r.key = p, int32(to.Rank), sendKind, k
	}
	if m != nil {
		if small {
			h.Kind = wire.Eager
			seq, err := p.send(&h, m, m.buf(), &p.held)
			return finishCopied(r, seq, err)
		}
		h.Kind = wire.RTS
		seq, err := p.send(&h, m, nil, nil)
		return finishCopied(r, seq, err)
	}
	h.Kind = wire.RTS
	s := r
	if s == nil {
		s = NewRequest()
		s.from, s.dest, s.kind, s.key = p, int32(to.Rank), sendKind, k
	}
	s.setBuf(buf)
	s.ep = c.Peers[me]
	if _, err := p.send(&h, s, nil, nil); err != nil {
		return err
	}
	if r != nil {
		return nil
	}
	err := c.Peers[me].Wait(s)
	if s.Done() {
		Recycle(s)
	}
	return err
}

// finishCopied completes the user's request r, if any, of a send whose data we
// copied: it can still be cancelled by sequence number.
func finishCopied(r *Request, seq uint64, err error) error {
	if r != nil {
		r.rid, r.err = seq, err
		r.fire()
	}
	return err
}

// send numbers h, registers what waits for the peer's answer (m in held, the list
// of eager copies, or, when held is nil, in sends, to wait for a CTS) and writes h
// with payload, which is m's (an eager copy) and stays until the peer has it. It
// returns the sequence number.
//
// The numbering orders the messages on the wire, so they take their place in the
// link's order under sendMu, and the write comes after (netd's Queue releases
// sendMu in between), so that ranks sending at once do not wait for each other's
// syscalls: whoever writes takes the others' messages along.
func (p *peer) send(h *wire.Header, m *Request, payload []byte, held *list) (uint64, error) {
	p.sendMu.Lock()
	p.seq++
	seq := p.seq
	p.hdr = *h
	p.hdr.Seq, p.hdr.SendReq = seq, seq
	m.rid = seq
	p.mu.Lock()
	if p.lost.Load() {
		p.mu.Unlock()
		p.sendMu.Unlock()
		p.wd.free(m)
		return 0, p.lostErr()
	}
	if held != nil {
		held.push(m)
	} else {
		p.sends[seq] = m
	}
	p.hdr.RecvReq = p.ackRiding()
	p.mu.Unlock()
	// An exchange writes at once without reading the clock (tens of nanoseconds
	// here, twice): a stream that follows finds the last write long ago and writes
	// its first message at once too.
	exchange := p.exchanging()
	streaming := !exchange && spin.Now()-p.wrote.Load() < int64(streamGap)
	err := p.wd.net.Queue(p.proc, netd.ChannelP2P, &p.hdr, payload, !streaming, p.unlockMu)
	if streaming {
		if !p.deferred.Swap(true) {
			p.wd.deferred.Add(1)
		}
	} else {
		if !exchange {
			p.wrote.Store(spin.Now())
		}
		if p.answered.Load() {
			p.answered.Store(false)
		}
	}
	if err != nil {
		p.fail(err)
		return 0, p.lostErr()
	}
	return seq, nil
}

// exchanging reports whether a send to p is part of an exchange, not a stream: p
// sent us something since we last wrote to it ourselves, and messages to it go
// through a shared-memory ring, where a write costs no system call. Its next
// message may be what p waits for, and waits for no batch: a ping-pong between
// two procs on one host, whose round trip (about 1 µs) is shorter than streamGap,
// had each message queued for the send daemon and written by the wait that
// followed (8-byte one-way 0.57 µs, against 0.46 written at once). Over a socket
// a round trip is longer than streamGap anyway.
func (p *peer) exchanging() bool {
	return p.answered.Load() && p.wd.net.Rings(p.proc, netd.ChannelP2P)
}

// streamGap is how soon after the last write of its own a send leaves its message
// to the send daemon: a rank that sends again within it is streaming (a ping-pong's
// next send comes a network round trip later, 7-9 µs here), and its messages then
// go out together, when the daemon gets the processor or when a rank of ours waits
// (flushDeferred), instead of one syscall each.
const streamGap = 2 * time.Microsecond

// flushDeferred writes what streaming sends left to the send daemons, before a
// rank of ours waits: what it waits for may answer them.
func (wd *World) flushDeferred() {
	if wd.deferred.Load() == 0 {
		return
	}
	for _, p := range wd.peers {
		if p != nil && p.deferred.Swap(false) {
			wd.deferred.Add(-1)
			err := wd.net.Flush(p.proc, netd.ChannelP2P)
			p.wrote.Store(spin.Now())
			if err != nil {
				p.fail(err)
			}
		}
	}
}

// free releases our copy m of sent data once the peer no longer needs it.
func (wd *World) free(m *Request) {
	switch {
	case m.kind == sendKind: // the user's buffer: nothing to free
	case m.bseg != nil:
		m.bseg.free(m.boff)
	default:
		wd.pooled.Add(-chargeOf(m.blen))
		m.from, m.rid = nil, 0
		copies.Put(m)
	}
}

// Handle is the device's receive daemon handing over a point-to-point message from proc.
func (wd *World) Handle(proc int, h *wire.Header, pl *netd.Payload) error {
	p := wd.peerOf(proc)
	if p == nil {
		return fmt.Errorf("p2p: message from proc %d, which is not another proc of this job", proc)
	}
	if !p.answered.Load() {
		p.answered.Store(true)
	}
	switch h.Kind {
	case wire.Eager:
		p.ack(h.RecvReq)
		return p.eager(h, pl)
	case wire.RTS:
		p.ack(h.RecvReq)
		return p.rts(h)
	case wire.CTS:
		return p.cts(h)
	case wire.Data:
		return p.data(h, pl)
	case wire.Ack:
		p.ack(h.SendReq)
		return nil
	case wire.Pull:
		return p.pull(h)
	case wire.CancelReq:
		return p.cancelReq(h)
	case wire.CancelReply:
		return p.cancelReply(h)
	}
	return fmt.Errorf("p2p: unexpected %v message from proc %d", h.Kind, proc)
}

func (wd *World) peerOf(proc int) *peer {
	if proc < 0 || proc >= len(wd.peers) {
		return nil
	}
	return wd.peers[proc]
}

// arrival checks a message's sequence number and finds the endpoint of its receiver.
func (p *peer) arrival(h *wire.Header) (*Endpoint, error) {
	p.mu.Lock()
	seq := p.heard + 1
	if h.Seq == seq {
		p.heard = seq
	}
	p.mu.Unlock()
	if h.Seq != seq {
		return nil, fmt.Errorf("p2p: %v message %d from proc %d, want message %d: messages lost or reordered", h.Kind, h.Seq, p.proc, seq)
	}
	if int(h.Dest) >= len(p.wd.Endpoints) || p.wd.Endpoints[h.Dest].peer != nil {
		return nil, fmt.Errorf("p2p: %v message from proc %d for rank %d, which is not a rank of this proc", h.Kind, p.proc, h.Dest)
	}
	return p.wd.Endpoints[h.Dest], nil
}

// eager receives a small message: straight into a posted receive that matches, else
// into a copy charged to the pool, else, the pool being full, as an envelope whose
// data we pull when a receive matches.
func (p *peer) eager(h *wire.Header, pl *netd.Payload) error {
	ep, err := p.arrival(h)
	if err != nil {
		return err
	}
	k := key{h.Context, h.Source, h.Tag}
	n := int(h.Len)
	ep.mu.Lock()
	ep.drain()
	if r := ep.takePosted(k); r != nil {
		ep.mu.Unlock()
		err := pl.ReadInto(r.buf()[:min(n, r.blen)])
		r.key, r.mlen = k, n
		if err != nil {
			p.fail(err)
			r.err = p.lostErr()
		} else {
			p.held1(h.Seq)
		}
		handOver(r, pl)
		return err
	}
	if !p.wd.lend(chargeOf(n)) {
		m := NewRequest()
		m.kind, m.key, m.flags, m.blen, m.from, m.rid = remoteKind, k, dropped, n, p, h.SendReq
		ep.queue(m)
		ep.mu.Unlock()
		p.mu.Lock()
		p.drops = append(p.drops, h.SendReq)
		p.settled = h.Seq
		p.mu.Unlock()
		return nil
	}
	ep.mu.Unlock()
	m := copies.Get().(*Request)
	m.flags, m.kind, m.key, m.from, m.rid = pooled, eagerKind, k, p, h.SendReq
	if cap(m.store) < n {
		m.store = make([]byte, n)
	}
	m.setBuf(m.store[:n])
	if err := pl.ReadInto(m.buf()); err != nil {
		p.wd.pooled.Add(-chargeOf(n))
		m.from, m.rid = nil, 0
		copies.Put(m)
		return err
	}
	ep.push(m)
	p.held1(h.Seq)
	return nil
}

// held1 records that we hold the data of the eager message seq and acknowledges
// what we hold when enough has gathered.
func (p *peer) held1(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled = seq
	p.unacked++
	p.acknowledge(false)
}

// acknowledge tells the peer which of its eager copies it may free, with an Ack
// of its own once ackEvery have gathered, or at once with now. Caller holds p.mu.
func (p *peer) acknowledge(now bool) {
	if !now && p.unacked < ackEvery {
		return
	}
	if upTo := p.ackRiding(); upTo != 0 {
		p.wd.net.Post(p.proc, netd.ChannelP2P, &wire.Header{Kind: wire.Ack, SendReq: upTo}, nil, nil)
	}
}

// ackRiding returns the acknowledgement there is to give, 0 if none, and counts it
// given: every eager copy of the peer's up to the last message we settled, or to
// the first one we dropped. An Eager or RTS to the peer carries it in RecvReq, so
// that traffic both ways needs no Ack messages. Caller holds p.mu.
func (p *peer) ackRiding() uint64 {
	upTo := p.settled
	if len(p.drops) > 0 {
		upTo = min(upTo, p.drops[0]-1)
	}
	if upTo <= p.acked {
		return 0
	}
	p.acked, p.unacked = upTo, 0
	return upTo
}

// undrop forgets the dropped payload of message seq, pulled or cancelled, and
// acknowledges what that frees. Caller holds p.mu.
func (p *peer) undrop(seq uint64) {
	p.drops = slices.DeleteFunc(p.drops, func(s uint64) bool { return s == seq })
	p.acknowledge(true)
}

// rts receives a request to send: a matching posted receive is cleared at once,
// else the envelope waits in the unexpected queue.
func (p *peer) rts(h *wire.Header) error {
	ep, err := p.arrival(h)
	if err != nil {
		return err
	}
	k := key{h.Context, h.Source, h.Tag}
	ep.mu.Lock()
	ep.drain()
	r := ep.takePosted(k)
	if r != nil {
		// Under ep.mu: a rank abandoning r after an abort looks at from next.
		r.from = p
	} else {
		m := NewRequest()
		m.kind, m.key, m.blen, m.from, m.rid = remoteKind, k, int(h.Len), p, h.SendReq
		ep.queue(m)
	}
	ep.mu.Unlock()
	if r != nil {
		r.key, r.mlen = k, int(h.Len)
		p.expect(r, h.SendReq, wire.CTS, true)
	}
	p.mu.Lock()
	p.settled = h.Seq
	p.acknowledge(true) // an RTS of a small message says the sender's pool is short
	p.mu.Unlock()
	return nil
}

// expect registers the matched receive r, whose from is p, for the Data of the
// peer's message seq and asks for it with a CTS or, for a dropped eager payload,
// a Pull. The receive daemon posts it; a rank writes it. After an abort it fails r
// instead: its rank, abandoning it, waits for that unless it found r registered.
func (p *peer) expect(r *Request, seq uint64, kind wire.Kind, daemon bool) {
	want := min(r.mlen, r.blen)
	p.mu.Lock()
	if p.lost.Load() || p.wd.Cause() != nil {
		p.mu.Unlock()
		r.err = ErrAborted
		if p.lost.Load() {
			r.err = p.lostErr()
		}
		r.fire()
		return
	}
	p.nextID++
	id := p.nextID
	r.rid, r.want = id, want
	p.recvs[id] = r
	p.mu.Unlock()
	h := wire.Header{Kind: kind, SendReq: seq, RecvReq: id, Len: uint64(want)}
	if daemon {
		p.wd.net.Post(p.proc, netd.ChannelP2P, &h, nil, p.failOn)
	} else if err := p.wd.net.Send(p.proc, netd.ChannelP2P, &h, nil); err != nil {
		p.fail(err)
	}
}

// failOn is a posted write's outcome: a failed write loses the peer.
func (p *peer) failOn(err error) {
	if err != nil {
		p.fail(err)
	}
}

// claim receives the unexpected message m from another proc into buf, with the
// user's request r or a pooled one, which it returns: the data follows. Caller
// holds ep.mu; claim releases it.
func (ep *Endpoint) claim(m *Request, buf []byte, r *Request) *Request {
	ep.dequeue(m)
	ep.mu.Unlock()
	if r == nil {
		r = NewRequest()
	}
	r.kind, r.key, r.mlen, r.ep = recvKind, m.key, m.blen, ep
	r.setBuf(buf)
	kind := wire.CTS
	if m.flags&dropped != 0 {
		kind = wire.Pull
		r.flags |= dropped
	}
	p, seq := m.from, m.rid
	Recycle(m)
	r.from = p
	p.expect(r, seq, kind, false)
	return r
}

// cts answers the peer's clear to send: the data goes, from the send's buffer.
func (p *peer) cts(h *wire.Header) error {
	p.mu.Lock()
	s := p.sends[h.SendReq]
	delete(p.sends, h.SendReq)
	p.mu.Unlock()
	if s == nil {
		return fmt.Errorf("p2p: CTS from proc %d for send %d, which is not waiting for one", p.proc, h.SendReq)
	}
	if h.Len > uint64(s.blen) {
		return fmt.Errorf("p2p: CTS from proc %d asks %d bytes of send %d, which has %d", p.proc, h.Len, h.SendReq, s.blen)
	}
	p.sendData(h, s.buf()[:h.Len], func(err error) {
		if err != nil {
			p.fail(err)
		}
		if s.kind == sendKind {
			if err != nil {
				s.err = p.lostErr()
			}
			s.fire()
			return
		}
		p.wd.free(s)
	})
	return nil
}

// sendData posts data in Data fragments answering the CTS or Pull h; done is
// called once the last is written.
func (p *peer) sendData(h *wire.Header, data []byte, done func(error)) {
	off := 0
	for {
		n := min(len(data)-off, wire.MaxFrag)
		d := wire.Header{Kind: wire.Data, SendReq: h.SendReq, RecvReq: h.RecvReq, Len: uint64(len(data)), Offset: uint64(off)}
		off += n
		if off == len(data) {
			p.wd.net.Post(p.proc, netd.ChannelP2P, &d, data[off-n:off], done)
			return
		}
		p.wd.net.Post(p.proc, netd.ChannelP2P, &d, data[off-n:off], p.failOn)
	}
}

// data reads a fragment of a message straight into the receive that asked for it.
func (p *peer) data(h *wire.Header, pl *netd.Payload) error {
	p.mu.Lock()
	r := p.recvs[h.RecvReq]
	p.filling = r
	p.mu.Unlock()
	if r == nil {
		if p.wd.Cause() != nil {
			return nil // a receive abandoned when the job ended
		}
		return fmt.Errorf("p2p: Data from proc %d for receive %d, which is not waiting for any", p.proc, h.RecvReq)
	}
	if total := uint64(min(r.mlen, r.blen)); h.Len != total || h.Offset+uint64(h.Frag) > total {
		p.mu.Lock()
		p.filling = nil
		p.mu.Unlock()
		return fmt.Errorf("p2p: Data from proc %d: fragment [%d, %d+%d) of %d bytes for a receive of %d", p.proc, h.Offset, h.Offset, h.Frag, h.Len, min(r.mlen, r.blen))
	}
	err := pl.ReadInto(r.buf()[h.Offset : h.Offset+uint64(h.Frag)])
	p.mu.Lock()
	p.filling = nil
	if err == nil {
		r.want -= int(h.Frag)
	}
	done := err != nil || r.want == 0
	if done {
		delete(p.recvs, h.RecvReq)
		if r.flags&dropped != 0 && err == nil {
			p.undrop(h.SendReq)
		}
	}
	p.mu.Unlock()
	if done {
		if err != nil {
			p.fail(err)
			r.err = p.lostErr()
		}
		handOver(r, pl)
	}
	return err
}

// handOver completes r from the handler of pl. A receive daemon then yields the
// processor: the waiting rank, woken onto this P or spinning beside us, runs now
// instead of after the daemon's next poll of its socket. A polling rank does not:
// r may be its own.
func handOver(r *Request, pl *netd.Payload) {
	r.fire()
	if !pl.Inline() {
		runtime.Gosched()
	}
}

// ack frees our eager copies up to sequence number upTo: the peer holds their data.
// Zero acknowledges nothing (an Eager or RTS without an Ack riding along).
func (p *peer) ack(upTo uint64) {
	if upTo == 0 {
		return
	}
	p.mu.Lock()
	var freed []*Request
	for m := p.held.head; m != nil && m.rid <= upTo; m = p.held.head {
		p.held.remove(m)
		freed = append(freed, m)
	}
	p.mu.Unlock()
	for _, m := range freed {
		p.wd.free(m)
	}
}

// pull sends again the data of an eager copy whose payload the peer dropped.
func (p *peer) pull(h *wire.Header) error {
	p.mu.Lock()
	m := p.heldCopy(h.SendReq)
	p.mu.Unlock()
	if m == nil || h.Len > uint64(m.blen) {
		return fmt.Errorf("p2p: Pull from proc %d of %d bytes of message %d, which we do not hold", p.proc, h.Len, h.SendReq)
	}
	p.sendData(h, m.buf()[:h.Len], p.failOn)
	return nil
}

// heldCopy finds our eager copy with sequence number seq. Caller holds p.mu.
func (p *peer) heldCopy(seq uint64) *Request {
	for m := p.held.head; m != nil; m = m.next {
		if m.rid == seq {
			return m
		}
	}
	return nil
}

// cancelReq withdraws the peer's message if no receive has matched it yet.
func (p *peer) cancelReq(h *wire.Header) error {
	if int(h.Dest) >= len(p.wd.Endpoints) || p.wd.Endpoints[h.Dest].peer != nil {
		return fmt.Errorf("p2p: CancelReq from proc %d for rank %d, which is not a rank of this proc", p.proc, h.Dest)
	}
	ep := p.wd.Endpoints[h.Dest]
	ep.mu.Lock()
	ep.drain()
	var m *Request
	for e := ep.unexp.order.head; e != nil; e = e.next {
		if e.from == p && e.rid == h.SendReq {
			m = e
			break
		}
	}
	var what kind
	if m != nil {
		what = m.kind // an eager copy released here may be reused at once
		ep.dequeue(m)
		if what == eagerKind {
			ep.release(m)
		}
	}
	ep.mu.Unlock()
	reply := wire.Header{Kind: wire.CancelReply, SendReq: h.SendReq}
	if m != nil {
		reply.Flags = wire.FlagCancelled
		if what == remoteKind {
			p.mu.Lock()
			if m.flags&dropped != 0 {
				p.undrop(h.SendReq)
			}
			p.mu.Unlock()
			Recycle(m)
		}
	}
	p.wd.net.Post(p.proc, netd.ChannelP2P, &reply, nil, p.failOn)
	return nil
}

// cancelReply hands the peer's answer to the Cancel waiting for it.
func (p *peer) cancelReply(h *wire.Header) error {
	p.mu.Lock()
	ch := p.cancels[h.SendReq]
	delete(p.cancels, h.SendReq)
	p.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("p2p: CancelReply from proc %d for message %d, which nobody asked to cancel", p.proc, h.SendReq)
	}
	ch <- h.Flags&wire.FlagCancelled != 0
	return nil
}

// cancelRemote asks the receiving proc to withdraw the send r, and waits for the
// answer: Cancelled in r's status says whether it did.
func cancelRemote(r *Request) {
	p, seq := r.from, r.rid
	if seq == 0 { // the send failed before it was numbered
		return
	}
	ch := make(chan bool, 1)
	p.mu.Lock()
	if p.lost.Load() {
		p.mu.Unlock()
		return
	}
	p.cancels[seq] = ch
	p.mu.Unlock()
	h := wire.Header{Kind: wire.CancelReq, SendReq: seq, Dest: r.dest}
	if err := p.wd.net.Send(p.proc, netd.ChannelP2P, &h, nil); err != nil {
		p.fail(err)
		return
	}
	var withdrawn bool
	select {
	case withdrawn = <-ch:
	case <-p.wd.abort:
		return
	}
	if !withdrawn {
		return
	}
	p.mu.Lock()
	m := p.heldCopy(seq)
	if m != nil {
		p.held.remove(m)
	} else if m = p.sends[seq]; m != nil {
		delete(p.sends, seq)
	}
	p.mu.Unlock()
	r.flags |= cancelled
	if m == r { // an RTS still waiting: the send is over
		r.fire()
	} else if m != nil {
		p.wd.free(m)
	}
}

// forget takes a send or receive waiting for the peer out of its tables after the
// job ended, and reports whether it was there (else a daemon is completing it).
func (p *peer) forget(r *Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filling == r {
		return false
	}
	if p.sends[r.rid] == r {
		delete(p.sends, r.rid)
		return true
	}
	if p.recvs[r.rid] == r {
		delete(p.recvs, r.rid)
		return true
	}
	return false
}

// Lost is the device telling us the connection to proc broke: the job ends (or,
// in errors-return mode, goes on without it), and every operation waiting for
// that proc fails.
func (wd *World) Lost(proc int, err error) {
	if p := wd.peerOf(proc); p != nil {
		p.fail(err)
	}
}

// fail marks the peer lost and fails every operation waiting for it. By default
// the loss ends the job, naming the proc and its ranks. In errors-return mode
// the job goes on: receives posted for its ranks, or for any source of a
// communicator that has some, fail too, and so do later sends to it and
// receives from it (see startRecv).
func (p *peer) fail(err error) {
	p.mu.Lock()
	if p.lost.Load() {
		p.mu.Unlock()
		return
	}
	cause := p.wd.lostCause(p.proc, err)
	p.cause.Store(cause)
	p.lost.Store(true)
	var waiting []*Request
	for _, s := range p.sends {
		waiting = append(waiting, s)
	}
	for _, r := range p.recvs {
		if r != p.filling {
			waiting = append(waiting, r)
		}
	}
	clear(p.sends)
	clear(p.recvs)
	for _, ch := range p.cancels {
		ch <- false
	}
	clear(p.cancels)
	p.mu.Unlock()
	if p.wd.cfg.ErrorsReturn {
		p.wd.loss.CompareAndSwap(nil, cause)
		p.wd.losses.Add(1)
		for _, ep := range p.wd.Endpoints {
			if ep.peer == nil {
				waiting = append(waiting, ep.orphans(p)...)
			}
		}
	} else {
		p.wd.Abort(cause)
	}
	for _, r := range waiting {
		if r.kind == sendKind || r.kind == recvKind {
			r.err = p.lostErr()
			r.fire()
		}
	}
}

// orphans takes out of ep's queues the receives that the loss of proc p leaves
// without a sender, and wakes ep's probes to look again.
func (ep *Endpoint) orphans(p *peer) []*Request {
	var out []*Request
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, l := range [...]*list{&ep.posted.order, &ep.wild} {
		for r := l.head; r != nil; {
			next := r.next
			if r.comm != nil && r.comm.waitsFor(r.key.src, p) {
				ep.dequeue(r)
				out = append(out, r)
			}
			r = next
		}
	}
	for _, w := range ep.probes {
		w.ring()
	}
	return out
}

// waitsFor reports whether a receive or probe from src (a rank, or AnySource) on c
// may have been waiting for a message from proc p.
func (c *Comm) waitsFor(src int32, p *peer) bool {
	if src != AnySource {
		return c.Peers[src].peer == p
	}
	for _, e := range c.Peers {
		if e.peer == p {
			return true
		}
	}
	return false
}

// lostSource returns the error of a receive or probe from src on c whose rank's
// proc is lost, in errors-return mode, or nil (also for AnySource).
func (c *Comm) lostSource(src int) error {
	if src == AnySource || !c.World.cfg.ErrorsReturn {
		return nil
	}
	if p := c.Peers[src].peer; p != nil && p.lost.Load() {
		return p.lostErr()
	}
	return nil
}
