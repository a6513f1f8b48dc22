package netd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/netd/auth"
	"github.com/weft-mpi/weft/internal/netd/wire"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

const (
	testJob = "netd-test"
	big     = 8 << 20
	// waitLimit bounds every wait for a condition; conditions normally hold
	// within milliseconds.
	waitLimit = 20 * time.Second
)

// pattern is the source of every test payload: a message's bytes are a window of
// it chosen by the message's identity, so the receiver can check them.
var pattern = func() []byte {
	b := make([]byte, big+256)
	_, _ = rand.Read(b)
	return b
}()

func payloadOf(src, tag int, seq uint64, size int) []byte {
	off := (int(seq)*31 + tag*7 + src) % 256
	return pattern[off : off+size]
}

// message builds the header of test message seq of size bytes on ch from src;
// Tag says which sending goroutine.
func message(ch Channel, src, tag int, seq uint64, size int) *wire.Header {
	h := &wire.Header{Kind: wire.Eager, Source: int32(src), Tag: int32(tag), Seq: seq, SendReq: seq + 1, Len: uint64(size), Frag: uint32(size)}
	if ch == ChannelColl {
		h.Kind, h.SendReq = wire.Coll, 0
	}
	return h
}

// noLeaks fails the test if goroutines started during it outlive it. Call it
// first, so that its cleanup runs after the job's.
func noLeaks(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitLimit)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// waitFor waits until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for pause := time.Microsecond; !cond(); pause = min(2*pause, time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pause)
	}
}

// rec is a message as a test handler saw it.
type rec struct {
	proc    int
	h       wire.Header
	ok      bool // payload matched payloadOf
	copied  int  // payload bytes the Payload served from its buffer
	direct  int  // payload bytes read straight into the handler's buffer
	blocked int  // reads of its connection so far that blocked in the kernel
	parks   int  // and that parked while another daemon polled its ring
	nudged  int  // times the polling daemon found data in its ring for it
	inline  bool // handled by a polling rank (Device.Poll), not a daemon
	partial bool
}

// handler is a Handler that checks and records messages; fn, if set, replaces
// the default handling (read the whole payload and compare it).
type handler struct {
	mu   sync.Mutex
	got  []rec
	lost map[int]error
	fn   func(proc int, h *wire.Header, p *Payload) error
}

func (hd *handler) Handle(proc int, h *wire.Header, p *Payload) error {
	if hd.fn != nil {
		return hd.fn(proc, h, p)
	}
	r := readAll(proc, h, p)
	hd.mu.Lock()
	hd.got = append(hd.got, r)
	hd.mu.Unlock()
	return nil
}

// readAll reads p into a buffer of the handler's own and checks it.
func readAll(proc int, h *wire.Header, p *Payload) rec {
	buf := make([]byte, p.Len())
	c0, d0 := p.c.copied, p.c.direct
	err := p.ReadInto(buf)
	return rec{
		proc: proc, h: *h,
		ok:     err == nil && int(h.Source) == proc && bytes.Equal(buf, payloadOf(proc, int(h.Tag), h.Seq, int(h.Frag))),
		copied: p.c.copied - c0, direct: p.c.direct - d0, blocked: int(p.c.blocked.Load()),
		parks: int(p.c.parks.Load()), nudged: int(p.c.nudged.Load()), inline: p.Inline(),
	}
}

func (hd *handler) Lost(proc int, err error) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.lost == nil {
		hd.lost = map[int]error{}
	}
	if _, dup := hd.lost[proc]; dup {
		panic(fmt.Sprintf("Lost(%d) twice", proc))
	}
	hd.lost[proc] = err
}

func (hd *handler) count() int {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return len(hd.got)
}

func (hd *handler) records() []rec {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return append([]rec(nil), hd.got...)
}

func (hd *handler) lostErr(proc int) (error, bool) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	err, ok := hd.lost[proc]
	return err, ok
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// logs collects a Device's log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) printf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logs) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// tproc is one proc of a test job.
type tproc struct {
	dev       *Device
	ln        *countingListener
	addr      string
	p2p, coll *handler
	log       *logs
	hold      bool // startJob leaves the Device unstarted (Start)
}

func (p *tproc) handler(ch Channel) *handler {
	if ch == ChannelColl {
		return p.coll
	}
	return p.p2p
}

// startJob starts n Devices on loopback listeners; tweak, if not nil, may change
// each one's Config and handlers first. The Devices are closed at the end of the test.
func startJob(t testing.TB, n int, tweak func(i int, cfg *Config, p *tproc)) []*tproc {
	t.Helper()
	ps := make([]*tproc, n)
	for i := range ps {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = &tproc{ln: &countingListener{Listener: ln}, addr: ln.Addr().String(), p2p: &handler{}, coll: &handler{}, log: &logs{}}
	}
	for i, p := range ps {
		cfg := Config{
			Self: i, Procs: n, Job: testJob, Key: testKey, Listener: p.ln,
			Addrs:            func(proc int) ([]string, error) { return []string{ps[proc].addr}, nil },
			P2P:              p.p2p,
			Coll:             p.coll,
			Log:              p.log.printf,
			HandshakeTimeout: 5 * time.Second,
		}
		if tweak != nil {
			tweak(i, &cfg, p)
		}
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.dev = d
		if !p.hold {
			d.Start()
		}
		t.Cleanup(func() { _ = d.Close() })
	}
	return ps
}

// connsTo returns d's established connections to proc.
func (d *Device) connsTo(proc int) []*conn {
	p := d.peers[proc].Load()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*conn(nil), p.conns...)
}

// kill breaks every connection of d without a Close message, as a crash would.
func (d *Device) kill() {
	for i := range d.peers {
		for _, c := range d.connsTo(i) {
			_ = c.nc.Close()
		}
	}
}

// checkOrder checks that recs hold, for every (sender, tag), the messages
// 0..want-1 in order with intact payloads.
func checkOrder(t *testing.T, recs []rec, want int) {
	t.Helper()
	next := map[[2]int]uint64{}
	for _, r := range recs {
		k := [2]int{r.proc, int(r.h.Tag)}
		if !r.ok {
			t.Fatalf("message %d from proc %d tag %d (%d bytes): bad payload", r.h.Seq, r.proc, r.h.Tag, r.h.Frag)
		}
		if r.h.Seq != next[k] {
			t.Fatalf("from proc %d tag %d: message %d, want %d", r.proc, r.h.Tag, r.h.Seq, next[k])
		}
		next[k]++
	}
	for k, n := range next {
		if n != uint64(want) {
			t.Fatalf("from proc %d tag %d: %d messages, want %d", k[0], k[1], n, want)
		}
	}
}

var sizes = []int{0, 1, 100, 65536, big, 0, 1, 100, 65536}

// overUnix is a tweak for startJob: the procs listen on Unix domain sockets, as
// procs of one host do, instead of on TCP.
func overUnix(t testing.TB) func(int, *Config, *tproc) {
	return func(_ int, cfg *Config, p *tproc) {
		ln := listenUnix()
		if ln == nil {
			t.Skip("no abstract Unix domain sockets here")
		}
		_ = p.ln.Close()
		p.ln = &countingListener{Listener: ln}
		cfg.Listener, p.addr = p.ln, unixScheme+ln.Addr().String()
	}
}

// overShm is a tweak for startJob: the procs listen on Unix domain sockets and
// upgrade their connections to shared-memory rings of 16 KiB, small enough that
// large messages wrap around them many times; with only, just the procs it
// names offer or take segments (the others keep their sockets).
func overShm(t testing.TB, only ...int) func(int, *Config, *tproc) {
	unix := overUnix(t)
	return func(i int, cfg *Config, p *tproc) {
		unix(i, cfg, p)
		if len(only) == 0 || slices.Contains(only, i) {
			cfg.Shm = 16 << 10
		}
	}
}

// transports are the ways startJob's procs reach each other, as tweaks.
func transports(t *testing.T) map[string]func(int, *Config, *tproc) {
	return map[string]func(int, *Config, *tproc){"tcp": nil, "unix": overUnix(t), "shm": overShm(t)}
}

// TestStart: a Device accepts no connection, and so hands its handlers nothing
// that others send, until it is started: until its proc has given the handlers
// what they answer with.
func TestStart(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, func(i int, _ *Config, p *tproc) { p.hold = i == 0 })
	sent := make(chan error, 1)
	go func() {
		sent <- ps[1].dev.Send(0, ChannelP2P, message(ChannelP2P, 1, 0, 0, 100), payloadOf(1, 0, 0, 100))
	}()
	time.Sleep(100 * time.Millisecond)
	if n, got := ps[0].ln.n.Load(), ps[0].p2p.count(); n != 0 || got != 0 {
		t.Fatalf("before Start: %d connections accepted, %d messages handled; want none", n, got)
	}
	ps[0].dev.Start()
	ps[0].dev.Start() // a second call does nothing
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message", func() bool { return ps[0].p2p.count() == 1 })
	if r := ps[0].p2p.records()[0]; !r.ok || r.proc != 1 {
		t.Errorf("handled %+v, want proc 1's message intact", r)
	}
	if n := ps[0].ln.n.Load(); n != 1 {
		t.Errorf("%d connections accepted, want 1", n)
	}
}

// TestDelivery: every proc sends to every other on both channels from two
// goroutines per (proc, channel): payloads of 0 bytes to 8 MiB arrive intact and
// in order per sender, and large ones are read straight into the handler's
// buffer; over TCP, over Unix domain sockets, over shared memory, and over
// sockets where one proc would use shared memory and the others not.
func TestDelivery(t *testing.T) {
	for name, tweak := range transports(t) {
		t.Run(name, func(t *testing.T) { testDelivery(t, tweak, name == "shm") })
	}
	t.Run("mixed", func(t *testing.T) { testDelivery(t, overShm(t, 1), false) })
}

func testDelivery(t *testing.T, tweak func(int, *Config, *tproc), wantShm bool) {
	noLeaks(t)
	const n, senders = 3, 2
	ps := startJob(t, n, tweak)
	var wg sync.WaitGroup
	errs := make(chan error, n*n*2*senders)
	for src := range ps {
		for dst := range ps {
			if src == dst {
				continue
			}
			for _, ch := range []Channel{ChannelP2P, ChannelColl} {
				for g := range senders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for seq, size := range sizes {
							if err := ps[src].dev.Send(dst, ch, message(ch, src, g, uint64(seq), size), payloadOf(src, g, uint64(seq), size)); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for dst, p := range ps {
		for _, ch := range []Channel{ChannelP2P, ChannelColl} {
			hd := p.handler(ch)
			waitFor(t, "all messages", func() bool { return hd.count() == (n-1)*senders*len(sizes) })
			recs := hd.records()
			checkOrder(t, recs, len(sizes))
			for _, r := range recs {
				// At most a buffer's worth with the header, and a remainder under directMin.
				if r.h.Frag == big && (r.copied >= bufSize+directMin || r.direct < big-bufSize-directMin) {
					t.Errorf("proc %d, %v: 8 MiB payload: %d bytes through the buffer, %d straight", dst, ch, r.copied, r.direct)
				}
			}
		}
		if p.dev.Polls() != wantShm {
			t.Errorf("proc %d: Polls %v with rings %v", dst, p.dev.Polls(), wantShm)
		}
		for to := -1; to <= n; to++ { // itself and procs out of range have no rings
			for _, ch := range []Channel{ChannelP2P, ChannelColl, 7} {
				want := wantShm && to >= 0 && to < n && to != dst && ch != 7
				if got := p.dev.Rings(to, ch); got != want {
					t.Errorf("proc %d: Rings(%d, %v) %v, want %v", dst, to, ch, got, want)
				}
			}
		}
		for src := range ps {
			if src != dst && len(p.dev.connsTo(src)) == 0 {
				t.Errorf("proc %d has no connection to %d", dst, src)
			}
			for _, c := range p.dev.connsTo(src) {
				if (c.shm != nil) != wantShm {
					t.Errorf("proc %d's connection to %d: through shared memory %v, want %v", dst, src, c.shm != nil, wantShm)
				}
				if c.shm != nil && !slices.Contains(p.dev.ringList(), c) {
					t.Errorf("proc %d's connection to %d through shared memory is not among those its polling daemons wake", dst, src)
				}
			}
		}
	}
	for i, p := range ps {
		p.dev.Close()
		if rings := p.dev.ringList(); len(rings) != 0 || p.dev.Polls() {
			t.Errorf("proc %d still lists %d shared-memory connections after Close (Polls %v)", i, len(rings), p.dev.Polls())
		}
	}
}

// ringList returns the shared-memory connections d's polling daemons wake.
func (d *Device) ringList() []*conn {
	if rings := d.rings.Load(); rings != nil {
		return *rings
	}
	return nil
}

// TestPartialRead: a handler that reads part of a payload, discards some, and
// leaves the rest does not disturb the next message; misuse returns errors.
func TestPartialRead(t *testing.T) {
	noLeaks(t)
	var misuse []error
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		if i != 1 {
			return
		}
		p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
			if h.Tag == 0 { // the checked messages
				p.p2p.mu.Lock()
				p.p2p.got = append(p.p2p.got, readAll(proc, h, pl))
				p.p2p.mu.Unlock()
				return nil
			}
			want := payloadOf(proc, int(h.Tag), h.Seq, int(h.Frag))
			head := make([]byte, min(10, pl.Len()))
			ok := pl.ReadInto(head) == nil && bytes.Equal(head, want[:len(head)])
			if pl.Len() > 20 {
				ok = ok && pl.Discard(10) == nil
				b := make([]byte, 5)
				ok = ok && pl.ReadInto(b) == nil && bytes.Equal(b, want[20:25])
			}
			rest := pl.Len()
			misuse = append(misuse, pl.ReadInto(make([]byte, rest+1)), pl.Discard(rest+1), pl.Discard(-1))
			p.p2p.mu.Lock()
			p.p2p.got = append(p.p2p.got, rec{proc: proc, h: *h, ok: ok && pl.Len() == rest, partial: true})
			p.p2p.mu.Unlock()
			return nil // the rest is discarded
		}
	})
	seq := uint64(0)
	for _, size := range sizes {
		for _, tag := range []int{1, 0} {
			if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, tag, seq, size), payloadOf(0, tag, seq, size)); err != nil {
				t.Fatal(err)
			}
		}
		seq++
	}
	hd := ps[1].p2p
	waitFor(t, "all messages", func() bool { return hd.count() == 2*len(sizes) })
	for _, r := range hd.records() {
		if !r.ok {
			t.Errorf("message %d tag %d (%d bytes, partial %v) not as sent", r.h.Seq, r.h.Tag, r.h.Frag, r.partial)
		}
	}
	var zero Payload // not from a Handle: nothing to read, and no panic
	misuse = append(misuse, zero.ReadInto(make([]byte, 1)), zero.Discard(1))
	if zero.Len() != 0 || zero.ReadInto(nil) != nil || zero.Discard(0) != nil {
		t.Error("the zero Payload is not empty")
	}
	for i, err := range misuse {
		if err == nil {
			t.Errorf("misuse %d of a Payload: no error", i)
		}
	}
	if _, lost := hd.lostErr(0); lost {
		t.Error("misuse of a Payload broke the link")
	}
}

// TestPost: Posts and Sends from one goroutine arrive in the order made, every
// done is called once with nil, and a handler that answers every message with a
// Post (it must not block) gets its answers through in order.
func TestPost(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		if i != 1 {
			return
		}
		d := func() *Device { return p.dev }
		p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
			r := readAll(proc, h, pl)
			p.p2p.mu.Lock()
			p.p2p.got = append(p.p2p.got, r)
			p.p2p.mu.Unlock()
			// Echo, as proc 1's message with the same identity.
			size := int(h.Frag)
			d().Post(proc, ChannelP2P, message(ChannelP2P, 1, int(h.Tag), h.Seq, size), payloadOf(1, int(h.Tag), h.Seq, size), nil)
			return nil
		}
	})
	const count = 600
	var done atomic.Int32
	var doneErr atomic.Value
	for seq := range uint64(count) {
		size := sizes[seq%uint64(len(sizes)-1)] % (1 << 20) // keep it quick: 8 MiB -> 0
		h := message(ChannelP2P, 0, 0, seq, size)
		pl := payloadOf(0, 0, seq, size)
		if seq%3 == 0 {
			if err := ps[0].dev.Send(1, ChannelP2P, h, pl); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ps[0].dev.Post(1, ChannelP2P, h, pl, func(err error) {
			if err != nil {
				doneErr.Store(err)
			}
			done.Add(1)
		})
	}
	waitFor(t, "every done", func() bool { return done.Load() == count-count/3 })
	if err := doneErr.Load(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all messages", func() bool { return ps[1].p2p.count() == count })
	checkOrder(t, ps[1].p2p.records(), count)
	waitFor(t, "all echoes", func() bool { return ps[0].p2p.count() == count })
	checkOrder(t, ps[0].p2p.records(), count)

	// A Post that must connect first: the send daemon dials.
	got := make(chan error, 1)
	ps[0].dev.Post(1, ChannelColl, message(ChannelColl, 0, 0, 0, 10), payloadOf(0, 0, 0, 10), func(err error) { got <- err })
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the collective message", func() bool { return ps[1].coll.count() == 1 })
	checkOrder(t, ps[1].coll.records(), 1)
}

// TestQueue: messages queued by several goroutines at once, mixed with Sends and
// Posts, arrive in each goroutine's order; a Queue that finds the link's write turn
// taken leaves its message to the holder, which writes it before it lets go of the
// turn; and a Queue not now leaves the write to the send daemon, or to a Flush.
func TestQueue(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, nil)
	d := ps[0].dev
	// Connect first, so that the turn below does not dial.
	if err := d.Send(1, ChannelP2P, message(ChannelP2P, 0, 9, 0, 1), payloadOf(0, 9, 0, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first message", func() bool { return ps[1].p2p.count() == 1 })

	// A holder of the turn writes what others queued meanwhile.
	l := &d.peer(1).links[ChannelP2P]
	l.wmu.Lock()
	const held = 5
	for seq := range uint64(held) {
		ordered := false
		if err := d.Queue(1, ChannelP2P, message(ChannelP2P, 0, 8, seq, 100), payloadOf(0, 8, seq, 100), true, func() { ordered = true }); err != nil {
			t.Fatal(err)
		}
		if !ordered {
			t.Fatal("Queue returned without calling ordered")
		}
	}
	time.Sleep(10 * time.Millisecond)
	if n := ps[1].p2p.count(); n != 1 {
		t.Fatalf("%d messages arrived while the turn was held, want only the first", n)
	}
	if err := l.turn(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queued messages", func() bool { return ps[1].p2p.count() == 1+held })

	// Not now: the send daemon writes it, or a Flush.
	if err := d.Queue(1, ChannelP2P, message(ChannelP2P, 0, 7, 0, 10), payloadOf(0, 7, 0, 10), false, func() {}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message left to the daemon", func() bool { return ps[1].p2p.count() == 2+held })
	l.wmu.Lock() // the daemon cannot write it now
	if err := d.Queue(1, ChannelP2P, message(ChannelP2P, 0, 7, 1, 10), payloadOf(0, 7, 1, 10), false, func() {}); err != nil {
		t.Fatal(err)
	}
	l.wmu.Unlock()
	if err := d.Flush(1, ChannelP2P); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flushed message", func() bool { return ps[1].p2p.count() == 3+held })

	// Goroutines queue, send and post at once, each on its own tag.
	const senders, count = 4, 300
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for seq := range uint64(count) {
				size := sizes[int(seq)%(len(sizes)-1)] % (1 << 17)
				h, pl := message(ChannelP2P, 0, g, seq, size), payloadOf(0, g, seq, size)
				var err error
				switch seq % 4 {
				case 0:
					err = d.Send(1, ChannelP2P, h, pl)
				case 1:
					d.Post(1, ChannelP2P, h, pl, nil)
				default:
					err = d.Queue(1, ChannelP2P, h, pl, seq%4 == 2, func() {})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Goroutines number their messages under one lock, as the engine does, and
	// release it once Queue has placed theirs: the numbers arrive in order, also
	// while the first writer dials (the collective channel is not connected yet).
	const shared = 100
	var mu sync.Mutex
	next := uint64(0)
	for g := range senders {
		wg.Go(func() {
			for i := range count {
				mu.Lock()
				seq := next
				next++
				err := d.Queue(1, ChannelColl, message(ChannelColl, 0, shared, seq, 8), payloadOf(0, shared, seq, 8), (g+i)%3 != 0, mu.Unlock)
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := d.Flush(1, ChannelColl); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every message", func() bool { return ps[1].p2p.count() == 3+held+senders*count })
	waitFor(t, "every numbered message", func() bool { return ps[1].coll.count() == senders*count })
	var mine []rec
	for _, r := range ps[1].p2p.records() {
		if r.h.Tag < senders {
			mine = append(mine, r)
		}
	}
	checkOrder(t, mine, count)
	checkOrder(t, ps[1].coll.records(), senders*count)
}

// TestDialRace: two procs that send to each other at the same moment may dial
// each other at once; each direction stays in order.
func TestDialRace(t *testing.T) {
	noLeaks(t)
	const rounds, count = 30, 40
	twice := 0
	for range rounds {
		ps := startJob(t, 2, nil)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for src := range 2 {
			for _, ch := range []Channel{ChannelP2P, ChannelColl} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for seq := range uint64(count) {
						size := int(seq % 200)
						if err := ps[src].dev.Send(1-src, ch, message(ch, src, 0, seq, size), payloadOf(src, 0, seq, size)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for dst, p := range ps {
			for _, ch := range []Channel{ChannelP2P, ChannelColl} {
				hd := p.handler(ch)
				waitFor(t, "all messages", func() bool { return hd.count() == count })
				checkOrder(t, hd.records(), count)
			}
			if len(p.dev.connsTo(1-dst)) > 2 {
				twice++
			}
		}
		for _, p := range ps {
			if err := p.dev.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d of %d rounds had two connections for a channel", twice/2, rounds)
}

// TestLazy: no connection before the first message; one per channel after it,
// used in both directions.
func TestLazy(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 3, nil)
	accepted := func() [3]int32 {
		return [3]int32{ps[0].ln.n.Load(), ps[1].ln.n.Load(), ps[2].ln.n.Load()}
	}
	if a := accepted(); a != [3]int32{} {
		t.Fatalf("accepted %v before any message", a)
	}
	send := func(src, dst int, ch Channel, seq uint64) {
		t.Helper()
		if err := ps[src].dev.Send(dst, ch, message(ch, src, 0, seq, 5), payloadOf(src, 0, seq, 5)); err != nil {
			t.Fatal(err)
		}
	}
	send(0, 1, ChannelP2P, 0)
	waitFor(t, "the message", func() bool { return ps[1].p2p.count() == 1 })
	if a := accepted(); a != [3]int32{0, 1, 0} {
		t.Fatalf("accepted %v after 0 sent to 1, want [0 1 0]", a)
	}
	send(1, 0, ChannelP2P, 0) // the answer takes the same connection
	send(0, 1, ChannelP2P, 1)
	waitFor(t, "the answer", func() bool { return ps[0].p2p.count() == 1 && ps[1].p2p.count() == 2 })
	if a := accepted(); a != [3]int32{0, 1, 0} {
		t.Fatalf("accepted %v after the answer, want [0 1 0]", a)
	}
	send(1, 0, ChannelColl, 0)
	waitFor(t, "the collective message", func() bool { return ps[0].coll.count() == 1 })
	if a := accepted(); a != [3]int32{1, 1, 0} {
		t.Fatalf("accepted %v after 1 sent to 0 on the collective channel, want [1 1 0]", a)
	}
}

// TestStrangers: connections that speak garbage, hold a wrong key or belong to
// another job are refused and logged, and never disturb the job's links; a flood
// of silent ones is capped.
func TestStrangers(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, nil)
	exchange := func(seq uint64) {
		t.Helper()
		for src := range 2 {
			if err := ps[src].dev.Send(1-src, ChannelP2P, message(ChannelP2P, src, 0, seq, 100), payloadOf(src, 0, seq, 100)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "the exchange", func() bool { return ps[0].p2p.count() == int(seq+1) && ps[1].p2p.count() == int(seq+1) })
	}
	exchange(0)
	addr := ps[0].addr
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	refused := func(c net.Conn, why string) {
		t.Helper()
		waitFor(t, "a log line about "+why, func() bool { return ps[0].log.has("refused connection from " + c.LocalAddr().String()) })
		if !ps[0].log.has(why) {
			t.Errorf("log does not say %q:\n%s", why, ps[0].log)
		}
		_ = c.SetReadDeadline(time.Now().Add(waitLimit))
		if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection of a stranger (%s) not closed", why)
		}
		_ = c.Close()
	}

	silent := dial() // holds a handshake slot: nobody waits for it
	garbage := dial()
	_, _ = garbage.Write([]byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 4)))
	refused(garbage, auth.ErrNotWeft.Error())
	exchange(1)

	for _, c := range []struct {
		key  []byte
		job  string
		want error
	}{
		{[]byte("not the key, not the key, no"), testJob, auth.ErrBadKey},
		{testKey, "another-job", auth.ErrWrongJob},
	} {
		nc := dial()
		_, err := auth.Handshake(nc, auth.Config{Key: c.key, Job: c.job, Proc: 1, Initiator: true, Timeout: waitLimit})
		if !errors.Is(err, c.want) {
			t.Errorf("stranger's handshake: %v, want %v", err, c.want)
		}
		refused(nc, c.want.Error())
	}
	exchange(2)

	// Fill every handshake slot with silent connections: the next is refused at once.
	flood := []net.Conn{silent}
	for range maxStrangers - 1 {
		flood = append(flood, dial())
	}
	waitFor(t, "the flood to be accepted", func() bool { return len(ps[0].dev.strangers) == maxStrangers })
	extra := dial()
	refused(extra, "handshakes already under way")
	for _, c := range flood {
		_ = c.Close()
	}
	waitFor(t, "the handshake slots to free", func() bool { return len(ps[0].dev.strangers) == 0 })
	exchange(3)
	for i, p := range ps {
		for _, hd := range []*handler{p.p2p, p.coll} {
			if err, lost := hd.lostErr(1 - i); lost {
				t.Errorf("proc %d lost proc %d: %v", i, 1-i, err)
			}
		}
	}
}

// fakePeer connects to addr as proc 1 of the test job on ch, proving the key: an
// authenticated peer that may then send anything.
func fakePeer(t *testing.T, addr string, ch Channel) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if _, err := auth.Handshake(nc, auth.Config{Key: testKey, Job: testJob, Proc: 1, Channel: uint8(ch), Initiator: true, Timeout: waitLimit}); err != nil {
		t.Fatal(err)
	}
	return nc
}

func encode(h *wire.Header) []byte {
	b := make([]byte, wire.Size)
	h.Put(b)
	return b
}

// TestBadInput: an authenticated peer that breaks the protocol loses its link:
// both handlers are told once, the proc is logged, later sends fail.
func TestBadInput(t *testing.T) {
	noLeaks(t)
	badVersion := encode(message(ChannelP2P, 1, 0, 0, 0))
	badVersion[0] = 9
	cases := []struct {
		name  string
		ch    Channel
		bytes []byte
		want  string
	}{
		{"unparsable header", ChannelP2P, badVersion, "Version"},
		{"collective kind on the p2p channel", ChannelP2P, encode(message(ChannelColl, 1, 0, 0, 0)), "Coll message on the p2p channel"},
		{"p2p kind on the collective channel", ChannelColl, encode(message(ChannelP2P, 1, 0, 0, 0)), "Eager message on the coll channel"},
		{"Close with a wrong count", ChannelP2P, encode(&wire.Header{Kind: wire.Close, Seq: 3}), "after sending 3 messages"},
		{"payload cut short", ChannelP2P, append(encode(message(ChannelP2P, 1, 0, 0, 100)), payloadOf(1, 0, 0, 100)[:10]...), io.ErrUnexpectedEOF.Error()},
		{"EOF without Close", ChannelP2P, nil, "EOF"},
		{"handler error", ChannelP2P, append(encode(message(ChannelP2P, 1, 99, 0, 4)), payloadOf(1, 99, 0, 4)...), "refused by the test"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
				p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
					if h.Tag == 99 {
						return errors.New("refused by the test")
					}
					buf := make([]byte, pl.Len())
					return pl.ReadInto(buf)
				}
			})
			nc := fakePeer(t, ps[0].addr, c.ch)
			_, _ = nc.Write(c.bytes)
			if c.name != "unparsable header" && c.name != "handler error" {
				_ = nc.(*net.TCPConn).CloseWrite()
			}
			p := ps[0]
			waitFor(t, "Lost", func() bool {
				_, a := p.p2p.lostErr(1)
				_, b := p.coll.lostErr(1)
				return a && b
			})
			err, _ := p.p2p.lostErr(1)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Lost(1, %v), want it to say %q", err, c.want)
			}
			if !p.log.has("lost proc 1") {
				t.Errorf("nothing logged:\n%s", p.log)
			}
			_ = nc.SetReadDeadline(time.Now().Add(waitLimit))
			if _, err := io.ReadAll(nc); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error("connection of the faulty peer not closed")
			}
			err = p.dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 0, 0), nil)
			if !errors.Is(err, ErrLost) {
				t.Errorf("Send to the lost proc: %v, want ErrLost", err)
			}
		})
	}
}

// TestWriteError: a connection that breaks under a Send makes the Send return
// the error, naming the proc and channel, and the proc is lost once.
func TestWriteError(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, nil)
	nc := fakePeer(t, ps[0].addr, ChannelP2P)
	// A message makes proc 0 adopt the connection for its own sends to proc 1.
	_, _ = nc.Write(append(encode(message(ChannelP2P, 1, 0, 0, 3)), payloadOf(1, 0, 0, 3)...))
	waitFor(t, "the message", func() bool { return ps[0].p2p.count() == 1 })
	const size = 32 << 20 // more than both socket buffers hold
	sent := make(chan error, 1)
	go func() {
		sent <- ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 0, size), make([]byte, size))
	}()
	if _, err := io.ReadFull(nc, make([]byte, 1<<20)); err != nil { // the Send is writing
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).SetLinger(0) // close with a reset
	_ = nc.Close()
	err := <-sent
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "proc 1 on the p2p channel") {
		t.Errorf("Send on a broken connection: %v", err)
	}
	waitFor(t, "Lost", func() bool {
		_, a := ps[0].p2p.lostErr(1)
		_, b := ps[0].coll.lostErr(1)
		return a && b
	})
}

// TestOrderlyClose: a proc that closes its Device is not lost to the others;
// sends to it then fail with ErrPeerClosed.
func TestOrderlyClose(t *testing.T) {
	for name, tweak := range transports(t) {
		t.Run(name, func(t *testing.T) { testOrderlyClose(t, tweak) })
	}
}

func testOrderlyClose(t *testing.T, tweak func(int, *Config, *tproc)) {
	noLeaks(t)
	ps := startJob(t, 2, tweak)
	for seq := range uint64(10) {
		for src := range 2 {
			for _, ch := range []Channel{ChannelP2P, ChannelColl} {
				if err := ps[src].dev.Send(1-src, ch, message(ch, src, 0, seq, 1000), payloadOf(src, 0, seq, 1000)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := ps[1].dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ps[1].dev.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Close waited for proc 0 to take its Close messages: everything sent before arrived.
	for _, p := range ps {
		for _, ch := range []Channel{ChannelP2P, ChannelColl} {
			checkOrder(t, p.handler(ch).records(), 10)
		}
	}
	waitFor(t, "proc 0's connections to end", func() bool { return len(ps[0].dev.connsTo(1)) == 0 })
	for _, hd := range []*handler{ps[0].p2p, ps[0].coll} {
		if err, lost := hd.lostErr(1); lost {
			t.Errorf("proc 0 lost proc 1, which closed in order: %v\nproc 0 log:\n%s\nproc 1 log:\n%s", err, ps[0].log, ps[1].log)
		}
	}
	if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 10, 0), nil); !errors.Is(err, ErrPeerClosed) {
		t.Errorf("Send to a closed proc: %v, want ErrPeerClosed", err)
	}
	if err := ps[1].dev.Send(0, ChannelP2P, message(ChannelP2P, 1, 0, 10, 0), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send on a closed Device: %v, want ErrClosed", err)
	}
	got := make(chan error, 1)
	ps[1].dev.Post(0, ChannelP2P, message(ChannelP2P, 1, 0, 10, 0), nil, func(err error) { got <- err })
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("Post on a closed Device: done(%v), want ErrClosed", err)
	}
}

// TestKilled: a proc whose connections break without Close is lost to the
// others, once per proc although it had two connections, and sends to it fail.
func TestKilled(t *testing.T) {
	for name, tweak := range transports(t) {
		t.Run(name, func(t *testing.T) { testKilled(t, tweak) })
	}
}

func testKilled(t *testing.T, tweak func(int, *Config, *tproc)) {
	noLeaks(t)
	ps := startJob(t, 3, tweak)
	for _, ch := range []Channel{ChannelP2P, ChannelColl} {
		for src := range 3 {
			for dst := range 3 {
				if src != dst {
					if err := ps[src].dev.Send(dst, ch, message(ch, src, 0, 0, 10), payloadOf(src, 0, 0, 10)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for _, p := range ps {
		waitFor(t, "the messages", func() bool { return p.p2p.count() == 2 && p.coll.count() == 2 })
	}
	ps[2].dev.kill()
	for _, p := range ps[:2] {
		waitFor(t, "Lost(2)", func() bool {
			_, a := p.p2p.lostErr(2)
			_, b := p.coll.lostErr(2)
			return a && b
		})
	}
	for src := range 2 {
		for _, ch := range []Channel{ChannelP2P, ChannelColl} {
			if err := ps[src].dev.Send(2, ch, message(ch, src, 0, 1, 0), nil); !errors.Is(err, ErrLost) {
				t.Errorf("Send to a lost proc: %v, want ErrLost", err)
			}
		}
		if err, lost := ps[src].p2p.lostErr(1 - src); lost {
			t.Errorf("proc %d lost proc %d: %v", src, 1-src, err)
		}
	}
	if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 1, 10), payloadOf(0, 0, 1, 10)); err != nil {
		t.Errorf("the survivors' link: %v", err)
	}
	waitFor(t, "the survivors' message", func() bool { return ps[1].p2p.count() == 3 })
}

// TestCandidates: a candidate address that reaches another proc of the job is
// skipped without that proc counting us as failed; when no candidate answers,
// Send names the proc and every address, and nobody is lost.
func TestCandidates(t *testing.T) {
	noLeaks(t)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	var ps []*tproc
	ps = startJob(t, 4, func(i int, cfg *Config, p *tproc) {
		if i == 0 {
			cfg.Addrs = func(proc int) ([]string, error) {
				switch proc {
				case 1:
					return []string{ps[2].addr, ps[1].addr}, nil // proc 2 answers first
				case 3:
					return []string{ps[2].addr, deadAddr}, nil
				}
				return []string{ps[proc].addr}, nil
			}
		}
	})
	if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 0, 10), payloadOf(0, 0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message", func() bool { return ps[1].p2p.count() == 1 })
	waitFor(t, "proc 2 to drop the stray connection", func() bool { return ps[2].ln.n.Load() == 1 && len(ps[2].dev.connsTo(0)) == 0 })

	err = ps[0].dev.Send(3, ChannelP2P, message(ChannelP2P, 0, 0, 0, 10), payloadOf(0, 0, 0, 10))
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "proc 3") ||
		!strings.Contains(err.Error(), ps[2].addr) || !strings.Contains(err.Error(), deadAddr) || !strings.Contains(err.Error(), "reached proc 2") {
		t.Errorf("Send to an unreachable proc: %v", err)
	}
	for _, p := range ps {
		for _, hd := range []*handler{p.p2p, p.coll} {
			hd.mu.Lock()
			if len(hd.lost) > 0 {
				t.Errorf("lost %v", hd.lost)
			}
			hd.mu.Unlock()
		}
	}
	if ps[1].p2p.count() != 1 || ps[2].p2p.count() != 0 {
		t.Error("stray messages")
	}
}

// TestBadArguments: nothing panics on bad arguments; each is an error.
func TestBadArguments(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, nil)
	d := ps[0].dev
	ok := message(ChannelP2P, 0, 0, 0, 0)
	cases := []struct {
		name string
		proc int
		ch   Channel
		h    *wire.Header
	}{
		{"negative proc", -1, ChannelP2P, ok},
		{"proc past the job", 2, ChannelP2P, ok},
		{"self", 0, ChannelP2P, ok},
		{"unknown channel", 1, 7, ok},
		{"nil header", 1, ChannelP2P, nil},
		{"Coll on p2p", 1, ChannelP2P, message(ChannelColl, 0, 0, 0, 0)},
		{"Eager on coll", 1, ChannelColl, ok},
		{"Close", 1, ChannelP2P, &wire.Header{Kind: wire.Close}},
		{"invalid header", 1, ChannelP2P, &wire.Header{Kind: wire.Eager}},
		{"kind 0", 1, ChannelP2P, &wire.Header{}},
	}
	for _, c := range cases {
		if err := d.Send(c.proc, c.ch, c.h, nil); err == nil {
			t.Errorf("Send with %s: no error", c.name)
		}
		got := make(chan error, 1)
		d.Post(c.proc, c.ch, c.h, nil, func(err error) { got <- err })
		if err := <-got; err == nil {
			t.Errorf("Post with %s: done(nil)", c.name)
		}
		d.Post(c.proc, c.ch, c.h, nil, nil)
	}
	if ps[0].ln.n.Load()+ps[1].ln.n.Load() != 0 {
		t.Error("bad arguments opened connections")
	}

	h := &handler{}
	good := Config{Self: 0, Procs: 2, Job: testJob, Key: testKey, P2P: h, Coll: h, Addrs: func(int) ([]string, error) { return nil, nil }}
	for name, tweak := range map[string]func(*Config){
		"no procs":       func(c *Config) { c.Procs = 0 },
		"self too big":   func(c *Config) { c.Self = 2 },
		"short key":      func(c *Config) { c.Key = c.Key[:5] },
		"no job":         func(c *Config) { c.Job = "" },
		"no handler":     func(c *Config) { c.Coll = nil },
		"no addresses":   func(c *Config) { c.Addrs = nil },
		"negative spin":  func(c *Config) { c.Spin = -1 },
		"odd shm rings":  func(c *Config) { c.Shm = 5000 },
		"tiny shm rings": func(c *Config) { c.Shm = 64 },
	} {
		cfg := good
		tweak(&cfg)
		if d, err := New(cfg); err == nil {
			_ = d.Close()
			t.Errorf("New with %s: no error", name)
		}
	}
	d, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(1, ChannelP2P, ok, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Send to a proc without addresses: %v", err)
	}
	_ = d.Close()
}

// TestSettle: the poll budget's adaptation, with Spin = 64 µs.
func TestSettle(t *testing.T) {
	const spin = 64 * time.Microsecond
	c := &conn{d: &Device{cfg: Config{Spin: spin}}, budget: spin}
	us := time.Microsecond
	for i, s := range []struct{ waited, want time.Duration }{
		{1000 * us, 32 * us}, // an idle peer: halve
		{1000 * us, 16 * us},
		{1000 * us, 8 * us},
		{1000 * us, 0}, // at Spin/8: stop polling
		{1000 * us, 0},
		{40 * us, spin},  // a read that blocked but came quickly: poll again
		{200 * us, spin}, // a busy link whose poll was cut short: keep polling
		{257 * us, 32 * us},
		{256 * us, spin},
	} {
		c.settle(s.waited)
		if c.budget != s.want {
			t.Fatalf("step %d: waited %v: budget %v, want %v", i, s.waited, c.budget, s.want)
		}
	}
}

// TestSpin: with polling on, messages of every size flow both ways in order,
// and Close ends polling daemons (settle's rule is TestSettle's).
func TestSpin(t *testing.T) {
	for name, tweak := range transports(t) {
		t.Run(name, func(t *testing.T) { testSpin(t, tweak) })
	}
}

func testSpin(t *testing.T, tweak func(int, *Config, *tproc)) {
	noLeaks(t)
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		if tweak != nil {
			tweak(i, cfg, p)
		}
		cfg.Spin = 50 * time.Microsecond
	})
	for seq := range uint64(200) {
		src := int(seq % 2)
		size := sizes[seq%uint64(len(sizes))]
		if err := ps[src].dev.Send(1-src, ChannelP2P, message(ChannelP2P, src, 0, seq/2, size), payloadOf(src, 0, seq/2, size)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the message", func() bool { return ps[1-src].p2p.count() == int(seq/2+1) })
	}
	for _, p := range ps {
		checkOrder(t, p.p2p.records(), 100)
	}
}

// TestListen: the first address is the Unix socket when asked for (on Linux),
// then loopback, and every address reaches the listener, which a Close ends.
func TestListen(t *testing.T) {
	for _, local := range []bool{false, true} {
		ln, addrs, err := Listen(local)
		if err != nil {
			t.Fatal(err)
		}
		first := "127.0.0.1:"
		if local && runtime.GOOS == "linux" {
			first = unixScheme + "@weft-"
		}
		if len(addrs) < 2 || !strings.HasPrefix(addrs[0], first) {
			t.Fatalf("local %v: addresses %v: want %s... first", local, addrs, first)
		}
		accepted := make(chan error, 1)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					accepted <- err
					return
				}
				_ = c.Close()
			}
		}()
		for _, a := range addrs {
			netw, where := network(a)
			c, err := net.DialTimeout(netw, where, 2*time.Second)
			if err != nil {
				t.Errorf("%s: %v", a, err)
				continue
			}
			_ = c.Close()
		}
		if err := ln.Close(); err != nil {
			t.Error(err)
		}
		if err := <-accepted; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	}
}

// FuzzServe feeds arbitrary bytes to a receive daemon, as an authenticated peer
// could: it must end with an error, never panic or hang.
func FuzzServe(f *testing.F) {
	f.Add(encode(message(ChannelP2P, 1, 0, 0, 0)))
	f.Add(append(encode(message(ChannelP2P, 1, 0, 0, 100)), payloadOf(1, 0, 0, 100)...))
	f.Add(append(encode(message(ChannelP2P, 1, 1, 0, 20)), payloadOf(1, 1, 0, 20)...))
	f.Add(encode(&wire.Header{Kind: wire.Close}))
	f.Add(append(encode(message(ChannelP2P, 1, 0, 0, 3)), encode(&wire.Header{Kind: wire.Close, Seq: 1})...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hd := &handler{fn: func(proc int, h *wire.Header, pl *Payload) error {
			if h.Tag == 1 { // read a part, leave the rest
				return pl.ReadInto(make([]byte, pl.Len()/2))
			}
			return pl.ReadInto(make([]byte, pl.Len()))
		}}
		d := &Device{cfg: Config{P2P: hd, Coll: hd, Procs: 2}}
		a, z := net.Pipe()
		c := d.newConn(a, &peer{proc: 1}, ChannelP2P, true)
		go func() {
			_, _ = z.Write(b)
			_ = z.Close()
		}()
		if err := c.serve(); err == nil {
			t.Fatal("serve returned nil")
		}
		_ = a.Close()
	})
}

// TestBackpressure: when the peer stops reading, Posts never block: small ones
// are written at once until the socket is full, the rest of a message the socket
// took in part waits in the connection, later ones queue, and a Send waits; once
// the peer reads again everything arrives in order.
func TestBackpressure(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	const count, size = 6000, inlineMax // 24 MiB: more than both socket buffers hold
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		if i != 1 {
			return
		}
		p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
			if h.Seq == 1 {
				<-release
			}
			r := readAll(proc, h, pl)
			p.p2p.mu.Lock()
			p.p2p.got = append(p.p2p.got, r)
			p.p2p.mu.Unlock()
			return nil
		}
	})
	d := ps[0].dev
	send := func(seq uint64) {
		if err := d.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, size), payloadOf(0, 0, seq, size)); err != nil {
			t.Error(err)
		}
	}
	send(0) // connect
	var done atomic.Int32
	start := time.Now()
	for seq := uint64(1); seq < count; seq++ {
		d.Post(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, size), payloadOf(0, 0, seq, size), func(err error) {
			if err != nil {
				t.Error(err)
			}
			done.Add(1)
		})
	}
	if el := time.Since(start); el > waitLimit/2 {
		t.Errorf("Posts to a peer that does not read took %v", el)
	}
	l := &d.peer(1).links[ChannelP2P]
	l.mu.Lock()
	queued := len(l.queue)
	l.mu.Unlock()
	if queued == 0 {
		t.Error("nothing queued although the peer does not read")
	}
	sent := make(chan struct{})
	go func() {
		send(count)
		close(sent)
	}()
	close(release)
	<-sent
	waitFor(t, "every done", func() bool { return done.Load() == count-1 })
	waitFor(t, "every message", func() bool { return ps[1].p2p.count() == count+1 })
	checkOrder(t, ps[1].p2p.records(), count+1)
}

// TestConsume: writeRaw's bookkeeping drops written bytes across buffer
// boundaries and skips the empty buffers that follow.
func TestConsume(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want []string
	}{
		{0, []string{"ab", "", "cde"}},
		{1, []string{"b", "", "cde"}},
		{2, []string{"cde"}},
		{3, []string{"de"}},
		{5, []string{}},
	} {
		nb := net.Buffers{[]byte("ab"), []byte(""), []byte("cde")}
		consume(&nb, tt.n)
		got := []string{}
		for _, b := range nb {
			got = append(got, string(b))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("consume %d: %q, want %q", tt.n, got, tt.want)
		}
	}
}
