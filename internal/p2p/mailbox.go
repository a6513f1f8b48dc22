package p2p

import (
	"runtime"
	"sync/atomic"
)

// The mailbox is a one-message slot in the first cache line of each lane, beside
// its inbox. A blocking sender of a small message writes envelope and data straight
// into it when it is free and the inbox is empty, and the receiver, which polls that
// line while it waits, finds the whole message there: a hand-off moves that one line
// each way instead of an inbox entry and a copy.
//
// Order: the mailbox is filled only while the inbox is empty, a sender whose earlier
// message still sits in it finds it full and uses the inbox, and a drain holds the
// mailbox from before it takes the inbox until it is done, so that nothing can be
// deposited in between: a message deposited before the drain is matched first, one
// deposited after waits for the next drain. A sender's messages are matched in the
// order sent.

// mailboxCap is the largest message the mailbox holds: what is left of the line.
const mailboxCap = 20

const (
	boxEmpty uint32 = iota
	boxBusy         // a sender is writing it
	boxFull
	boxHeld // a drain is running: no deposit until it ends
)

type mailbox struct {
	state atomic.Uint32
	n     uint32
	stamp uint64 // the message's stamp (see Endpoint)
	key   key
	data  [mailboxCap]byte
}

// deposit leaves buf, with envelope k, in the mailbox of its lane at ep if it fits,
// the mailbox is free and the inbox empty; it reports whether it did. Like an eager
// copy, the message is charged to the pool credit of the sending rank from.
func (ep *Endpoint) deposit(buf []byte, k key, from *Endpoint) bool {
	l := ep.lane(k.tag)
	charge := chargeOf(len(buf))
	if len(buf) > mailboxCap || len(buf) > ep.World.cfg.EagerLimit || l.inbox.Load() != nil ||
		l.box.state.Load() != boxEmpty || !from.reserve(charge) {
		return false
	}
	if !l.box.state.CompareAndSwap(boxEmpty, boxBusy) {
		from.credit.Add(charge)
		return false
	}
	l.box.key, l.box.n, l.box.stamp = k, uint32(len(buf)), from.stamp()
	copy(l.box.data[:], buf)
	l.box.state.Store(boxFull)
	// As for the inbox: we store the mailbox, then load parked.
	if l.parked.Load() > 0 {
		ep.World.flushDeferred()
		ep.progress(1<<laneOf(k.tag), nil)
	}
	return true
}

// holdBox takes the mailbox of l for the rest of a drain and reports whether a
// message is in it; the state of a full one stays full, which keeps deposits out
// too. Caller holds l, and calls releaseBox when the drain is done.
func (l *lane) holdBox() bool {
	for {
		switch l.box.state.Load() {
		case boxEmpty:
			if l.box.state.CompareAndSwap(boxEmpty, boxHeld) {
				return false
			}
		case boxBusy:
			runtime.Gosched() // a sender is between its claim and its last store
		case boxFull:
			return true
		}
	}
}

// boxCopy returns the message in the held mailbox of l as an eager copy, which
// keeps its pool charge.
func (l *lane) boxCopy() *Request {
	m := newCopy(l.box.data[:l.box.n], l.box.key)
	m.seq = l.box.stamp
	return m
}

// routeBox puts the message in the held mailbox of l into the earliest matching
// posted receive, straight from the mailbox, or onto the unexpected queue as a
// copy; it reports whether it completed a receive. Caller holds l.
func (ep *Endpoint) routeBox(l *lane) bool {
	data, k := l.box.data[:l.box.n], l.box.key
	if r := ep.takePosted(k); r != nil {
		deliver(r, data, k)
		l.giveBack(ep.World, chargeOf(len(data)))
		return true
	}
	ep.queue(l.boxCopy())
	return false
}

// releaseBox opens the mailbox again at the end of a drain. Caller holds l.
func (l *lane) releaseBox() { l.box.state.Store(boxEmpty) }
