package p2p

import (
	"runtime"
	"sync/atomic"
)

// The mailbox is a one-message slot in the receiver's first cache line, beside its
// inbox. A blocking sender of a small message writes envelope and data straight into
// it when it is free and the inbox is empty, and the receiver, which polls that line
// while it waits, finds the whole message there: a hand-off moves that one line each
// way instead of an inbox entry and a copy.
//
// Order: the mailbox is filled only while the inbox is empty, a sender whose earlier
// message still sits in it finds it full and uses the inbox, and a drain holds the
// mailbox from before it takes the inbox until it is done, so that nothing can be
// deposited in between: a message deposited before the drain is matched first, one
// deposited after waits for the next drain. A sender's messages are matched in the
// order sent.

// mailboxCap is the largest message the mailbox holds: what is left of the line.
const mailboxCap = 32

const (
	boxEmpty uint32 = iota
	boxBusy         // a sender is writing it
	boxFull
	boxHeld // a drain is running: no deposit until it ends
)

type mailbox struct {
	state atomic.Uint32
	n     uint32
	key   key
	data  [mailboxCap]byte
}

// deposit leaves buf, with envelope k, in ep's mailbox if it fits, the mailbox is
// free and the inbox empty; it reports whether it did. Like an eager copy, the
// message is charged to the pool credit of the sending rank from.
func (ep *Endpoint) deposit(buf []byte, k key, from *Endpoint) bool {
	charge := chargeOf(len(buf))
	if len(buf) > mailboxCap || len(buf) > ep.World.cfg.EagerLimit || ep.inbox.Load() != nil ||
		ep.box.state.Load() != boxEmpty || !from.reserve(charge) {
		return false
	}
	if !ep.box.state.CompareAndSwap(boxEmpty, boxBusy) {
		from.credit.Add(charge)
		return false
	}
	ep.box.key, ep.box.n = k, uint32(len(buf))
	copy(ep.box.data[:], buf)
	ep.box.state.Store(boxFull)
	// As for the inbox: we store the mailbox, then load parked.
	if ep.parked.Load() > 0 {
		ep.Progress()
	}
	return true
}

// holdBox takes the mailbox for the rest of a drain: a full one's message goes into
// the earliest matching posted receive or, as an eager copy that keeps its pool
// charge, onto the unexpected queue. It reports whether it completed a receive.
// Caller holds ep.mu, and calls releaseBox when the drain is done.
func (ep *Endpoint) holdBox() bool {
	for {
		switch ep.box.state.Load() {
		case boxEmpty:
			if ep.box.state.CompareAndSwap(boxEmpty, boxHeld) {
				return false
			}
		case boxBusy:
			runtime.Gosched() // a sender is between its claim and its last store
		case boxFull:
			data, k := ep.box.data[:ep.box.n], ep.box.key
			r := ep.takePosted(k)
			if r != nil {
				deliver(r, data, k)
				ep.giveBack(chargeOf(len(data)))
			} else {
				ep.queue(newCopy(data, k))
			}
			return r != nil // the state stays full, which keeps deposits out too
		}
	}
}

// releaseBox opens the mailbox again at the end of a drain. Caller holds ep.mu.
func (ep *Endpoint) releaseBox() { ep.box.state.Store(boxEmpty) }

// arrived reports whether a message waits in the mailbox or the inbox.
func (ep *Endpoint) arrived() bool {
	return ep.box.state.Load() == boxFull || ep.inbox.Load() != nil
}
