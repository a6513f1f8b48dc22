package p2p

import (
	"sync"
	"sync/atomic"
	"time"
)

// list is an intrusive doubly linked FIFO of Requests through their links[i].
type list struct {
	head, tail *Request
	i          uint8
}

func (l *list) push(r *Request) {
	lk := &r.links[l.i]
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		l.tail.links[l.i].next = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *list) remove(r *Request) {
	lk := &r.links[l.i]
	if lk.prev != nil {
		lk.prev.links[l.i].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[l.i].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.next, lk.prev = nil, nil
}

// indexAt is the queue length past which a queue indexes its entries by envelope:
// short queues are scanned (cheaper than hashing), long ones looked up in O(1).
const indexAt = 16

// queue holds Requests in arrival (or post) order through links[1] and, while it is
// long, also in one bucket per exact envelope through links[0].
type queue struct {
	order list
	n     int
	index map[key]*list // nil while n <= indexAt
}

func newQueue() queue { return queue{order: list{i: 1}} }

func (q *queue) push(r *Request) {
	q.order.push(r)
	q.n++
	switch {
	case q.index != nil:
		q.bucket(r.key).push(r)
	case q.n > indexAt:
		q.index = make(map[key]*list, 2*indexAt)
		for e := q.order.head; e != nil; e = e.links[1].next {
			q.bucket(e.key).push(e)
		}
	}
}

func (q *queue) bucket(k key) *list {
	b := q.index[k]
	if b == nil {
		b = &list{}
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
	for e := q.order.head; e != nil; e = e.links[1].next {
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
	for e := q.order.head; e != nil; e = e.links[1].next {
		if matches(pat, e.key) {
			return e
		}
	}
	return nil
}

// Endpoint is one rank's matching engine: its posted receives and the messages that
// arrived before their receive. Senders lock the receiver's endpoint to match.
type Endpoint struct {
	mu     sync.Mutex
	posted queue // exact posted receives
	wild   list  // posted receives with AnySource or AnyTag, in post order
	unexp  queue // unexpected messages
	seq    uint64
	spare  []*Request // recycled eager copies
	probes []*waiter  // Probe calls waiting for a message
	bsend  *bsendBuf  // the buffer attached by this rank, if any
	credit int64      // bytes of the process's pool this endpoint may hold
	held   int64      // bytes its queued eager copies hold

	spin  atomic.Int64 // adaptive spin budget in ns, see await
	World *World
	Rank  int // rank in the world
}

func (ep *Endpoint) init(wd *World, rank int) {
	ep.World, ep.Rank = wd, rank
	ep.posted, ep.unexp, ep.wild = newQueue(), newQueue(), list{i: 1}
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
	for w := ep.wild.head; w != nil; w = w.links[1].next {
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
	var m *Request
	if n := len(ep.spare); recycle && n > 0 {
		m = ep.spare[n-1]
		ep.spare = ep.spare[:n-1]
	} else {
		m = &Request{}
	}
	if cap(m.store) < len(buf) {
		m.store = make([]byte, len(buf))
	}
	m.buf = m.store[:len(buf)]
	copy(m.buf, buf)
	m.kind, m.key, m.charge, m.pooled = eagerKind, k, charge, recycle
	return m
}

// release frees what a received or cancelled eager copy held. Caller holds ep.mu.
func (ep *Endpoint) release(m *Request) {
	if m.bseg != nil {
		m.bseg.free(m.boff)
		return
	}
	ep.uncharge(m.charge)
	if m.pooled && len(ep.spare) < maxSpare {
		m.op = op{store: m.store}
		ep.spare = append(ep.spare, m)
	}
}

// spinFloor is the least an adaptive spin shrinks to, so it can grow back.
const spinFloor = 500 * time.Nanosecond
