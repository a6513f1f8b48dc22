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
type bucket struct {
	head, tail *Request
	key        key
}

func (b *bucket) push(r *Request) {
	r.bnext, r.bkt = nil, b
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
	r.bnext, r.bkt = nil, nil
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
	index *index // nil until needed
}

// index is a queue's buckets by envelope. Hashing an envelope costs more than the
// rest of a match (goroutines of a rank streaming on a few tags spent a fifth of
// their time in the map), so an entry remembers its bucket, a bucket that empties
// stays for the envelope's next message (until empty ones outnumber both the entries
// and indexAt), and the bucket used last is looked at before the map.
type index struct {
	buckets map[key]*bucket
	empty   int     // buckets that hold no entry
	last    *bucket // the bucket used last
}

func (q *queue) push(r *Request) {
	q.order.push(r)
	q.n++
	if x := q.index; x != nil {
		b := x.bucket(r.key)
		if b.head == nil {
			x.empty--
		}
		b.push(r)
	}
}

// bucket returns the bucket of envelope k, making it if need be.
func (x *index) bucket(k key) *bucket {
	if b := x.last; b != nil && b.key == k {
		return b
	}
	b := x.buckets[k]
	if b == nil {
		b = &bucket{key: k}
		x.buckets[k] = b
		x.empty++
	}
	x.last = b
	return b
}

func (q *queue) remove(r *Request) {
	q.order.remove(r)
	q.n--
	x := q.index
	if x == nil {
		return
	}
	if q.n == 0 {
		q.index = nil
		r.bnext, r.bkt = nil, nil
		return
	}
	b := r.bkt
	b.remove(r)
	if b.head == nil {
		x.empty++
	}
	if x.empty > max(q.n, indexAt) {
		x.sweep()
	}
}

// sweep drops the empty buckets, after which there are at most twice as many
// buckets as entries: each sweep follows more than indexAt removals that emptied a
// bucket since the last, and visits fewer than twice as many buckets as it drops.
func (x *index) sweep() {
	for k, b := range x.buckets {
		if b.head == nil {
			delete(x.buckets, k)
		}
	}
	x.empty, x.last = 0, nil
}

// first returns the earliest entry whose envelope is exactly k.
func (q *queue) first(k key) *Request {
	x := q.index
	if x == nil {
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
		x = &index{buckets: make(map[key]*bucket, 2*indexAt)}
		for e := q.order.head; e != nil; e = e.next {
			x.bucket(e.key).push(e)
		}
		x.empty = 0
		q.index = x
	}
	if b := x.last; b != nil && b.key == k {
		return b.head
	}
	if b := x.buckets[k]; b != nil {
		x.last = b
		return b.head
	}
	return nil
}

// find returns the earliest entry of envelope k for which is reports true.
func (q *queue) find(k key, is func(*Request) bool) *Request {
	for e := q.first(k); e != nil; {
		if is(e) {
			return e
		}
		if e.bkt != nil { // indexed: the bucket holds the envelope's entries
			e = e.bnext
			continue
		}
		for e = e.next; e != nil && e.key != k; e = e.next {
		}
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

// Endpoint is one rank's matching engine: its posted receives, the messages that
// arrived before their receive, and an inbox where senders of small messages leave
// them without taking the lock. Whoever holds the lock drains the inbox first.
//
// The layout keeps what different cores write on different cache lines.
type Endpoint struct {
	// Written by senders of small messages, polled by the rank's waiters: one line.
	inbox  atomic.Pointer[Request] // eager copies, newest first, through next
	parked atomic.Int32            // the rank's goroutines parked until a drain
	smalls atomic.Int32            // small blocking sends to the rank, counted until it gets a mailbox
	box    atomic.Pointer[mailbox] // small messages of blocking sends, once the rank has had many
	wanted atomic.Uint64           // the tags the parked goroutines wait for (see wants)
	waits  atomic.Pointer[waits]   // their counts, once a goroutine of the rank parked
	_      [24]byte

	// Matching, under mu: what a sender touches to match a posted receive.
	mu     spinLock
	queued atomic.Uint32 // bumped at every unexpected message: a receive polling unposted watches it
	posted queue         // exact posted receives
	wild   list          // posted receives with AnySource or AnyTag, in post order
	seq    uint64        // post counter

	unexp      queue               // unexpected messages
	lanePosted [mailboxLanes]int32 // exact posted receives by the mailbox lane of their tag

	returned int64     // pool bytes of received eager copies, not yet given back
	probes   []*waiter // Probe calls waiting for a message
	_        [32]byte

	// Read by every sender to this rank, written once: a line that stays shared.
	World *World
	Rank  int       // rank in the world
	peer  *peer     // the proc of a rank of another proc; nil for ours
	bsend *bsendBuf // the buffer attached by this rank, if any
	_     [32]byte

	// Written by this rank at every send and receive: a line of its own, or each send would
	// take the line above away from the senders to this rank.
	credit  atomic.Int64 // pool bytes this rank may still charge for eager copies it sends
	spin    atomic.Int64 // adaptive spin budget in ns, see spinFor
	polling uint16       // lanes (bits) where a blocking receive polls before posting itself (under mu), see Recv
	_       [42]byte
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
	ep.lanePosted[laneOf(r.key.tag)]++
}

// takePosted removes and returns the earliest posted receive matching envelope k,
// or nil. Caller holds ep.mu.
func (ep *Endpoint) takePosted(k key) *Request {
	if ep.posted.n == 0 && ep.wild.head == nil {
		return nil
	}
	r := ep.posted.first(k)
	for w := ep.wild.head; w != nil; w = w.next {
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
	ep.queued.Add(1)
	for _, w := range ep.probes {
		w.ring()
	}
}

// dequeue takes r out of whichever queue holds it. Caller holds ep.mu.
func (ep *Endpoint) dequeue(r *Request) {
	switch r.where {
	case postedHere:
		ep.posted.remove(r)
		ep.lanePosted[laneOf(r.key.tag)]--
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
