package p2p

import (
	"cmp"
	"math/bits"
	"slices"
	"sync/atomic"
)

// lanes is how many matching engines an endpoint has, each for the tags equal to
// its index modulo lanes. Goroutines of one rank that use different tags (Thakur and
// Gropp's 4T-4T) then take different locks, drain different inboxes and park on
// different counts, as ranks of their own would, instead of taking turns at one.
const lanes = 4

// allLanes is the lane mask of every lane.
const allLanes = 1<<lanes - 1

// A lane is the matching engine of its share of the tags: its posted receives, the
// messages that arrived before their receive, and an inbox where senders of small
// messages leave them without taking the lock. Whoever holds the lock drains the
// inbox first.
type lane struct {
	// Written by senders of small messages, polled by the rank's waiters: one line.
	inbox  atomic.Pointer[Request] // eager copies, newest first, through next
	parked atomic.Int32            // the rank's goroutines parked until a drain
	box    mailbox                 // one small message

	// Matching, under mu: what a sender touches to match a posted receive.
	mu     spinLock
	posted queue  // exact posted receives
	wild   list   // posted receives with AnySource, in post order
	seq    uint64 // post counter

	unexp    queue     // unexpected messages
	returned int64     // pool bytes of received eager copies, not yet given back
	probes   []*waiter // Probe calls waiting for a message
}

func laneOf(tag int32) int { return int(uint32(tag) % lanes) }

// lane returns the lane of tag.
func (ep *Endpoint) lane(tag int32) *lane { return &ep.lanes[laneOf(tag)] }

// held is what an operation has locked: the lane l of its tag or, with all, every
// lane (l is then nil for AnyTag).
type held struct {
	ep  *Endpoint
	l   *lane
	all bool
}

// lock locks what an operation with tag needs: its lane or, for AnyTag and while
// an AnyTag receive or probe is pending, every lane.
func (ep *Endpoint) lock(tag int32) held {
	if tag == AnyTag {
		return ep.lockEvery()
	}
	l := ep.lane(tag)
	if ep.anyTag.Load() == 0 {
		l.mu.Lock()
		if ep.anyTag.Load() == 0 { // it changes only under every lane's lock
			return held{ep, l, false}
		}
		l.mu.Unlock()
	}
	h := ep.lockEvery()
	h.l = l
	return h
}

// lockEvery locks every lane, in order.
func (ep *Endpoint) lockEvery() held {
	for i := range ep.lanes {
		ep.lanes[i].mu.Lock()
	}
	return held{ep, nil, true}
}

func (h held) unlock() {
	if !h.all {
		h.l.mu.Unlock()
		return
	}
	for i := range h.ep.lanes {
		h.ep.lanes[i].mu.Unlock()
	}
}

// drain moves what arrived in the held lanes into the engine and returns how many
// receives it completed.
func (h held) drain() int {
	if !h.all {
		return h.ep.drainLane(h.l)
	}
	return h.ep.drainAll()
}

// drainLane moves the mailbox and then the inbox of l into the engine in arrival
// order: each message goes into the earliest matching posted receive, or onto the
// unexpected queue. It returns how many receives it completed. Caller holds l, and
// no AnyTag receive is posted (it would need the other lanes' messages first).
func (ep *Endpoint) drainLane(l *lane) (completed int) {
	if !l.arrived() {
		return 0
	}
	if l.holdBox() && ep.routeBox(l) {
		completed++
	}
	defer l.releaseBox()
	if l.inbox.Load() == nil {
		return completed
	}
	for m := fifo(l.inbox.Swap(nil)); m != nil; {
		next := m.next
		m.next = nil
		if ep.route(m) {
			completed++
		}
		m = next
	}
	return completed
}

// drainAll drains every lane, which the caller holds, into the engine: their
// mailboxes and inboxes together, by stamp, so that an AnyTag receive gets a
// sender's messages in the order sent whatever their lanes. It passes over the
// lanes until a pass finds nothing: a message may land in a lane already passed
// while a later one of its sender lands in a lane not yet passed.
func (ep *Endpoint) drainAll() (completed int) {
	var some [16]*Request
	arrived := some[:0]
	var boxes uint8 // the lanes whose mailbox we hold
	for {
		before := len(arrived)
		for i := range ep.lanes {
			l := &ep.lanes[i]
			if boxes&(1<<i) == 0 && l.box.state.Load() != boxEmpty {
				boxes |= 1 << i
				if l.holdBox() {
					arrived = append(arrived, l.boxCopy())
				}
			}
			if l.inbox.Load() != nil {
				for m := fifo(l.inbox.Swap(nil)); m != nil; m = m.next {
					arrived = append(arrived, m)
				}
			}
		}
		if len(arrived) == before {
			break
		}
	}
	for i := range ep.lanes {
		if boxes&(1<<i) != 0 {
			ep.lanes[i].releaseBox()
		}
	}
	slices.SortStableFunc(arrived, func(a, b *Request) int { return cmp.Compare(a.seq, b.seq) })
	for _, m := range arrived {
		m.next = nil
		if ep.route(m) {
			completed++
		}
	}
	return completed
}

// fifo reverses an inbox, newest first, into arrival order.
func fifo(m *Request) *Request {
	var out *Request
	for m != nil {
		next := m.next
		m.next = out
		out, m = m, next
	}
	return out
}

// route puts the message m into the earliest matching posted receive, releasing m,
// or onto the unexpected queue; it reports whether it completed a receive. Caller
// holds m's lane.
func (ep *Endpoint) route(m *Request) bool {
	if r := ep.takePosted(m.key); r != nil {
		deliver(r, m.buf(), m.key)
		ep.release(m)
		return true
	}
	ep.queue(m)
	return false
}

// arrived reports whether a message waits in the mailbox or the inbox.
func (l *lane) arrived() bool {
	return l.box.state.Load() == boxFull || l.inbox.Load() != nil
}

// arrivedIn reports whether a message waits in any lane of mask. A spinning wait
// polls it: one lane costs one pass, as an endpoint without lanes would.
func (ep *Endpoint) arrivedIn(mask uint8) bool {
	for m := mask; m != 0; m &= m - 1 {
		if ep.lanes[bits.TrailingZeros8(m)%lanes].arrived() {
			return true
		}
	}
	return false
}

// lanesOf is the lane mask of tag: one lane, or every lane for AnyTag.
func lanesOf(tag int32) uint8 {
	if tag == AnyTag {
		return allLanes
	}
	return 1 << laneOf(tag)
}

// parkOn counts a goroutine of the rank parked on the lanes of mask (add -1 when it
// leaves), so that senders to those lanes drain them for it.
func (ep *Endpoint) parkOn(mask uint8, add int32) {
	for i := range ep.lanes {
		if mask&(1<<i) != 0 {
			ep.lanes[i].parked.Add(add)
		}
	}
}

// unexpected returns the first unexpected message of any lane for which is holds.
// Caller holds every lane.
func (ep *Endpoint) unexpected(is func(*Request) bool) *Request {
	for i := range ep.lanes {
		for m := ep.lanes[i].unexp.order.head; m != nil; m = m.next {
			if is(m) {
				return m
			}
		}
	}
	return nil
}
