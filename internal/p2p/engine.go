package p2p

import "sync"

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

// buckets index Requests by exact envelope, so that a receive never scans messages of
// other envelopes: the common case costs one map lookup whatever is queued.
type buckets map[key]*list

// Endpoint is one rank's matching engine: its posted receives and the messages that
// arrived before their receive. Senders lock the receiver's endpoint to match.
type Endpoint struct {
	mu      sync.Mutex
	posted  buckets // exact posted receives
	wild    list    // posted receives with AnySource or AnyTag, in post order
	unexp   buckets // unexpected messages by envelope
	arrived list    // unexpected messages in arrival order, for wildcard receives
	seq     uint64  // post counter
	spare   []*list // emptied buckets kept for reuse
	probers []*waiter
	bsend   *bsendBuf // the buffer attached by this rank, if any

	World *World
	Rank  int // rank in the world
}

const maxSpare = 8

func (ep *Endpoint) bucket(bs *buckets, k key) *list {
	if *bs == nil {
		*bs = make(buckets)
	}
	b := (*bs)[k]
	if b == nil {
		if n := len(ep.spare); n > 0 {
			b = ep.spare[n-1]
			ep.spare = ep.spare[:n-1]
		} else {
			b = &list{}
		}
		(*bs)[k] = b
	}
	return b
}

func (ep *Endpoint) unbucket(bs buckets, k key, r *Request) {
	b := bs[k]
	b.remove(r)
	if b.head == nil {
		delete(bs, k)
		if len(ep.spare) < maxSpare {
			ep.spare = append(ep.spare, b)
		}
	}
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
	ep.bucket(&ep.posted, r.key).push(r)
}

// takePosted removes and returns the earliest posted receive matching envelope k,
// or nil. Caller holds ep.mu.
func (ep *Endpoint) takePosted(k key) *Request {
	var r *Request
	if b := ep.posted[k]; b != nil {
		r = b.head
	}
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
	ep.bucket(&ep.unexp, m.key).push(m)
	ep.arrived.push(m)
	for _, w := range ep.probers {
		w.ring()
	}
}

// findUnexpected returns the earliest unexpected message matching pattern pat, or nil.
// Caller holds ep.mu.
func (ep *Endpoint) findUnexpected(pat key) *Request {
	if !wildcard(pat) {
		if b := ep.unexp[pat]; b != nil {
			return b.head
		}
		return nil
	}
	for m := ep.arrived.head; m != nil; m = m.links[1].next {
		if matches(pat, m.key) {
			return m
		}
	}
	return nil
}

// dequeue takes r out of whichever queue holds it. Caller holds ep.mu.
func (ep *Endpoint) dequeue(r *Request) {
	switch r.where {
	case postedHere:
		ep.unbucket(ep.posted, r.key, r)
	case wildHere:
		ep.wild.remove(r)
	case unexpHere:
		ep.unbucket(ep.unexp, r.key, r)
		ep.arrived.remove(r)
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
