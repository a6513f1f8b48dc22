package p2p

import (
	"runtime"
	"sync"
)

// Small messages travel through the receiver's inbox: the sender copies the data
// into an eager copy and pushes it with one compare-and-swap, without the receiver's
// lock; the receiver (or any sender that takes the lock) drains the inbox in arrival
// order, matching each copy against the posted receives. A hand-off then moves about
// three cache lines between cores, and a sender running ahead of its receiver touches
// only the inbox line.

var copies = sync.Pool{New: func() any { return new(Request) }}

// push leaves the eager copy m in ep's inbox and, when a rank of ep is parked waiting
// for a drain, drains it for them.
func (ep *Endpoint) push(m *Request) {
	m.seq = ep.stamp()
	tag := m.key.tag // m is the receiver's once pushed
	for {
		head := ep.inbox.Load()
		m.next = head
		if ep.inbox.CompareAndSwap(head, m) {
			break
		}
	}
	// A parker stores parked then loads the inbox; we store the inbox then load
	// parked: one of us sees the other, so no message is left undrained (wants).
	if ep.wants(tag) {
		ep.Progress()
	}
}

// drain moves the mailbox and then the inbox into the engine in arrival order: each
// message goes into the earliest matching posted receive, or onto the unexpected
// queue; the lanes' messages that no posted receive takes may stay (see takeBox).
// It returns how many receives it completed. Caller holds ep.mu.
func (ep *Endpoint) drain() int {
	_, completed := ep.takeBox(nil, nil, nil, published)
	return completed + ep.drainInbox()
}

// merge is drain leaving nothing published in the mailbox: for Probe, which looks
// at the unexpected queue only, and for a sender that makes room in the lanes.
// Caller holds ep.mu.
func (ep *Endpoint) merge() int {
	completed := 0
	if b := ep.box.Load(); b != nil {
		_, completed = ep.mergeBox(b, nil, nil, nil, published)
	}
	return completed + ep.drainInbox()
}

// drainInbox moves the inbox into the engine, each message after the mailbox's
// messages stamped before it. Caller holds ep.mu.
func (ep *Endpoint) drainInbox() (completed int) {
	if ep.inbox.Load() == nil {
		return 0
	}
	ep.moved()
	var fifo *Request
	for m := ep.inbox.Swap(nil); m != nil; {
		next := m.next
		m.next = fifo
		fifo, m = m, next
	}
	for m := fifo; m != nil; {
		next := m.next
		m.next = nil
		_, n := ep.takeBox(nil, nil, nil, m.seq)
		completed += n
		if r := ep.takePosted(m.key); r != nil {
			deliver(r, m.buf(), m.key)
			ep.release(m)
			completed++
		} else {
			ep.queue(m)
		}
		m = next
	}
	return completed
}

// Progress drains the inbox of ep and writes what streaming sends left to the
// send daemons: a rank polling with Test or Iprobe may wait for their answer.
func (ep *Endpoint) Progress() {
	ep.World.flushDeferred()
	ep.progress(nil)
}

// wake drains ep for its parked goroutines after the caller left a message of a
// tag one of them waits for in ep's mailbox. It does not ask arrived first: the
// message may sit behind a slot that another sender has claimed and not yet
// written, which arrived does not look past, and a drain waits for.
func (ep *Endpoint) wake() {
	ep.World.flushDeferred()
	if ep.drainNow() > 0 {
		runtime.Gosched() // the goroutines it woke, queued on our P
	}
}

// drainNow is drain under ep.mu, which it takes.
func (ep *Endpoint) drainNow() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.drain()
}

// progress drains the inbox of ep. When that completes receives other than own, it
// yields the processor: a goroutine woken by it waits on this P until we do.
func (ep *Endpoint) progress(own *Request) {
	if !ep.arrived() {
		return
	}
	if own != nil { // a spinning wait: whoever holds the lock drains, or we poll again
		if !ep.mu.TryLock() {
			return
		}
	} else {
		ep.mu.Lock()
	}
	n := ep.drain()
	ep.mu.Unlock()
	if own != nil && own.Done() {
		n--
	}
	if n > 0 {
		runtime.Gosched()
	}
}

// eagerCopy copies buf into a message with envelope k whose bytes are charged to the
// pool credit of the sending rank ep, or returns nil when the pool is full. The copy
// is recycled once received, without a Reset: this sets every field a copy uses, and
// the queues leave the others as they were (where nowhere, bnext nil).
func (ep *Endpoint) eagerCopy(buf []byte, k key) *Request {
	if !ep.reserve(chargeOf(len(buf))) {
		return nil
	}
	m := newCopy(len(buf), k)
	copy(m.buf(), buf)
	return m
}

// newCopy returns a pooled eager copy of envelope k with room for n bytes, for
// the caller to fill.
func newCopy(n int, k key) *Request {
	m := copies.Get().(*Request)
	m.flags = pooled
	switch {
	case n <= len(m.tiny):
		m.setBuf(m.tiny[:n])
	case n <= len(m.inline):
		m.setBuf(m.inline[:n])
	case cap(m.store) < n:
		m.store = make([]byte, n)
		fallthrough
	default:
		m.setBuf(m.store[:n])
	}
	m.kind, m.key = eagerKind, k
	return m
}

// release frees what a received or cancelled eager or buffered copy held, at its
// receiver ep. Caller holds ep.mu.
func (ep *Endpoint) release(m *Request) {
	if m.bseg != nil {
		m.bseg.free(m.boff)
		return
	}
	ep.giveBack(chargeOf(m.blen))
	if m.from != nil { // a copy of a remote message
		m.from, m.rid = nil, 0
	}
	if m.flags&pooled != 0 {
		if m.flags&cancellable != 0 {
			m.gen.Add(1) // a Cancel holding the old incarnation now leaves it alone
		}
		copies.Put(m) // eagerCopy sets every field a copy uses: no Reset on this core
	}
}

// giveBack returns n bytes of pool credit from a message received at ep, to the
// process in chunks, or at once when the pool is half used. Caller holds ep.mu.
func (ep *Endpoint) giveBack(n int64) {
	wd := ep.World
	ep.returned += n
	if ep.returned >= wd.chunk || 2*wd.pooled.Load() > wd.cfg.PoolCap {
		wd.pooled.Add(-ep.returned)
		ep.returned = 0
	}
}

// reserve takes n bytes of pool credit for the sending rank ep. Credit comes from the
// process in chunks and returns from the receivers in chunks, so that the shared
// counter is touched once per many messages. When the cap is reached, credit idle in
// endpoints is swept back first: the cap bounds the bytes held, not the credit lent.
// Once the pool is half used, an endpoint takes what it charges and no more, as
// giveBack returns it at once: else senders lending chunks while a sweep ran left
// credit idle that the sweep could not see, and a sender under the cap by a fifth
// found none (TestEagerSendsManyRanks, 400 ranks, under load).
func (ep *Endpoint) reserve(n int64) bool {
	wd := ep.World
	for {
		c := ep.credit.Load()
		if c >= n {
			if ep.credit.CompareAndSwap(c, c-n) {
				return true
			}
			continue
		}
		grant := n
		if 2*wd.pooled.Load() <= wd.cfg.PoolCap {
			grant = max(wd.chunk, n)
		}
		if !wd.lend(grant) {
			grant = n
			if seen := wd.sweeps.Load(); !wd.lend(n) {
				wd.sweep(seen)
				if !wd.lend(n) {
					return false
				}
			}
		}
		ep.credit.Add(grant)
	}
}

// full reports whether the pool cannot lend n more bytes now.
func (wd *World) full(n int64) bool { return wd.pooled.Load()+n > wd.cfg.PoolCap }

// lend hands out n bytes of pool credit if the cap allows.
func (wd *World) lend(n int64) bool {
	if wd.pooled.Add(n) > wd.cfg.PoolCap {
		wd.pooled.Add(-n)
		return false
	}
	return true
}

// sweep takes back the credit that endpoints hold unused, unless a sweep has ended
// since the caller saw the count seen (that one already took back what there was).
func (wd *World) sweep(seen uint64) {
	wd.sweepMu.Lock()
	defer wd.sweepMu.Unlock()
	if wd.sweeps.Load() != seen {
		return
	}
	for _, ep := range wd.Endpoints {
		if c := ep.credit.Swap(0); c != 0 {
			wd.pooled.Add(-c)
		}
	}
	wd.sweeps.Add(1)
}

// chargeOf is what an eager copy of n bytes costs the pool: its payload and the
// Request that holds it (a payload of up to 16 bytes sits inside the Request, so it
// is counted twice: what is counted is never less than what is held).
func chargeOf(n int) int64 { return int64(n) + envelopeCharge }
