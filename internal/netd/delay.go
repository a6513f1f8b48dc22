package netd

import (
	"runtime"
	"sync"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// An emulated wire delay (Config.Delay): every message a Device sends waits that
// long on a delay line of its link before it goes to the link, so that a job on
// one machine behaves, for latency, like one on a slower network (TMPI's Fast
// Ethernet cluster, about 100 µs one way) where the kernel offers no netem.
//
// A link's line is a FIFO served by a goroutine of its own, which runs while
// messages wait and exits when the line is empty. Every message of the link goes
// through it and all wait the same time, so the order of Sends and Posts on a
// link is kept. Handing a message to the line never waits for I/O: Post stays
// non-blocking, and a receive daemon that posts is never held. A Send copies its
// payload (its caller may reuse it at once, as a real network's kernel buffer
// allows) and returns; it waits only while more than delayHold bytes of its
// link's copies are not yet written, the backpressure a full socket would give.
// Because a delayed Send returns before it is written, its dial or write error
// reaches the Handlers' Lost instead of its caller, whatever the error.
//
// Go's timers are coarse here (about 1 ms), so the line sleeps only the part of a
// wait beyond delaySpinBelow and polls the clock, yielding, for the rest: a link
// with messages in flight keeps a processor partly busy, which a latency
// experiment accepts and which costs nothing without a delay (a branch in Send
// and Post).

// delayHold bounds the bytes of a link's Send copies that wait on its line or
// for their write: past it a Send waits.
const delayHold = 8 << 20

// delaySpinBelow is the part of a wait the line polls for instead of sleeping.
const delaySpinBelow = 2 * time.Millisecond

// delayed is one message on a delay line.
type delayed struct {
	due     time.Time
	h       wire.Header
	payload []byte
	done    func(error)
	send    bool // from a Send: payload is a copy of copied bytes, counted in held
	copied  int
}

// delayLine is one link's line.
type delayLine struct {
	d *Device
	l *link

	mu      sync.Mutex
	drained sync.Cond // signalled when held falls
	queue   []delayed
	held    int  // bytes of Send copies not yet written
	sends   int  // Sends not yet written
	running bool // the line's goroutine runs
}

// line returns l's delay line, making it on first use.
func (d *Device) line(l *link) *delayLine {
	if v, ok := d.lines.Load(l); ok {
		return v.(*delayLine)
	}
	dl := &delayLine{d: d, l: l}
	dl.drained.L = &dl.mu
	v, _ := d.lines.LoadOrStore(l, dl)
	return v.(*delayLine)
}

// delaySend is Send on l with a delay: h and a copy of payload join the line.
func (d *Device) delaySend(l *link, h *wire.Header, payload []byte) error {
	dl := d.line(l)
	dl.mu.Lock()
	for dl.held > 0 && dl.held+len(payload) > delayHold && !d.delayShut.Load() {
		dl.drained.Wait()
	}
	if d.delayShut.Load() {
		dl.mu.Unlock()
		return ErrClosed
	}
	n := len(payload)
	dl.held += n
	dl.sends++
	dl.push(delayed{h: *h, payload: append([]byte(nil), payload...), send: true, copied: n})
	dl.mu.Unlock()
	return nil
}

// delayPost is Post on l with a delay: h, payload and done join the line.
func (d *Device) delayPost(l *link, h *wire.Header, payload []byte, done func(error)) {
	dl := d.line(l)
	dl.mu.Lock()
	if d.delayShut.Load() {
		dl.mu.Unlock()
		if done != nil {
			go done(ErrClosed)
		}
		return
	}
	dl.push(delayed{h: *h, payload: payload, done: done})
	dl.mu.Unlock()
}

// push appends m, due a delay from now, and starts the line's goroutine if it
// is not running. Caller holds dl.mu.
func (dl *delayLine) push(m delayed) {
	m.due = time.Now().Add(dl.d.cfg.Delay)
	dl.queue = append(dl.queue, m)
	if !dl.running {
		dl.running = true
		dl.d.delayWG.Add(1)
		go dl.run()
	}
}

// run hands the line's messages to the link as they fall due, until the line
// is empty.
func (dl *delayLine) run() {
	defer dl.d.delayWG.Done()
	var due []delayed
	for {
		dl.mu.Lock()
		now := time.Now()
		n := 0
		for n < len(dl.queue) && !dl.queue[n].due.After(now) {
			n++
		}
		if n == 0 && len(dl.queue) == 0 {
			dl.running = false
			dl.queue = nil
			dl.mu.Unlock()
			return
		}
		if n == 0 {
			wait := dl.queue[0].due.Sub(now)
			dl.mu.Unlock()
			if wait > delaySpinBelow {
				time.Sleep(wait - delaySpinBelow)
			} else {
				runtime.Gosched()
			}
			continue
		}
		due = append(due[:0], dl.queue[:n]...)
		clear(dl.queue[:n])
		dl.queue = dl.queue[n:]
		dl.mu.Unlock()
		for i := range due {
			dl.hand(&due[i])
		}
		clear(due)
	}
}

// hand gives m to the link. A Send's copy is released, and its failure loses
// the peer, when the link is done with it.
func (dl *delayLine) hand(m *delayed) {
	done := m.done
	if m.send {
		n := m.copied
		done = func(err error) {
			dl.mu.Lock()
			dl.held -= n
			dl.sends--
			dl.drained.Broadcast()
			dl.mu.Unlock()
			if err != nil {
				dl.d.lose(dl.l.p, err)
			}
		}
	}
	if err := dl.l.post(&m.h, m.payload, done); err != nil && done != nil {
		done(err)
	}
}

// drainDelays waits until every delay line has handed its messages to its
// link, and every delayed Send is written (as an undelayed one would be when it
// returned), up to closeLinger. Close calls it first, while the Device still
// dials and writes, so nothing sent is dropped; later delayed Sends and Posts
// fail with ErrClosed.
func (d *Device) drainDelays() {
	if d.cfg.Delay <= 0 {
		return
	}
	d.delayShut.Store(true)
	d.lines.Range(func(_, v any) bool {
		dl := v.(*delayLine)
		dl.mu.Lock()
		dl.drained.Broadcast() // Sends waiting for room see delayShut
		dl.mu.Unlock()
		return true
	})
	d.delayWG.Wait()
	deadline := time.Now().Add(closeLinger)
	d.lines.Range(func(_, v any) bool {
		dl := v.(*delayLine)
		for time.Now().Before(deadline) {
			dl.mu.Lock()
			n := dl.sends
			dl.mu.Unlock()
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		return true
	})
}
