package p2p

import (
	"sync"
	"sync/atomic"
)

// list is an intrusive doubly linked FIFO of Requests through their order links.
type list struct{ head, tail *Request }

func (l *list) push(r *Request) {
	r.order.prev, r.order.next = l.tail, nil
	if l.tail != nil {
		l.tail.order.next = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *list) remove(r *Request) {
	if r.order.prev != nil {
		r.order.prev.order.next = r.order.next
	} else {
		l.head = r.order.next
	}
	if r.order.next != nil {
		r.order.next.order.prev = r.order.prev
	} else {
		l.tail = r.order.prev
	}
	r.order = links{}
}

// bucket is a singly linked FIFO of the Requests of one envelope, through bnext.
// Matching always takes its head (the earliest of an envelope is the earliest that
// any pattern matching it can take), so only Cancel ever removes from its middle.
type bucket struct{ head, tail *Request }

func (b *bucket) push(r *Request) {
	r.bnext = nil
	if b.tail != nil {
		b.tail.bnext = r
	} else {
		b.head = r
	}
	b.tail = r
}

func (b *bucket) remove(r *Request) {
	var prev *Request
	for e := b.head; e != r; e = e.bnext {
		prev = e
	}
	if prev != nil {
		prev.bnext = r.bnext
	} else {
		b.head = r.bnext
	}
	if b.tail == r {
		b.tail = prev
	}
	r.bnext = nil
}

// indexAt is the queue length past which a queue indexes its entries by envelope:
// short queues are scanned (cheaper than hashing), long ones looked up in O(1).
const indexAt = 16

// queue holds Requests in arrival (or post) order and, while it is long, also in one
// bucket per exact envelope.
type queue struct {
	order list
	n     int
	index map[key]*bucket // nil while n <= indexAt
}

func (q *queue) push(r *Request) {
	q.order.push(r)
	q.n++
	switch {
	case q.index != nil:
		q.bucket(r.key).push(r)
	case q.n > indexAt:
		q.index = make(map[key]*bucket, 2*indexAt)
		for e := q.order.head; e != nil; e = e.order.next {
			q.bucket(e.key).push(e)
		}
	}
}

func (q *queue) bucket(k key) *bucket {
	b := q.index[k]
	if b == nil {
		b = &bucket{}
		q.index[k] = b
	}
	return b
}

func (q *queue) remove(r *Request) {
	q.order.remove(r)
	q.n--
	if q.index == nil {
		return
	}
	if q.n == 0 {
		q.index = nil
		return
	}
	b := q.index[r.key]
	b.remove(r)
	if b.head == nil {
		delete(q.index, r.key)
	}
}

// first returns the earliest entry whose envelope is exactly k.
func (q *queue) first(k key) *Request {
	if q.index != nil {
		if b := q.index[k]; b != nil {
			return b.head
		}
		return nil
	}
	for e := q.order.head; e != nil; e = e.order.next {
		if e.key == k {
			return e
		}
	}
	return nil
}

// match returns the earliest entry whose envelope matches pattern pat.
func (q *queue) match(pat key) *Request {
	if !wildcard(pat) {
		return q.first(pat)
	}
	for e := q.order.head; e != nil; e = e.order.next {
		if matches(pat, e.key) {
			return e
		}
	}
	return nil
}

// Endpoint is one rank's matching engine: its posted receives and the messages that
// arrived before their receive. Senders lock the receiver's endpoint to match.
type Endpoint struct {
	// What a sender touches to match a posted receive: one cache line.
	mu     sync.Mutex
	posted queue  // exact posted receives
	wild   list   // posted receives with AnySource or AnyTag, in post order
	seq    uint64 // post counter

	// What a sender touches to queue an unexpected message: the next line.
	unexp  queue
	spare  *Request // recycled eager copies, through bnext
	nspare int
	held   int64 // bytes its queued eager copies hold
	credit int64 // bytes of the process's pool this endpoint may hold

	probes []*waiter    // Probe calls waiting for a message
	bsend  *bsendBuf    // the buffer attached by this rank, if any
	World  *World       //
	Rank   int          // rank in the world
	_      [16]byte     // ends the line: spin below is the waiting rank's alone
	spin   atomic.Int64 // adaptive spin budget in ns, see spinFor
	_      [56]byte     // pads the Endpoint to 256 bytes, whole cache lines
}

func (ep *Endpoint) init(wd *World, rank int) {
	ep.World, ep.Rank = wd, rank
	ep.spin.Store(int64(wd.cfg.Spin))
}

func wildcard(pat key) bool { return pat.src == AnySource || pat.tag == AnyTag }

func matches(pat, k key) bool {
	return pat.ctx == k.ctx && (pat.src == k.src || pat.src == AnySource) && (pat.tag == k.tag || pat.tag == AnyTag)
}

// post queues a receive. Caller holds ep.mu.
func (ep *Endpoint) post(r *Request) {
	ep.seq++
	r.seq = ep.seq
	r.ep = ep
	if wildcard(r.key) {
		r.where = wildHere
		ep.wild.push(r)
		return
	}
	r.where = postedHere
	ep.posted.push(r)
}

// takePosted removes and returns the earliest posted receive matching envelope k,
// or nil. Caller holds ep.mu.
func (ep *Endpoint) takePosted(k key) *Request {
	r := ep.posted.first(k)
	for w := ep.wild.head; w != nil; w = w.order.next {
		if r != nil && w.seq > r.seq {
			break
		}
		if matches(w.key, k) {
			r = w
			break
		}
	}
	if r != nil {
		ep.dequeue(r)
	}
	return r
}

// queue adds an unexpected message. Caller holds ep.mu.
func (ep *Endpoint) queue(m *Request) {
	m.ep = ep
	m.where = unexpHere
	ep.unexp.push(m)
	for _, w := range ep.probes {
		w.ring()
	}
}

// dequeue takes r out of whichever queue holds it. Caller holds ep.mu.
func (ep *Endpoint) dequeue(r *Request) {
	switch r.where {
	case postedHere:
		ep.posted.remove(r)
	case wildHere:
		ep.wild.remove(r)
	case unexpHere:
		ep.unexp.remove(r)
	}
	r.where = nowhere
}

// withdraw takes r out of its queue if it is still there, and reports whether it was.
func (ep *Endpoint) withdraw(r *Request) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if r.where == nowhere {
		return false
	}
	ep.dequeue(r)
	return true
}

// creditChunk is how much pool credit an endpoint takes from, or gives back to, the
// process at a time, so that the shared counter is touched once per many messages.
const creditChunk = 64 << 10

// charge reserves n pool bytes for an eager copy queued here. Caller holds ep.mu.
func (ep *Endpoint) charge(n int64) bool {
	if need := ep.held + n - ep.credit; need > 0 {
		need = max(need, creditChunk)
		wd := ep.World
		if wd.pooled.Add(need) > wd.cfg.PoolCap {
			wd.pooled.Add(-need)
			return false
		}
		ep.credit += need
	}
	ep.held += n
	return true
}

// uncharge returns n pool bytes; credit beyond one spare chunk goes back to the
// process, and all of it once the endpoint holds nothing while the pool is half used.
// Caller holds ep.mu.
func (ep *Endpoint) uncharge(n int64) {
	ep.held -= n
	keep := ep.held + creditChunk
	wd := ep.World
	if ep.held == 0 && 2*wd.pooled.Load() > wd.cfg.PoolCap {
		keep = 0
	}
	if extra := ep.credit - keep; extra > 0 {
		ep.credit -= extra
		wd.pooled.Add(-extra)
	}
}

// maxSpare bounds the eager copies an endpoint keeps for reuse.
const maxSpare = 8

// eagerCopy copies buf into a pool-charged message with envelope k, or returns nil
// when the pool is full. recycle says whether the endpoint may reuse the message once
// received; a user's request keeps pointing at its copy, for Cancel. Caller holds ep.mu.
func (ep *Endpoint) eagerCopy(buf []byte, k key, recycle bool) *Request {
	charge := int64(len(buf)) + envelopeCharge
	if !ep.charge(charge) {
		return nil
	}
	m := ep.spare
	if recycle && m != nil {
		ep.spare, m.bnext = m.bnext, nil
		ep.nspare--
	} else {
		m = &Request{}
	}
	if cap(m.store) < len(buf) {
		m.store = make([]byte, len(buf))
	}
	m.setBuf(m.store[:len(buf)])
	copy(m.store, buf)
	m.kind, m.key, m.charge = eagerKind, k, charge
	if recycle {
		m.flags = pooled
	}
	return m
}

// release frees what a received or cancelled eager copy held. Caller holds ep.mu.
func (ep *Endpoint) release(m *Request) {
	if m.bseg != nil {
		m.bseg.free(m.boff)
		return
	}
	ep.uncharge(m.charge)
	if m.flags&pooled != 0 && ep.nspare < maxSpare {
		m.Reset()
		m.bnext, ep.spare = ep.spare, m
		ep.nspare++
	}
}
