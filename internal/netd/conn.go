package netd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/spin"
	"github.com/weft-mpi/weft/internal/transport/shm"
)

const (
	// bufSize is a receive daemon's buffer: one read takes in many small messages.
	bufSize = 64 << 10
	// directMin: a payload remainder at least this long is read straight into the
	// handler's buffer; a shorter one goes through the buffer, where the same read
	// syscall may also bring the next headers. Copying 8 KiB costs about a tenth
	// of a read syscall.
	directMin = 8 << 10
	// sockBuf is the kernel socket buffer asked for in each direction, so that a
	// few MiB are in flight without waiting for the reader (bandwidth).
	sockBuf = 4 << 20
	// writeChunk bounds one write syscall (see conn.writeRaw). Each write longer
	// than a sysmon tick (20 µs) costs about as much again when it returns: Go
	// has handed its P to another thread meanwhile, and the goroutine waits for
	// one. So fewer, longer writes: 4 MiB ping-pong over loopback TCP took
	// 485-522 µs one way with 4 MiB chunks against 775-795 with 256 KiB ones
	// (Reno, 2026-11-27; see Config.Congestion).
	writeChunk = 4 << 20
	// A host that vanishes (power, cable, a frozen VM) sends no reset, and a
	// link waiting for it would wait forever: keep-alive probes, sent only on a
	// link idle for keepIdle and answered by the peer's kernel whatever its
	// program does, find it gone within keepIdle + keepCount*keepInterval.
	keepIdle     = 5 * time.Second
	keepInterval = time.Second
	keepCount    = 5
)

// Connection states. A connection leaves stateOpen once, for one of the others.
const (
	stateOpen       int32 = iota
	stateClosing          // we sent wire.Close
	statePeerClosed       // the peer sent wire.Close
	stateFailed           // broken: I/O error, protocol violation, or its proc lost
)

// errByPeer ends a receive daemon that read the peer's wire.Close.
var errByPeer = errors.New("netd: closed by peer")

// conn is one established, authenticated connection to a peer.
type conn struct {
	d       *Device
	p       *peer
	ch      Channel
	nc      net.Conn
	handler Handler
	dialed  bool // we dialed it (else the peer did)

	wmu     sync.Mutex // guards writes on nc, sent and pending
	sent    uint64     // messages written, for the Seq of our Close
	pending []byte     // the rest of a message tryWrite began: written before anything else
	wbuf    []byte     // tryWrite's message, for writeOnce
	wbufs   [][]byte   // writeRaw's messages, for writevOnce
	iov     []iovec    // writevOnce's vector, reused
	chunk   int        // most bytes writevOnce writes in one call
	wn      int
	werr    error
	writeFn func(fd uintptr) bool // c.writeOnce, made once
	vecFn   func(fd uintptr) bool // c.writevOnce, made once
	vecWait func(fd uintptr) bool // c.writevWait, made once
	state   atomic.Int32
	cause   atomic.Pointer[error] // why it failed, set before stateFailed

	// The receive state, guarded by rd: the receive daemon holds it while it reads
	// and handles messages. At a message boundary of a ring it lets go while it
	// waits, so that a rank that polls the rings (Device.Poll) may handle what
	// comes.
	rd       sync.Mutex
	buf      []byte // buf[r:w] is read and not yet consumed
	r, w     int
	received uint64 // messages received, to check the peer's Close
	adopted  bool   // a connection the peer dialed has been offered as our send connection
	rerr     error  // an I/O error met while reading a payload for the handler
	perr     error  // why a polling rank stopped reading, for the daemon to report
	ended    bool   // the daemon has stopped: nothing more is handled
	hdr      wire.Header
	pl       Payload
	copied   int // payload bytes served from buf (instrumentation for tests)
	direct   int // payload bytes read straight into handlers' buffers

	blocked atomic.Int32 // reads that blocked in the kernel (instrumentation for tests)
	parks   atomic.Int32 // polls that parked while another daemon led (instrumentation for tests)

	// raw gives non-blocking reads (polling, see read) and writes (tryWrite);
	// nil where the platform or the connection has none. A connection through
	// shared memory has shm instead.
	raw     syscall.RawConn
	shm     *shm.Conn
	pollFn  func(fd uintptr) bool // c.pollOnce, made once so that polls do not allocate
	pollBuf []byte
	pollN   int
	pollErr error
	budget  time.Duration // current poll budget, 0..Config.Spin
	nudge   chan struct{} // a ring's daemon waits here while another polls (ringPoll)
	nudged  atomic.Int32  // nudges for data by the leader (instrumentation for tests)
	listed  bool          // c is in ringPoll.parked; guarded by its mu
	handed  atomic.Bool   // the last polling rank made c's daemon the leader: a new budget
}

func (d *Device) newConn(nc net.Conn, p *peer, ch Channel, dialed bool) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Best effort: the kernel caps the buffers at its limits.
		_ = tc.SetNoDelay(true)
		_ = tc.SetReadBuffer(sockBuf)
		_ = tc.SetWriteBuffer(sockBuf)
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: keepIdle, Interval: keepInterval, Count: keepCount})
		d.congest(tc)
	}
	c := &conn{d: d, p: p, ch: ch, nc: nc, handler: d.cfg.P2P, dialed: dialed, adopted: dialed, buf: make([]byte, bufSize)}
	if ch == ChannelColl {
		c.handler = d.cfg.Coll
	}
	if sc, ok := nc.(*shm.Conn); ok {
		sc.Spin = d.cfg.Spin
		c.shm, c.budget, c.nudge = sc, d.cfg.Spin, make(chan struct{}, 1)
	} else if sc, ok := nc.(syscall.Conn); ok && rawIO {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw, c.pollFn, c.writeFn, c.budget = raw, c.pollOnce, c.writeOnce, d.cfg.Spin
			c.vecFn, c.vecWait = c.writevOnce, c.writevWait
			c.chunk = writeChunk
			_ = raw.Control(func(fd uintptr) {
				if mss := rawMSS(fd); mss > 0 && mss < writeChunk {
					c.chunk = writeChunk / mss * mss
				}
			})
		}
	}
	return c
}

// write writes nb (n messages) on c. Caller holds the link's wmu.
func (c *conn) write(nb *net.Buffers, n int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.unusable(); err != nil {
		return err
	}
	if err := c.flushLocked(); err != nil {
		return err
	}
	var err error
	switch {
	case c.shm != nil:
		_, err = c.shm.WriteBuffers(nb)
	case c.raw != nil:
		err = c.writeRaw(nb)
	default:
		_, err = nb.WriteTo(c.nc)
	}
	if err != nil {
		c.fail(err)
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	c.sent += uint64(n)
	return nil
}

// writeRaw writes nb with non-blocking writev calls of at most c.chunk bytes
// each, one after the other without yielding, and polls (then parks) only when
// the socket is full. A writev of a whole large message (4 MiB) stays in the
// kernel for hundreds of µs; the runtime then hands our P to another thread,
// where our receive daemon polls, and at GOMAXPROCS=1 per proc that third busy
// thread on two vCPUs starved the writer and the peer's reader (4 MiB
// ping-pong: 6.5 GB/s, 10 with chunks). The chunk is a whole number of
// segments: a short tail segment per call costs as much as a full one.
func (c *conn) writeRaw(nb *net.Buffers) error {
	var start time.Time
	for len(*nb) > 0 {
		c.wbufs = *nb
		if err := c.raw.Write(c.vecFn); err != nil {
			return err
		}
		if c.werr == errWouldBlock {
			if start.IsZero() {
				start = time.Now()
			}
			if time.Since(start) < c.d.cfg.Spin {
				runtime.Gosched() // our receive daemon, which may be what the peer waits for
				spin.Yield()
				continue
			}
			// Park in the poller until the socket takes more (or a deadline passes).
			if err := c.raw.Write(c.vecWait); err != nil {
				return err
			}
		}
		if c.werr != nil {
			return &net.OpError{Op: "write", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: c.werr}
		}
		start = time.Time{}
		consume(nb, c.wn)
	}
	c.wbufs = nil
	return nil
}

// writevOnce is the function given to RawConn.Write by writeRaw: one
// non-blocking writev of the first c.chunk bytes of c.wbufs, and true so that
// RawConn.Write never waits in the poller.
func (c *conn) writevOnce(fd uintptr) bool {
	c.wn, c.werr = rawWritev(fd, c.wbufs, c.chunk, &c.iov)
	return true
}

// writevWait is writevOnce that waits in the poller while the socket is full.
func (c *conn) writevWait(fd uintptr) bool {
	c.writevOnce(fd)
	return c.werr != errWouldBlock
}

// consume drops the first n bytes of nb, and the empty buffers that follow.
func consume(nb *net.Buffers, n int) {
	for len(*nb) > 0 && n >= len((*nb)[0]) {
		n -= len((*nb)[0])
		*nb = (*nb)[1:]
	}
	if n > 0 {
		(*nb)[0] = (*nb)[0][n:]
	}
}

// tryWrite writes the message b on c without blocking: what the socket does not
// take at once is kept in c.pending, which every later write sends first, and
// partial says so (someone must then call flush soon). Caller holds the link's wmu.
func (c *conn) tryWrite(b []byte) (partial bool, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.unusable(); err != nil {
		return false, err
	}
	n := 0
	if len(c.pending) == 0 {
		var err error
		if n, err = c.writeNow(b); err != nil {
			c.fail(err)
			return false, fmt.Errorf("%w: %w", ErrLost, err)
		}
	}
	c.sent++
	if n == len(b) {
		return false, nil
	}
	c.pending = append(c.pending, b[n:]...)
	return true, nil
}

// writeNow writes what c takes of b at once, without blocking.
func (c *conn) writeNow(b []byte) (int, error) {
	if c.shm != nil {
		return c.shm.TryWrite(b)
	}
	c.wbuf = b
	err := c.raw.Write(c.writeFn)
	c.wbuf = nil
	if err == nil && c.werr != nil && c.werr != errWouldBlock {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: c.werr}
	}
	return c.wn, err
}

// writeOnce is the function given to RawConn.Write: one non-blocking write, and
// true so that RawConn.Write never waits in the poller.
func (c *conn) writeOnce(fd uintptr) bool {
	c.wn, c.werr = rawWrite(fd, c.wbuf)
	return true
}

// flush writes what tryWrite left pending. Caller holds the link's wmu.
func (c *conn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.flushLocked()
}

func (c *conn) flushLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	_, err := c.nc.Write(c.pending)
	c.pending = nil
	if err != nil {
		c.fail(err)
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return nil
}

// unusable says why nothing more may be written on c, or nil.
func (c *conn) unusable() error {
	switch c.state.Load() {
	case stateOpen:
		return nil
	case stateClosing:
		return ErrClosed
	case statePeerClosed:
		return fmt.Errorf("%w: proc %d", ErrPeerClosed, c.p.proc)
	}
	err := *c.cause.Load()
	if !errors.Is(err, ErrLost) {
		err = fmt.Errorf("%w: proc %d: %w", ErrLost, c.p.proc, err)
	}
	return err
}

// fail breaks c because of err: it closes the socket, which ends its receive
// daemon, and the daemon reports the loss (Device.lose).
func (c *conn) fail(err error) {
	c.cause.CompareAndSwap(nil, &err)
	c.state.CompareAndSwap(stateOpen, stateFailed)
	_ = c.nc.Close()
}

// closeOrderly sends wire.Close and half-closes c; its receive daemon reads on
// until the peer hangs up in turn (or closeLinger passes), so that nothing the
// peer sent before it saw our Close is lost to a reset.
func (c *conn) closeOrderly() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.state.CompareAndSwap(stateOpen, stateClosing) {
		return
	}
	_ = c.nc.SetDeadline(time.Now().Add(closeLinger))
	if err := c.flushLocked(); err != nil {
		return
	}
	if _, err := c.nc.Write(closeMessage(c.sent)); err != nil {
		_ = c.nc.Close()
		return
	}
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
}

// receive is the receive daemon of c.
func (c *conn) receive() {
	defer c.d.wg.Done()
	err := c.serve()
	if c.shm != nil {
		c.d.leave(c)
	}
	if err == errByPeer {
		// The peer sends nothing more and reads until we hang up: let a write
		// under way end first.
		c.wmu.Lock()
		c.state.CompareAndSwap(stateOpen, statePeerClosed)
		c.wmu.Unlock()
	}
	_ = c.nc.Close()
	if c.shm != nil {
		c.d.dropRing(c)
	} else {
		c.d.sockets.Add(-1)
	}
	c.p.drop(c)
	if err == errByPeer || c.state.Load() == stateClosing {
		return
	}
	if cause := c.cause.Load(); cause != nil {
		err = *cause
	}
	c.d.lose(c.p, fmt.Errorf("%v connection with %s: %w", c.ch, c.nc.RemoteAddr(), err))
}

// serve reads and dispatches messages until the connection ends: errByPeer
// after the peer's Close, else why it broke.
func (c *conn) serve() error {
	c.rd.Lock()
	defer func() {
		c.ended = true
		c.rd.Unlock()
	}()
	for {
		if c.shm != nil {
			if err := c.awaitRing(); err != nil {
				return err
			}
		}
		if err := c.fill(wire.Size); err != nil {
			return err
		}
		h, err := wire.Parse(c.buf[c.r : c.r+wire.Size])
		if err != nil {
			return err
		}
		c.r += wire.Size
		if !c.ch.allows(h.Kind) {
			return fmt.Errorf("netd: %v message on the %v channel", h.Kind, c.ch)
		}
		if h.Kind == wire.Close {
			if h.Seq != c.received {
				return fmt.Errorf("netd: peer closed after sending %d messages, %d received", h.Seq, c.received)
			}
			return errByPeer
		}
		if err := c.handle(h, false); err != nil {
			return err
		}
	}
}

// handle gives the message whose header h was just taken from buf to the
// handler; inline says that a polling rank calls. Caller holds c.rd.
func (c *conn) handle(h wire.Header, inline bool) error {
	c.received++
	if !c.adopted {
		c.adopted = true
		c.p.adopt(c)
	}
	c.hdr = h
	c.pl = Payload{c: c, n: int(h.Frag), inline: inline}
	err := c.handler.Handle(c.p.proc, &c.hdr, &c.pl)
	if c.rerr != nil {
		return c.rerr
	}
	if err != nil {
		return fmt.Errorf("netd: %v handler refused a %v message: %w", c.ch, h.Kind, err)
	}
	return c.pl.Discard(c.pl.n)
}

// awaitRing returns, c.rd held, once the daemon of ring c is due to read (see
// due), or with the error that stopped a polling rank's reading. It waits
// without c.rd, so that polling ranks may handle what comes.
func (c *conn) awaitRing() error {
	for !c.due() {
		c.rd.Unlock()
		err := c.waitRing(c.dueNow)
		c.rd.Lock()
		if err != nil {
			return err
		}
	}
	return c.perr
}

// due says whether the daemon of ring c should read, at a message boundary:
// what its buffer holds (the rest of a message that a polling rank began), or
// what comes while no rank polls. Caller holds c.rd.
func (c *conn) due() bool {
	return c.perr != nil || c.r < c.w || c.d.inline.Load() == 0 && c.shm.Ready()
}

// dueNow is due for a daemon waiting without c.rd: false while a polling rank
// holds it.
func (c *conn) dueNow() bool {
	if !c.rd.TryLock() {
		return false
	}
	defer c.rd.Unlock()
	return c.due()
}

// pump handles, for a polling rank, the messages that the buffer and ring of c
// hold whole, without waiting, and reports whether it handled any. The rest
// (a message not yet whole or longer than buf, the peer's Close, the end of
// the stream, an error) is left to the daemon, which it nudges: its buffer
// then holds bytes, or perr says why the rank stopped. Caller holds c.rd.
func (c *conn) pump() bool {
	did := false
	for !c.ended && c.perr == nil {
		need := wire.Size
		if c.w-c.r >= wire.Size {
			h, err := wire.Parse(c.buf[c.r : c.r+wire.Size])
			if err != nil || !c.ch.allows(h.Kind) || h.Kind == wire.Close || wire.Size+int(h.Frag) > len(c.buf) {
				break
			}
			if need += int(h.Frag); c.w-c.r >= need {
				c.r += wire.Size
				c.perr = c.handle(h, true)
				did = true
				continue
			}
		}
		c.makeRoom(need)
		n, err := c.shm.TryRead(c.buf[c.w:])
		c.w += n
		if err != nil {
			c.perr = err
		}
		if n == 0 && err == nil && c.r == c.w {
			return did // all handled
		}
		if n == 0 {
			break
		}
	}
	c.nudgeNow()
	return did
}

// fill reads until at least n <= bufSize bytes are buffered.
func (c *conn) fill(n int) error {
	c.makeRoom(n)
	for c.w-c.r < n {
		m, err := c.read(c.buf[c.w:])
		c.w += m
		if err != nil && c.w-c.r < n {
			if err == io.EOF && c.w > c.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// makeRoom moves what buf holds to its start when fewer than n <= bufSize
// bytes would fit from c.r on.
func (c *conn) makeRoom(n int) {
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if len(c.buf)-c.r < n {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
}

// read reads at least one byte into b. Adaptive poll-then-park: while the poll
// budget is positive it first polls the socket with non-blocking reads, or waits
// for the shared-memory ring to be ready (waitRing), yielding between polls to
// the goroutines of its P and to the threads of its processor (spin.Yield), and
// only when the budget runs out does it block in the poller, whose wake-up costs
// up to ~28 µs across vCPUs here. A read that polling answered keeps the budget.
// Otherwise settle adapts it to how long the data took to come.
func (c *conn) read(b []byte) (int, error) {
	if c.shm != nil {
		for {
			if n, err := c.shm.TryRead(b); n > 0 || err != nil {
				return n, err
			}
			if err := c.waitRing(c.shm.Ready); err != nil {
				return 0, err
			}
		}
	}
	if c.raw == nil || c.d.cfg.Spin == 0 {
		return c.nc.Read(b)
	}
	start := time.Now()
	c.pollBuf = b
	polled := (c.budget > 0 || c.d.demanded()) && c.poll(start, c.trySocket)
	c.pollBuf = nil
	if polled {
		return c.pollN, c.pollErr
	}
	c.blocked.Add(1)
	n, err := c.nc.Read(b)
	c.settle(time.Since(start))
	return n, err
}

// waitRing waits until ready says that the daemon of ring c should read, or it
// is nudged, polling as read does a socket, and reads nothing: ranks that poll
// the rings (Device.Poll) may take what comes. The daemon stands aside while
// they do (ringPoll), parked whatever its budget: blocked in the kernel
// instead, it would have the peer ring the doorbell for every message.
func (c *conn) waitRing(ready func() bool) error {
	if c.d.cfg.Spin == 0 {
		return c.shm.Await(c.nudge)
	}
	start := time.Now()
	if (c.budget > 0 || c.d.demanded() || c.standsAside()) && c.poll(start, ready) {
		return nil
	}
	c.d.resign(c) // before it blocks: another daemon may poll on
	c.blocked.Add(1)
	err := c.shm.Await(c.nudge)
	c.settle(time.Since(start))
	return err
}

// settle adapts the poll budget after a read that had to block, given how long
// the data took from the moment the daemon wanted it. Data that came within
// idleAfter budgets of Spin means a busy link whose poll was cut short (by a
// wake-up, or by the OS running another thread): back to the full budget. Data
// that took longer means an idle peer: the budget halves, and at Spin/8 the next
// halving goes to 0. An idle connection so wastes under 2 Spin of polling before
// it parks at once, until a blocking read returns within idleAfter Spin again.
// A tighter rule (back to Spin only within one Spin) collapses the budget of a
// busy link: on a 2-vCPU VM, polls are cut short often enough that each halving
// lengthens the next wait by a kernel wake-up (8-byte latency 50 µs instead of 8).
func (c *conn) settle(waited time.Duration) {
	spin := c.d.cfg.Spin
	switch {
	case waited <= idleAfter*spin:
		c.budget = spin
	case c.budget > spin/8:
		c.budget /= 2
	default:
		c.budget = 0
	}
}

// idleAfter is how many poll budgets a link may wait for data before it counts as
// idle.
const idleAfter = 4

// poll calls try until it says the wait is over (true), or the budget since
// start is spent (false). A ring's daemon polls only while it leads
// (ringPoll), and waits for a nudge otherwise; its budget starts again when
// the last polling rank hands it the lead.
func (c *conn) poll(start time.Time, try func() bool) bool {
	for i := 0; ; i++ {
		if try() {
			return true
		}
		if c.handed.Load() && c.handed.Swap(false) {
			start = time.Now()
		}
		if spent := time.Since(start); spent >= c.budget && (spent >= demandPoll || !c.d.demanded()) && !c.standsAside() {
			return false
		}
		if c.shm != nil {
			if !c.d.leadOrPark(c) {
				c.parks.Add(1)
				c.parked() // the leader, or a polling rank, watches our ring for us
				continue
			}
			c.d.scan()
		}
		c.d.wakeRings()
		runtime.Gosched() // goroutines of our P, such as those our handler woke
		if i%2 == 1 {
			// Threads of our processor, every other poll: a sched_yield is a
			// syscall as long as the read, and halving them shortens the time
			// between polls (8-byte TCP latency 5.72 µs against 6.04, 15
			// interleaved rounds; barrier of 1x4 and 4x4 unchanged).
			spin.Yield()
		}
	}
}

// standsAside says whether c is a ring whose daemon leaves what comes to the
// ranks that poll the rings: it waits for them to stop, whatever its budget.
func (c *conn) standsAside() bool { return c.shm != nil && c.d.inline.Load() > 0 }

// trySocket is one non-blocking read of the socket into pollBuf, for poll:
// true when it read bytes, met the end of the stream or failed, as pollN and
// pollErr then say.
func (c *conn) trySocket() bool {
	if err := c.raw.Read(c.pollFn); err != nil {
		c.pollN, c.pollErr = 0, err // closed, or past a deadline
		return true
	}
	switch {
	case c.pollN > 0:
		c.pollErr = nil
	case c.pollErr == nil:
		c.pollErr = io.EOF
	case c.pollErr == errWouldBlock:
		return false
	default:
		c.pollErr = &net.OpError{Op: "read", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: c.pollErr}
	}
	return true
}

// polls says whether c has non-blocking reads and writes, for polling and
// inline posts.
func (c *conn) polls() bool { return c.raw != nil || c.shm != nil }

// pollOnce is the function given to RawConn.Read: one non-blocking read, and
// true so that RawConn.Read never waits in the poller.
func (c *conn) pollOnce(fd uintptr) bool {
	c.pollN, c.pollErr = rawRead(fd, c.pollBuf)
	return true
}

// Payload reads the payload of the message being handled. It serves first the
// bytes the receive daemon's buffered read already took in, then reads the rest
// straight from the socket into the caller's buffer: of a large payload only
// what came with its header (under 64 KiB) and a last piece under 8 KiB are
// copied through the buffer.
type Payload struct {
	c      *conn
	n      int  // bytes not yet read
	inline bool // a polling rank handles the message (Device.Poll)
}

// Inline says whether the message is handled by a rank that polls (Device.Poll)
// rather than by a receive daemon: a handler that completes a wait need not
// then yield the processor to the waiting rank, which may be the caller.
func (p *Payload) Inline() bool { return p.inline }

// Len returns the number of payload bytes not yet read.
func (p *Payload) Len() int { return p.n }

// ReadInto reads exactly len(dst) <= Len() bytes into dst.
func (p *Payload) ReadInto(dst []byte) error {
	if len(dst) > p.n {
		return fmt.Errorf("netd: ReadInto %d bytes, %d left in the payload", len(dst), p.n)
	}
	if len(dst) == 0 {
		return nil
	}
	c := p.c
	if c.rerr != nil {
		return c.rerr
	}
	k := copy(dst, c.buf[c.r:c.w])
	c.r += k
	c.copied += k
	for k < len(dst) {
		rest := dst[k:]
		if len(rest) < directMin {
			if err := c.fill(len(rest)); err != nil {
				return p.broke(k, err)
			}
			m := copy(rest, c.buf[c.r:c.w])
			c.r += m
			c.copied += m
			k += m
			continue
		}
		m, err := c.read(rest)
		k += m
		c.direct += m
		if err != nil && k < len(dst) {
			return p.broke(k, err)
		}
	}
	p.n -= k
	return nil
}

// Discard skips the next n <= Len() payload bytes.
func (p *Payload) Discard(n int) error {
	if n < 0 || n > p.n {
		return fmt.Errorf("netd: Discard %d bytes, %d left in the payload", n, p.n)
	}
	if n == 0 {
		return nil
	}
	c := p.c
	if c.rerr != nil {
		return c.rerr
	}
	for n > 0 {
		if c.r == c.w {
			if err := c.fill(1); err != nil {
				return p.broke(0, err)
			}
		}
		k := min(n, c.w-c.r)
		c.r += k
		n -= k
		p.n -= k
	}
	return nil
}

// broke records an I/O error met after reading k more bytes: the connection is
// done for, and its daemon reports it once the handler returns.
func (p *Payload) broke(k int, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // a payload is cut short
	}
	p.n -= k
	p.c.rerr = err
	return err
}
