package p2p

import (
	"sync/atomic"
)

// list is an intrusive doubly linked FIFO of Requests through their order links.
type list struct{ head, tail *Request }

func (l *list) push(r *Request) {
	r.prev, r.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *list) remove(r *Request) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.next, r.prev = nil, nil
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

// indexAt is how many entries of other envelopes a search may pass before the queue
// starts indexing its entries by envelope: short scans are cheaper than hashing (and
// the common case, the head matching, costs nothing), long ones become O(1) lookups.
const indexAt = 16

// queue holds Requests in arrival (or post) order and, once a search has had to pass
// many entries of other envelopes, also in one bucket per exact envelope, until it
// empties again.
type queue struct {
	order list
	n     int
	index map[key]*bucket // nil until needed
}

func (q *queue) push(r *Request) {
	q.order.push(r)
	q.n++
	if q.index != nil {
		q.bucket(r.key).push(r)
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
	if q.index == nil {
		e := q.order.head
		for i := 0; e != nil && i < indexAt; i++ {
			if e.key == k {
				return e
			}
			e = e.next
		}
		if e == nil {
			return nil
		}
		q.index = make(map[key]*bucket, 2*indexAt)
		for e := q.order.head; e != nil; e = e.next {
			q.bucket(e.key).push(e)
		}
	}
	if b := q.index[k]; b != nil {
		return b.head
	}
	return nil
}

// match returns the earliest entry whose envelope matches pattern pat.
func (q *queue) match(pat key) *Request {
	if !wildcard(pat) {
		return q.first(pat)
	}
	for e := q.order.head; e != nil; e = e.next {
		if matches(pat, e.key) {
			return e
		}
	}
	return nil
}

// Endpoint is one rank's matching engine, split by tag into lanes (see lane). A
// receive or probe with AnyTag spans the lanes: while one is pending, every
// operation locks every lane, and messages are ordered across lanes by their
// stamps, which each sender takes from a counter of its own in the order it sends.
//
// The layout keeps what different cores write on different cache lines.
type Endpoint struct {
	lanes [lanes]lane

	// AnyTag receives and probes, which span the lanes: changed only with every
	// lane locked, so that holding one lane's lock is enough to read them.
	anyTag    atomic.Int32 // pending AnyTag receives and probes: while any, operations lock every lane
	anyRecvs  list         // posted receives with AnyTag, in post order
	anyProbes []*waiter    // Probe calls with AnyTag waiting for a message
	epoch     uint64       // AnyTag receives posted so far: orders them against the lanes' receives
	_         [8]byte

	// Read by every sender to this rank, written once: a line that stays shared.
	World *World
	Rank  int                      // rank in the world
	peer  *peer                    // the proc of a rank of another proc; nil for ours
	bsend atomic.Pointer[bsendBuf] // the buffer attached by this rank, if any
	_     [32]byte

	// Written by this rank at every send: a line of its own, or each send would
	// take the line above away from the senders to this rank.
	credit atomic.Int64  // pool bytes this rank may still charge for eager copies it sends
	sent   atomic.Uint64 // messages sent so far: each one's stamp
	spin   atomic.Int64  // adaptive spin budget in ns, see spinFor
	_      [40]byte
}

func (ep *Endpoint) init(wd *World, rank int) {
	ep.World, ep.Rank = wd, rank
	ep.spin.Store(int64(wd.cfg.Spin))
}

// stamp numbers a message this rank sends, for AnyTag matching at its receiver.
func (ep *Endpoint) stamp() uint64 { return ep.sent.Add(1) }

func wildcard(pat key) bool { return pat.src == AnySource || pat.tag == AnyTag }

func matches(pat, k key) bool {
	return pat.ctx == k.ctx && (pat.src == k.src || pat.src == AnySource) && (pat.tag == k.tag || pat.tag == AnyTag)
}

// laneSeqBits is the low bits of a posted receive's seq: its lane's post count; the
// high bits are the AnyTag receives posted before it (epoch).
const laneSeqBits = 40

// post queues a receive. Caller holds its lane (every lane for AnyTag).
func (ep *Endpoint) post(r *Request) {
	r.ep = ep
	if r.key.tag == AnyTag {
		ep.epoch++
		r.seq, r.wakes, r.where = ep.epoch<<laneSeqBits, allLanes, anyHere
		ep.anyRecvs.push(r)
		ep.anyTag.Add(1)
		return
	}
	i := laneOf(r.key.tag)
	l := &ep.lanes[i]
	l.seq++
	r.seq, r.wakes = ep.epoch<<laneSeqBits|l.seq, 1<<i
	if r.key.src == AnySource {
		r.where = wildHere
		l.wild.push(r)
		return
	}
	r.where = postedHere
	l.posted.push(r)
}

// takePosted removes and returns the earliest posted receive matching envelope k,
// or nil. Caller holds k's lane.
func (ep *Endpoint) takePosted(k key) *Request {
	l := ep.lane(k.tag)
	r := l.posted.first(k)
	for _, wild := range [...]*list{&l.wild, &ep.anyRecvs} {
		for w := wild.head; w != nil; w = w.next {
			if r != nil && w.seq > r.seq {
				break
			}
			if matches(w.key, k) {
				r = w
				break
			}
		}
	}
	if r != nil {
		ep.dequeue(r)
	}
	return r
}

// queue adds an unexpected message. Caller holds its lane.
func (ep *Endpoint) queue(m *Request) {
	l := ep.lane(m.key.tag)
	m.ep = ep
	m.where = unexpHere
	l.unexp.push(m)
	for _, w := range l.probes {
		w.ring()
	}
	for _, w := range ep.anyProbes {
		w.ring()
	}
}

// firstMsg returns the earliest unexpected message matching pat. For AnyTag that
// is the least stamp among every lane's matches: a sender's messages are stamped in
// the order sent (those of different senders have no order to keep). Caller holds
// pat's lane (every lane for AnyTag).
func (ep *Endpoint) firstMsg(pat key) *Request {
	if pat.tag != AnyTag {
		return ep.lane(pat.tag).unexp.match(pat)
	}
	var first *Request
	for i := range ep.lanes {
		for e := ep.lanes[i].unexp.order.head; e != nil; e = e.next {
			if matches(pat, e.key) && (first == nil || e.seq < first.seq) {
				first = e
			}
		}
	}
	return first
}

// dequeue takes r out of whichever queue holds it. Caller holds its lane.
func (ep *Endpoint) dequeue(r *Request) {
	switch r.where {
	case postedHere:
		ep.lane(r.key.tag).posted.remove(r)
	case wildHere:
		ep.lane(r.key.tag).wild.remove(r)
	case anyHere:
		ep.anyRecvs.remove(r)
		ep.anyTag.Add(-1)
	case unexpHere:
		ep.lane(r.key.tag).unexp.remove(r)
	}
	r.where = nowhere
}

// withdraw takes r out of its queue if it is still there, and reports whether it was.
func (ep *Endpoint) withdraw(r *Request) bool {
	h := ep.lockEvery()
	defer h.unlock()
	if r.where == nowhere {
		return false
	}
	ep.dequeue(r)
	return true
}
