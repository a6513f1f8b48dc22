package netd

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/netd/auth"
	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/transport/shm"
)

// A link is our sending side towards one peer on one channel: the connection we
// send on, chosen once, and the queue of posted messages that its send daemon
// writes.
//
// Order: every write happens under wmu, and whoever holds it first takes the
// whole queue and writes it ahead of its own message, in one writev. So a
// message posted or queued before a Send is written before it, and Sends are
// written in the order they took wmu.
//
// Combining: a Queue that finds wmu taken leaves its message to the holder, which,
// when its write is done, writes what was queued meanwhile before it lets go of
// wmu for good (turn). So ranks of one proc sending to another at once write
// batches, one syscall for many messages, instead of taking turns for a syscall
// each.
type link struct {
	d  *Device
	p  *peer
	ch Channel

	// wmu is held by one sender at a time (a Send or the send daemon), from
	// choosing the connection (dialing if needed) to the end of its write.
	wmu  sync.Mutex
	c    atomic.Pointer[conn] // the connection we send on; stored once, under p.mu, read without it
	hdr  [wire.Size]byte
	one  []byte      // a small posted message, copied whole for postNow
	bufs [][]byte    // the gather list being built
	nb   net.Buffers // what writev consumes (kept here so that it does not escape per write)

	// mu guards what follows. It is never held across I/O: Post never waits for
	// a write or a dial.
	mu       sync.Mutex
	queue    []posted     // posted or queued, not yet written
	queued   atomic.Int32 // len(queue), for holders of wmu that look without mu
	spare    []posted     // the previous queue's array, for reuse
	outcomes []outcome    // posts a Send wrote; the daemon calls their done
	started  bool         // the send daemon runs
	closed   bool         // the Device is closing: no more posts
	wake     chan struct{}
}

type posted struct {
	hdr     [wire.Size]byte
	payload []byte
	done    func(error)
}

type outcome struct {
	done func(error)
	err  error
}

// send is Device.Send on l: h is checked and h.Frag set.
func (l *link) send(h *wire.Header, payload []byte) error {
	l.wmu.Lock()
	h.Put(l.hdr[:])
	err := l.writeBatch(l.takeQueue(), l.hdr[:], payload)
	l.turn()
	return err
}

// takeQueue is take for a holder of wmu: without mu when nothing is queued.
func (l *link) takeQueue() []posted {
	if l.queued.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.take()
}

// writeBatch writes batch, then the message hdr+payload if hdr is not nil, in one
// gather-write, dialing first if needed, and hands the batch's done callbacks to
// the daemon. If the dial fails, the queued messages of others in batch are lost
// with the peer: nobody waits for this error but us (the loss is reported on a
// goroutine of its own: we may be under a sender's locks that the handlers take).
// Caller holds wmu.
func (l *link) writeBatch(batch []posted, hdr, payload []byte) error {
	c, err := l.connect()
	if err == nil {
		err = l.write(c, batch, hdr, payload)
	} else if len(batch) > 0 {
		go l.d.lose(l.p, err)
	}
	l.handOver(batch, err)
	return err
}

// handOver gives the done callbacks of a written batch to the daemon: they run
// there, never on a sender, which may hold locks they take. Called before wmu is
// released, so that a daemon about to exit at Close, which takes wmu after us,
// sees them.
func (l *link) handOver(batch []posted, err error) {
	if len(batch) == 0 {
		return
	}
	l.mu.Lock()
	n := len(l.outcomes)
	for i := range batch {
		if batch[i].done != nil {
			l.outcomes = append(l.outcomes, outcome{batch[i].done, err})
		}
	}
	l.recycle(batch)
	added := len(l.outcomes) > n
	l.mu.Unlock()
	if added {
		l.signal()
	}
}

// queueMsg is Device.Queue on l: h is checked and h.Frag set.
func (l *link) queueMsg(h *wire.Header, payload []byte, now bool, ordered func()) error {
	if now && l.wmu.TryLock() {
		// Nobody writes: we are next after what is queued now, and whoever
		// comes after ordered queues behind us.
		batch := l.takeQueue()
		h.Put(l.hdr[:])
		ordered()
		err := l.writeBatch(batch, l.hdr[:], payload)
		l.turn()
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ordered()
		return ErrClosed
	}
	l.start()
	l.queue = append(l.queue, posted{payload: payload})
	h.Put(l.queue[len(l.queue)-1].hdr[:])
	l.queued.Store(int32(len(l.queue)))
	l.mu.Unlock()
	ordered()
	if now {
		return l.flush()
	}
	l.signal()
	return nil
}

// flush is Device.Flush on l.
func (l *link) flush() error {
	if l.queued.Load() == 0 || !l.wmu.TryLock() {
		return nil // nothing to write, or the holder of wmu writes it (turn)
	}
	return l.turn()
}

// turn ends a holder's turn at wmu: it writes the queue if anything is in it and
// lets go of wmu, then takes wmu back if a message was queued meanwhile by a
// sender that found it taken (flush). Caller holds wmu; it returns the first
// write error. It may block writing, so it is not for handlers (see postNow).
func (l *link) turn() error {
	var first error
	for {
		if batch := l.takeQueue(); len(batch) > 0 {
			if err := l.writeBatch(batch, nil, nil); first == nil {
				first = err
			}
		}
		// A flush stores the queue, then tries wmu; we let go of wmu, then look
		// at the queue: one of us sees the other.
		l.wmu.Unlock()
		if l.queued.Load() == 0 || !l.wmu.TryLock() {
			return first
		}
	}
}

// post is Device.Post on l. A small message posted when nothing is queued or
// being written, on a link already connected, is written by post itself without
// blocking (see conn.tryWrite): no hand-off to the send daemon, whose wake-up
// would cost a handler's answer more than the write.
func (l *link) post(h *wire.Header, payload []byte, done func(error)) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.start()
	if len(l.queue) == 0 && len(payload) <= inlineMax && l.wmu.TryLock() {
		// Nothing posted before us waits, and nobody writes: we are next.
		if c := l.c.Load(); c != nil && c.polls() {
			l.mu.Unlock()
			l.postNow(c, h, payload, done)
			return nil
		}
		l.wmu.Unlock()
	}
	l.queue = append(l.queue, posted{payload: payload, done: done})
	h.Put(l.queue[len(l.queue)-1].hdr[:])
	l.queued.Store(int32(len(l.queue)))
	l.mu.Unlock()
	l.signal()
	return nil
}

// inlineMax is the largest payload post writes itself; larger ones go to the
// send daemon, which may block writing them.
const inlineMax = 4 << 10

// postNow writes h and payload on c without blocking. Caller holds l.wmu;
// postNow releases it.
func (l *link) postNow(c *conn, h *wire.Header, payload []byte, done func(error)) {
	h.Put(l.hdr[:])
	b := append(append(l.one[:0], l.hdr[:]...), payload...)
	l.one = b[:0]
	partial, err := c.tryWrite(b)
	l.wmu.Unlock()
	if l.queued.Load() > 0 {
		partial = true // queued by a sender that found wmu taken: the daemon writes it (turn would block)
	}
	if err != nil {
		err = fmt.Errorf("netd: send to proc %d on the %v channel: %w", l.p.proc, l.ch, err)
	}
	if done != nil {
		l.mu.Lock()
		l.outcomes = append(l.outcomes, outcome{done, err})
		l.mu.Unlock()
	}
	if partial || done != nil {
		l.signal()
	}
}

// start starts the send daemon if it is not running. Caller holds l.mu.
func (l *link) start() {
	if !l.started {
		l.started = true
		l.d.sendWG.Add(1)
		go l.daemon()
	}
}

func (l *link) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take returns the queue, oldest first, leaving an empty one. Caller holds l.mu.
func (l *link) take() []posted {
	q := l.queue
	l.queue = l.spare[:0]
	l.spare = nil
	l.queued.Store(0)
	return q
}

// recycle keeps the array of a written batch for the next queue, without keeping
// its payloads alive. Caller holds l.mu.
func (l *link) recycle(batch []posted) {
	clear(batch)
	if cap(batch) > cap(l.spare) {
		l.spare = batch[:0]
	}
}

// daemon is the send daemon: it writes what was posted, coalescing everything
// queued into one writev, and calls the done callbacks, until the Device closes
// and the queue is empty.
func (l *link) daemon() {
	defer l.d.sendWG.Done()
	for {
		select {
		case <-l.wake:
		case <-l.d.quit:
		}
		l.mu.Lock()
		outs := l.outcomes
		l.outcomes = nil
		l.mu.Unlock()
		for _, o := range outs {
			o.done(o.err)
		}

		l.wmu.Lock()
		l.mu.Lock()
		batch := l.take()
		l.mu.Unlock()
		var err error
		if len(batch) > 0 {
			var c *conn
			if c, err = l.connect(); err == nil {
				err = l.write(c, batch, nil, nil)
			}
		} else if c := l.conn(); c != nil {
			c.flush() // what postNow could not write at once
		}
		l.turn()
		for i := range batch {
			if batch[i].done != nil {
				batch[i].done(err)
			}
		}

		l.mu.Lock()
		l.recycle(batch)
		idle := len(l.queue) == 0 && len(l.outcomes) == 0
		if l.closed && idle {
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// shut refuses further posts; the daemon, once the Device's quit channel is
// closed, writes what is queued and exits.
func (l *link) shut() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// write writes batch, then the message hdr+payload if hdr is not nil, in one
// gather-write on c. Caller holds l.wmu.
func (l *link) write(c *conn, batch []posted, hdr, payload []byte) error {
	bufs := l.bufs[:0]
	for i := range batch {
		bufs = append(bufs, batch[i].hdr[:])
		if len(batch[i].payload) > 0 {
			bufs = append(bufs, batch[i].payload)
		}
	}
	n := len(batch)
	if hdr != nil {
		bufs = append(bufs, hdr)
		if len(payload) > 0 {
			bufs = append(bufs, payload)
		}
		n++
	}
	l.nb = bufs
	err := c.write(&l.nb, n)
	clear(bufs) // do not keep payloads alive
	l.bufs = bufs[:0]
	if err != nil {
		return fmt.Errorf("netd: send to proc %d on the %v channel: %w", l.p.proc, l.ch, err)
	}
	return nil
}

// conn returns the connection l sends on, or nil if there is none yet.
func (l *link) conn() *conn { return l.c.Load() }

// connect returns the connection l sends on, dialing the peer if there is none
// yet. A connection the peer dialed and that brought its first message meanwhile
// wins over ours, which is then closed: a link's connection never changes once
// chosen. Caller holds l.wmu.
func (l *link) connect() (*conn, error) {
	if c := l.c.Load(); c != nil {
		return c, nil
	}
	p := l.p
	p.mu.Lock()
	c, lost := l.c.Load(), p.lost
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if lost != nil {
		return nil, lost
	}
	dialed, err := l.d.dial(p, l.ch)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if l.c.Load() == nil && p.lost == nil {
		l.c.Store(dialed)
	}
	c, lost = l.c.Load(), p.lost
	p.mu.Unlock()
	if c != dialed {
		dialed.closeOrderly()
	}
	if c == nil {
		return nil, lost
	}
	return c, nil
}

// dial connects to p on channel ch: it tries each of p's candidate addresses in
// turn until one answers the handshake as p.
func (d *Device) dial(p *peer, ch Channel) (*conn, error) {
	addrs, err := p.addresses(d)
	if err != nil {
		return nil, err
	}
	var tried []string
	for _, a := range addrs {
		c, err := d.dialOne(p, ch, a)
		if err == nil {
			return c, nil
		}
		if d.closing.Load() {
			return nil, ErrClosed
		}
		tried = append(tried, a+": "+err.Error())
	}
	return nil, fmt.Errorf("%w: proc %d (%v channel), tried %d addresses: %s", ErrUnreachable, p.proc, ch, len(addrs), strings.Join(tried, "; "))
}

// dialOne connects to addr and runs the initiator's handshake. Close does not
// abort the handshake: our peers answer at once, and a handshake cut short after
// the peer finished its part would look to it like our failure.
func (d *Device) dialOne(p *peer, ch Channel, addr string) (*conn, error) {
	dialer := net.Dialer{Timeout: d.cfg.DialTimeout}
	netw, where := network(addr)
	nc, err := dialer.DialContext(d.ctx, netw, where)
	if err != nil {
		return nil, err
	}
	hello, err := auth.Handshake(nc, d.authConfig(auth.Config{Channel: uint8(ch), Initiator: true}))
	if uc, ok := nc.(*net.UnixConn); ok && err == nil {
		_ = uc.SetDeadline(time.Now().Add(d.handshakeTimeout()))
		if nc, err = shm.Offer(uc, d.cfg.Shm); err != nil {
			nc = uc // to close
		}
		_ = uc.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	if int(hello.Proc) != p.proc {
		// Another proc of the job (a loopback candidate can reach a proc of our
		// own host that is not the one meant).
		leave(nc)
		return nil, fmt.Errorf("reached proc %d instead", hello.Proc)
	}
	c := d.newConn(nc, p, ch, true)
	if err := p.register(c); err != nil {
		leave(nc)
		return nil, err
	}
	return c, nil
}

// leave closes nc, a connection we dialed and sent nothing on, in an orderly
// way, so that the peer does not count us as failed. The peer sends nothing on
// a connection it accepted before a message came on it (see peer.adopt), so
// nothing unread makes the close a reset.
func leave(nc net.Conn) {
	_ = nc.SetWriteDeadline(time.Now().Add(closeLinger))
	_, _ = nc.Write(closeMessage(0))
	_ = nc.Close()
}

// addresses returns p's candidate addresses, asking Config.Addrs the first time
// (outside p.mu: it may be a slow lookup) and again after it failed.
func (p *peer) addresses(d *Device) ([]string, error) {
	p.mu.Lock()
	addrs := p.addrs
	p.mu.Unlock()
	if addrs != nil {
		return addrs, nil
	}
	addrs, err := d.cfg.Addrs(p.proc)
	if err != nil {
		return nil, fmt.Errorf("%w: addresses of proc %d: %w", ErrUnreachable, p.proc, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: proc %d has no address", ErrUnreachable, p.proc)
	}
	p.mu.Lock()
	p.addrs = addrs
	p.mu.Unlock()
	return addrs, nil
}

// closeMessage is the wire.Close message of a connection on which seq messages
// were sent.
func closeMessage(seq uint64) []byte {
	b := make([]byte, wire.Size)
	h := wire.Header{Kind: wire.Close, Seq: seq}
	h.Put(b)
	return b
}
