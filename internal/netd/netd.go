// Package netd is the network device (TMPI's NETD): it moves framed messages, a
// wire.Header and an optional payload, between the procs of one job over TCP. It
// knows nothing of matching or of MPI: the point-to-point engine and the collective
// layer implement their protocols on top, each as the Handler of one channel.
//
// Connections are made lazily, on the first message to a proc on a channel, so a
// job of a thousand procs opens only the links its ranks use. Every connection
// starts with auth.Handshake and has a receive daemon (a goroutine that reads
// headers and hands each message to the channel's Handler); the first Post on a
// connection starts its send daemon (a goroutine that writes what handlers queue,
// because a receive daemon must never wait for a write).
//
// For each peer and channel a proc sends on one connection only, chosen once: the
// first established in either direction, a connection the peer dialed counting as
// established when its first message arrives (see peer.adopt). Messages to one
// (proc, channel) therefore arrive in the order their sends were serialized, even
// when both procs dial each other at the same moment and two connections exist,
// each then used for sending in one direction. docs/protocol.md describes the bytes.
package netd

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/netd/auth"
	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/transport/shm"
)

// Channel is what a connection carries; its value is the channel byte of the
// handshake's hello.
type Channel uint8

// The channels: two connections per pair of procs (TMPI §3.3).
const (
	ChannelP2P  Channel = auth.ChannelP2P  // point-to-point messages: every kind but Coll
	ChannelColl Channel = auth.ChannelColl // collective messages: only Coll
)

func (ch Channel) String() string {
	switch ch {
	case ChannelP2P:
		return "p2p"
	case ChannelColl:
		return "coll"
	}
	return fmt.Sprintf("Channel(%d)", uint8(ch))
}

// allows reports whether a message of kind k may travel on ch (Close, the device's
// own, on both).
func (ch Channel) allows(k wire.Kind) bool {
	if ch == ChannelColl {
		return k == wire.Coll || k == wire.Close
	}
	return k != wire.Coll
}

// Handler receives the messages of one channel.
type Handler interface {
	// Handle is called by a connection's receive daemon, or by a rank that polls
	// the rings (Device.Poll, Payload.Inline), one message at a time per
	// connection, in the order the peer sent them. It must read the payload
	// (h.Frag bytes) through p, or leave it: whatever it did not read is discarded
	// after it returns. h and p are valid only until Handle returns. It must not
	// block on sending (use Device.Post), nor call Device.Close, which waits for
	// the daemons. A non-nil error is a protocol violation: the link is closed
	// and Lost is called.
	Handle(proc int, h *wire.Header, p *Payload) error
	// Lost says that the connection(s) to proc broke without an orderly Close
	// (EOF or an I/O error, a malformed header, a Handle error). Each Handler of
	// the Device is told once per proc, from a receive daemon, after the last
	// Handle of the connection that broke; every connection to proc is then
	// closed and later sends to it fail with ErrLost. It is never called for a
	// proc that could not be reached (Send says so) nor while Close runs.
	Lost(proc int, err error)
}

// Config configures a Device.
type Config struct {
	Self, Procs int    // our proc index, and how many procs the job has
	Job         string // the job id and key, for auth.Handshake
	Key         []byte
	// Listener is ours, already listening; the Device accepts on it and closes it
	// in Close. Nil: the Device only dials.
	Listener net.Listener
	// Addrs says where proc listens: "host:port" candidates in order of preference.
	// It is called on the first connection to proc, and again after an error.
	Addrs func(proc int) ([]string, error)
	// P2P and Coll receive the messages of the two channels (both required).
	P2P, Coll Handler
	// Spin is how long a receive daemon polls its socket (or ring) without blocking before
	// it parks in the poller, adapted per connection (see conn.settle); 0: never
	// poll. Polling saves the kernel wake-up of a parked reader (up to ~28 µs
	// across vCPUs here) when the next message comes within a round trip, but a
	// polling daemon keeps a processor busy: it pays when each proc has a core
	// for it (Weft gives each proc of a host its share of the CPUs). Linux only.
	Spin time.Duration
	// Shm is the size of the shared-memory rings (a power of two, see
	// shm.MinRing and shm.MaxRing) that a connection to a proc of this host
	// moves its bytes through, its Unix domain socket left as doorbell and
	// liveness check; 0: the socket carries the bytes. Linux only.
	Shm int
	// Delay, when above 0, holds every message sent for that long before it goes
	// to its connection: an emulated one-way wire delay, in order per link, that
	// never blocks a receive daemon (see delay.go). A delayed Send returns once
	// its payload is copied; its dial or write error then reaches Handler.Lost.
	Delay time.Duration
	// Congestion is the congestion control of the connections over TCP: "" keeps
	// the system's; CongestionAuto keeps it unless it paces its sends (BBR),
	// then takes cubic, or reno where cubic is not allowed; any other name is
	// asked for as is. A job's bursts between hosts of a cluster are what a
	// pacer spreads out: 1 MiB ping-pong over loopback took 168-187 µs one way
	// under BBR against 115-117 under Reno (2026-11-27). Linux only; a link
	// whose kernel refuses the name keeps the system's, and the Device logs it
	// once.
	Congestion string
	// DialTimeout bounds the TCP connect to one candidate address (default 2 s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds each handshake (default auth.DefaultTimeout).
	HandshakeTimeout time.Duration
	// Log reports refused strangers and broken links; nil: log.Printf.
	Log func(format string, args ...any)
}

const (
	// maxProcs bounds Config.Procs: the table of peers costs 8 bytes per proc
	// (auth would allow 2^31, a 16 GiB table).
	maxProcs           = 1 << 24
	defaultDialTimeout = 2 * time.Second
	// maxStrangers caps the accepted connections still in their handshake: a
	// flood of strangers costs at most this many goroutines and sockets.
	maxStrangers = 64
	// closeLinger bounds how long Close waits for peers to take its Close
	// messages and hang up, and for writes still under way.
	closeLinger = 5 * time.Second
	// acceptBackoff is the pause after a failed Accept (out of file descriptors,
	// say), so that the accept loop does not spin.
	acceptBackoff = 50 * time.Millisecond
)

// Errors that Send and Post (through done) wrap; test them with errors.Is.
var (
	ErrClosed      = errors.New("netd: device closed")
	ErrPeerClosed  = errors.New("netd: peer closed the connection")
	ErrLost        = errors.New("netd: link lost")
	ErrUnreachable = errors.New("netd: proc unreachable")
)

// Device is one proc's network device.
type Device struct {
	cfg   Config
	logf  func(format string, args ...any)
	peers []atomic.Pointer[peer] // made on first use: most procs of a big job never talk

	ctx     context.Context // cancelled by Close: aborts TCP connects and accepted handshakes
	cancel  context.CancelFunc
	closing atomic.Bool
	started atomic.Bool   // set by the first Start, which runs the accept loop
	quit    chan struct{} // closed by Close: send daemons flush and exit

	strangers chan struct{}  // one token per accepted connection in its handshake
	wg        sync.WaitGroup // accept loop, handshakes, receive daemons
	sendWG    sync.WaitGroup // send daemons
	lines     sync.Map       // *link -> *delayLine, with Config.Delay only
	delayWG   sync.WaitGroup // delay lines' goroutines
	delayShut atomic.Bool    // Close began: delay lines take nothing more
	closeOnce sync.Once

	congestOnce sync.Once // the log line of a refused Config.Congestion

	demand   Demand
	sockets  atomic.Int32            // open connections that are not rings: see demanded
	ringsMu  sync.Mutex              // serialises changes to rings
	ringPoll                         // which daemon polls the rings
	rings    atomic.Pointer[[]*conn] // every open shared-memory connection, for wakeRings and Poll
}

// peer is what a Device knows of another proc.
type peer struct {
	proc int

	mu    sync.Mutex // guards the fields below and the stores of links[i].c; never held across I/O
	addrs []string   // from Config.Addrs, once it answered
	conns []*conn    // every established connection to proc, both channels, both directions
	lost  error      // non-nil once the link to proc failed; wraps ErrLost
	links [2]link    // our sending side, per channel
}

// New makes a Device: it connects to other procs when first asked to send to
// them, and accepts on cfg.Listener once started (Start).
func New(cfg Config) (*Device, error) {
	switch {
	case cfg.Procs < 1 || cfg.Procs > maxProcs:
		return nil, fmt.Errorf("netd: %d procs, want 1..%d", cfg.Procs, maxProcs)
	case cfg.Self < 0 || cfg.Self >= cfg.Procs:
		return nil, fmt.Errorf("netd: proc %d not in 0..%d", cfg.Self, cfg.Procs-1)
	case len(cfg.Key) < auth.MinKey:
		return nil, fmt.Errorf("netd: job key of %d bytes, want at least %d", len(cfg.Key), auth.MinKey)
	case len(cfg.Job) == 0 || len(cfg.Job) > auth.MaxJob:
		return nil, fmt.Errorf("netd: job id of %d bytes, want 1..%d", len(cfg.Job), auth.MaxJob)
	case cfg.P2P == nil || cfg.Coll == nil:
		return nil, errors.New("netd: Config needs both a P2P and a Coll handler")
	case cfg.Addrs == nil && cfg.Procs > 1:
		return nil, errors.New("netd: Config needs Addrs to reach other procs")
	case cfg.Spin < 0 || cfg.Delay < 0 || cfg.DialTimeout < 0 || cfg.HandshakeTimeout < 0:
		return nil, errors.New("netd: negative duration in Config")
	case cfg.Shm != 0 && !shm.ValidRing(cfg.Shm):
		return nil, fmt.Errorf("netd: shared-memory rings of %d bytes, want 0 or a power of two in [%d, %d]", cfg.Shm, shm.MinRing, shm.MaxRing)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	d := &Device{
		cfg:       cfg,
		logf:      cfg.Log,
		peers:     make([]atomic.Pointer[peer], cfg.Procs),
		quit:      make(chan struct{}),
		strangers: make(chan struct{}, maxStrangers),
	}
	if d.logf == nil {
		d.logf = log.Printf
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Start accepts connections on Config.Listener, which New does not, so that the
// caller may first give its handlers the Device they answer through: a handler
// may Post from Handle (an RTS's acknowledgement), and a proc dialled by a faster
// one handed it messages before it knew the Device. Later calls, and calls after
// Close, do nothing. Connections that the Device dials need no Start.
func (d *Device) Start() {
	if d.cfg.Listener == nil || d.closing.Load() || !d.started.CompareAndSwap(false, true) {
		return
	}
	d.wg.Add(1)
	go d.acceptLoop()
}

// peer returns the state of proc, making it on first use.
func (d *Device) peer(proc int) *peer {
	if p := d.peers[proc].Load(); p != nil {
		return p
	}
	p := &peer{proc: proc}
	for i := range p.links {
		p.links[i] = link{d: d, p: p, ch: Channel(i), wake: make(chan struct{}, 1)}
	}
	if d.peers[proc].CompareAndSwap(nil, p) {
		return p
	}
	return d.peers[proc].Load()
}

// link checks the arguments of a Send or Post, sets h.Frag, and returns the link
// to send on.
func (d *Device) link(proc int, ch Channel, h *wire.Header, payload []byte) (*link, error) {
	switch {
	case d.closing.Load():
		return nil, ErrClosed
	case proc < 0 || proc >= d.cfg.Procs:
		return nil, fmt.Errorf("netd: send to proc %d: not in 0..%d", proc, d.cfg.Procs-1)
	case proc == d.cfg.Self:
		return nil, fmt.Errorf("netd: send to proc %d: that is this proc", proc)
	case ch != ChannelP2P && ch != ChannelColl:
		return nil, fmt.Errorf("netd: send to proc %d: unknown channel %d", proc, uint8(ch))
	case h == nil:
		return nil, fmt.Errorf("netd: send to proc %d: nil header", proc)
	case len(payload) > wire.MaxFrag:
		return nil, fmt.Errorf("netd: send to proc %d: payload of %d bytes exceeds wire.MaxFrag", proc, len(payload))
	case h.Kind == wire.Close || !ch.allows(h.Kind):
		// Close is the device's own; a kind the channel refuses would make the
		// peer drop the link, so it is this proc's bug and stays here.
		return nil, fmt.Errorf("netd: send to proc %d: %v message on the %v channel", proc, h.Kind, ch)
	}
	h.Frag = uint32(len(payload))
	if err := h.Check(); err != nil {
		return nil, fmt.Errorf("netd: send to proc %d: %w", proc, err)
	}
	return &d.peer(proc).links[ch], nil
}

// Send writes h, with h.Frag set to len(payload), and payload to proc on channel
// ch in one gather-write, connecting first if needed. Concurrent Sends (and Posts)
// to one proc and channel are serialized; they arrive in that order. The payload
// may be reused once Send returns. A write error is returned wrapped with the proc
// and channel, and the link counts as failed (Handler.Lost).
func (d *Device) Send(proc int, ch Channel, h *wire.Header, payload []byte) error {
	l, err := d.link(proc, ch, h, payload)
	if err != nil {
		return err
	}
	if d.cfg.Delay > 0 {
		return d.delaySend(l, h, payload)
	}
	return l.send(h, payload)
}

// Queue sends h and payload to proc on channel ch, after everything sent,
// posted or queued before, without waiting for another sender's write: when one
// is under way on that link, the message joins the link's queue, which the
// writer sends next, and Queue returns; so messages that several ranks send at
// once go out in batches, one syscall for many. Else, with now, Queue writes it
// (and what is queued) itself; without, it leaves the write to the link's send
// daemon, which runs when the caller's processor is free: a sender streaming
// small messages so has them go out together.
//
// ordered is called once the message has its place in the link's order and h has
// been copied, before any write: the caller numbers its messages under a lock and
// releases it there, so that no sender waits for another's syscall (and may keep
// h under that lock). payload must stay unchanged
// until it is written or the link fails: Queue is for data the caller keeps
// anyway (an eager copy held until the peer acknowledges it). A write error
// loses the link, as with Send, and is returned to the writer.
func (d *Device) Queue(proc int, ch Channel, h *wire.Header, payload []byte, now bool, ordered func()) error {
	l, err := d.link(proc, ch, h, payload)
	if err != nil {
		ordered()
		return err
	}
	if d.cfg.Delay > 0 {
		err := d.delaySend(l, h, payload)
		ordered()
		return err
	}
	return l.queueMsg(h, payload, now, ordered)
}

// Flush writes what Queue left to the send daemons of proc's links, if no other
// sender is writing on them (that one writes it); for a rank about to wait,
// since what it waits for may answer those messages.
func (d *Device) Flush(proc int, ch Channel) error {
	if l := d.linkTo(proc, ch); l != nil && d.cfg.Delay <= 0 {
		return l.flush()
	}
	return nil
}

// Rings reports whether messages to proc on ch now go through a shared-memory
// ring, where a write costs no system call.
func (d *Device) Rings(proc int, ch Channel) bool {
	if l := d.linkTo(proc, ch); l != nil {
		c := l.c.Load()
		return c != nil && c.shm != nil
	}
	return false
}

// linkTo returns the link to another proc on channel ch, or nil if there is none.
func (d *Device) linkTo(proc int, ch Channel) *link {
	if proc < 0 || proc >= d.cfg.Procs || proc == d.cfg.Self || (ch != ChannelP2P && ch != ChannelColl) {
		return nil
	}
	return &d.peer(proc).links[ch]
}

// Post sends what Send would, without ever waiting: it is for handlers, which
// must not block. A small message (payload up to 4 KiB) on a connected link with
// nothing queued is written at once with a non-blocking write, whatever the
// socket does not take being copied and finished by the send daemon; anything
// else is queued for the send daemon, which dials if needed. Posts and Sends to
// one proc and channel are written in the order they were made. h is copied at
// once; payload must stay unchanged until done is called. done (may be nil) is
// called once: with nil when the payload is no longer needed (written, or copied
// for writing), else with the error. It runs on the send daemon, or on a
// goroutine of its own when the message is refused up front (bad arguments, the
// Device closed): never in Post itself, so done may take locks Post's caller holds.
func (d *Device) Post(proc int, ch Channel, h *wire.Header, payload []byte, done func(error)) {
	l, err := d.link(proc, ch, h, payload)
	switch {
	case err == nil && d.cfg.Delay > 0:
		d.delayPost(l, h, payload, done)
	case err == nil:
		err = l.post(h, payload, done)
	}
	if err != nil && done != nil {
		go done(err)
	}
}

// Close shuts the Device down in an orderly way: it hands what waits on delay
// lines (Config.Delay) to the links and waits for delayed Sends to be written,
// then stops accepting, aborts TCP
// connects and the handshakes of accepted connections, lets the send daemons
// write what was posted, sends wire.Close on every connection, and waits for the
// peers to hang up and for every goroutine of the Device to end. Writes to and
// reads from a peer that does not cooperate are cut after closeLinger (5 s) in
// each phase. Peers see an orderly close, not a failure. Handlers and done
// callbacks are not called once Close has returned; they must not call it.
// Later calls wait for the first and return nil.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.drainDelays()
		d.closing.Store(true)
		d.cancel()
		if d.cfg.Listener != nil {
			_ = d.cfg.Listener.Close()
		}
		deadline := time.Now().Add(closeLinger)
		var conns []*conn
		for i := range d.peers {
			p := d.peers[i].Load()
			if p == nil {
				continue
			}
			for j := range p.links {
				p.links[j].shut()
			}
			p.mu.Lock()
			conns = append(conns, p.conns...)
			p.mu.Unlock()
		}
		// Writes to a peer that stopped reading must not hold Close forever.
		for _, c := range conns {
			_ = c.nc.SetDeadline(deadline)
		}
		close(d.quit)
		d.sendWG.Wait()
		for _, c := range conns {
			c.closeOrderly()
		}
		d.wg.Wait()
	})
	return nil
}

// acceptLoop accepts connections until the listener closes; each one's handshake
// runs in a goroutine of its own, so a stranger that never speaks blocks nobody.
func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		nc, err := d.cfg.Listener.Accept()
		if err != nil {
			if d.closing.Load() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				d.logf("netd: proc %d: listener closed, no longer accepting connections", d.cfg.Self)
				return
			}
			d.logf("netd: proc %d: accept: %v", d.cfg.Self, err)
			t := time.NewTimer(acceptBackoff)
			select {
			case <-d.quit:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case d.strangers <- struct{}{}:
		default:
			d.logf("netd: proc %d: refused connection from %s: %d handshakes already under way", d.cfg.Self, nc.RemoteAddr(), maxStrangers)
			_ = nc.Close()
			continue
		}
		d.wg.Add(1)
		go d.welcome(nc)
	}
}

// welcome runs the responder's handshake on an accepted connection and, if the
// peer proves the job key, starts its receive daemon.
func (d *Device) welcome(nc net.Conn) {
	defer d.wg.Done()
	// Close aborts the handshake of a stranger that never speaks.
	ab := &abortable{Conn: nc}
	stop := context.AfterFunc(d.ctx, ab.abort)
	hello, err := auth.Handshake(ab, d.authConfig(auth.Config{}))
	if uc, ok := nc.(*net.UnixConn); ok && err == nil {
		_ = ab.SetDeadline(time.Now().Add(d.handshakeTimeout()))
		nc, err = shm.Answer(uc, d.cfg.Shm > 0)
		_ = ab.SetDeadline(time.Time{})
	}
	ab.finish()
	stop()
	<-d.strangers
	if err != nil {
		if !d.closing.Load() {
			d.logf("netd: proc %d: refused connection from %s: %v", d.cfg.Self, nc.RemoteAddr(), err)
		}
		_ = nc.Close()
		return
	}
	proc, ch := int(hello.Proc), Channel(hello.Channel)
	if proc >= d.cfg.Procs {
		d.logf("netd: proc %d: refused connection from %s: proc %d is not in this job of %d procs", d.cfg.Self, nc.RemoteAddr(), proc, d.cfg.Procs)
		_ = nc.Close()
		return
	}
	p := d.peer(proc)
	if err := p.register(d.newConn(nc, p, ch, false)); err != nil {
		d.logf("netd: proc %d: refused connection from proc %d at %s: %v", d.cfg.Self, proc, nc.RemoteAddr(), err)
		_ = nc.Close()
	}
}

// handshakeTimeout bounds a handshake, and the shared-memory upgrade after it.
func (d *Device) handshakeTimeout() time.Duration {
	if t := d.cfg.HandshakeTimeout; t > 0 {
		return t
	}
	return auth.DefaultTimeout
}

// authConfig fills in our side of a handshake.
func (d *Device) authConfig(cfg auth.Config) auth.Config {
	cfg.Key, cfg.Job, cfg.Proc, cfg.Timeout = d.cfg.Key, d.cfg.Job, uint32(d.cfg.Self), d.cfg.HandshakeTimeout
	return cfg
}

// abortable lets Close abort a handshake under way without closing the
// connection: once aborted, every deadline is in the past, including the one
// Handshake sets when it starts. A handshake that completed all the same goes on
// to an orderly close (see register).
type abortable struct {
	net.Conn
	mu       sync.Mutex
	aborted  bool
	finished bool // the handshake returned: abort no longer touches the connection
}

var past = time.Unix(1, 0)

func (a *abortable) SetDeadline(t time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		t = past
	}
	return a.Conn.SetDeadline(t)
}

func (a *abortable) abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.finished {
		a.aborted = true
		_ = a.Conn.SetDeadline(past)
	}
}

// finish ends the handshake's hold on the connection: no deadline remains.
func (a *abortable) finish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finished = true
	if a.aborted {
		_ = a.Conn.SetDeadline(time.Time{})
	}
}

// register adds the established connection c to p and starts its receive daemon,
// unless p was lost (a failed proc stays failed). When the Device is closing, a
// connection we dialed is refused (the dialer says goodbye, see leave), and one
// we accepted is closed in an orderly way like the others: the peer, which has
// finished its handshake, may have sent messages already.
func (p *peer) register(c *conn) error {
	d := c.d
	p.mu.Lock()
	closing := d.closing.Load()
	switch {
	case p.lost != nil:
		p.mu.Unlock()
		return p.lost
	case closing && c.dialed:
		p.mu.Unlock()
		return ErrClosed
	}
	p.conns = append(p.conns, c)
	// While closing, the caller (welcome) is itself counted in wg, so Add is
	// safe even while Close waits.
	d.wg.Add(1)
	if c.shm != nil {
		d.addRing(c) // until its receive daemon ends
	} else {
		d.sockets.Add(1)
	}
	go c.receive()
	p.mu.Unlock()
	if closing {
		c.closeOrderly()
	}
	return nil
}

// adopt makes c, a connection the peer dialed, the one we send on for its channel
// if we have none yet. It is called on the first message c brings, not when c is
// accepted: a proc that dialed us by mistake (it meant another proc and reached us
// through a loopback address) closes c without sending anything on it.
func (p *peer) adopt(c *conn) {
	p.mu.Lock()
	if l := &p.links[c.ch]; l.c.Load() == nil && p.lost == nil {
		l.c.Store(c)
	}
	p.mu.Unlock()
}

// Demand returns the count of our ranks that wait for another proc, which
// the engine keeps (see Demand).
func (d *Device) Demand() *Demand { return &d.demand }

// addRing and dropRing keep d.rings, a list that polling daemons read without
// a lock, copied on every change: connections come and go rarely.
func (d *Device) addRing(c *conn) {
	d.ringsMu.Lock()
	defer d.ringsMu.Unlock()
	var rings []*conn
	if old := d.rings.Load(); old != nil {
		rings = slices.Clone(*old)
	}
	rings = append(rings, c)
	d.rings.Store(&rings)
}

func (d *Device) dropRing(c *conn) {
	d.ringsMu.Lock()
	defer d.ringsMu.Unlock()
	if old := d.rings.Load(); old != nil {
		rings := slices.DeleteFunc(slices.Clone(*old), func(x *conn) bool { return x == c })
		d.rings.Store(&rings)
	}
}

// wakeRings wakes the readers and writers of our shared-memory connections
// that sleep although their ring is ready (shm.Conn.Wake): a daemon that polls
// keeps the scheduler from the network poller, where their doorbells wait.
// Without it, a 1x4 Barrier at a 1 ms poll budget took two budgets (about
// 2,000 µs) instead of 70-100 µs: the message of one link waited for the
// daemon of another to give up polling.
func (d *Device) wakeRings() {
	if rings := d.rings.Load(); rings != nil {
		for _, c := range *rings {
			c.shm.Wake()
		}
	}
}

// drop removes the ended connection c from p.
func (p *peer) drop(c *conn) {
	p.mu.Lock()
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
}

// lose records that the link to p failed because of err: every connection to p is
// closed, later sends fail with ErrLost, and both Handlers are told, once.
func (d *Device) lose(p *peer, err error) {
	p.mu.Lock()
	if p.lost != nil || d.closing.Load() {
		p.mu.Unlock()
		return
	}
	p.lost = fmt.Errorf("%w: proc %d: %w", ErrLost, p.proc, err)
	conns := slices.Clone(p.conns)
	p.mu.Unlock()
	d.logf("netd: proc %d: lost proc %d: %v", d.cfg.Self, p.proc, err)
	for _, c := range conns {
		c.fail(p.lost)
	}
	d.cfg.P2P.Lost(p.proc, err)
	d.cfg.Coll.Lost(p.proc, err)
}

// Listen listens on every interface on a port the system picks and, with local,
// on a Unix domain socket (see local.go), and returns the addresses to publish for
// Config.Addrs, the cheapest path for a proc of the same host first: the Unix
// socket, loopback, then every unicast address of every interface that is up. A
// proc that reaches another proc through an address of its own host notices in the
// handshake and tries the next address.
func Listen(local bool) (net.Listener, []string, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, nil, fmt.Errorf("netd: listen: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	addrs := []string{net.JoinHostPort("127.0.0.1", port)}
	ifaces, err := net.Interfaces()
	if err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("netd: listing interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue // an interface that vanished meanwhile
		}
		for _, a := range as {
			// Link-local addresses need a zone and reach only the link: not published.
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				if s := net.JoinHostPort(ipn.IP.String(), port); !slices.Contains(addrs, s) {
					addrs = append(addrs, s)
				}
			}
		}
	}
	if local {
		if ux := listenUnix(); ux != nil {
			return newListeners(ln, ux), append([]string{unixScheme + ux.Addr().String()}, addrs...), nil
		}
	}
	return ln, addrs, nil
}
