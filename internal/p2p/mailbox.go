package p2p

import (
	"runtime"
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/spin"
)

// The mailbox is a receiver's ring of one-line slots for small messages, made once
// it has had a few through the inbox. A blocking sender claims the next slot and writes
// envelope and data into it without the receiver's lock; the receiver, which polls
// its next slot while it waits, finds the whole message in that one line, and a
// receive that the message matches takes it straight from the slot, with no queue
// entry and no pooled copy. Only senders write a slot: the receiver frees slots by
// moving its head, which senders read only when the room they last saw is used up.
// So a hand-off moves one line once, as a bare spin on one word does: a receiver that
// marked each slot free again waited for the line to come back to it first (8-byte
// ping-pong round trip 0.58 against 0.86 µs while the VM's line transfers were slow;
// no difference while they were fast). A sender running
// ahead fills the ring, then waits for room as long as the receiver keeps taking
// messages, and falls back to an eager copy in the inbox only when it does not: a
// stream stays within the ring's lines, in cache, instead of growing a queue that
// does not.
//
// Order. A sender claims a slot only while the inbox is empty, and stamps what it
// pushes into the inbox with the mailbox's tail (Request.seq). A drain takes the
// ring's published slots, then the inbox; before it matches an inbox message it
// takes every slot claimed before that message's stamp. So a sender's ring message
// older than its inbox message is matched first, and one newer was claimed once
// the inbox was taken, after the stamps of all that the drain matches from it. A
// direct send, which queues itself after a drain, first takes every slot claimed
// so far (takeBox up to the tail). A sender's messages are matched in the order sent.

// mailboxCap is the largest message a slot holds: what is left of its line.
const mailboxCap = 40

// mailboxSlots is the ring's size: how far a blocking sender runs ahead of its
// receiver before it waits.
const mailboxSlots = 64

// slot is one message of the ring. seq is pos+1 once the message at position pos is
// published: the slot is free for pos+mailboxSlots once head has passed pos.
type slot struct {
	seq  atomic.Uint64
	key  key
	n    uint32
	data [mailboxCap]byte
}

type mailbox struct {
	tail  atomic.Uint64 // next position to claim: the senders' line
	room  atomic.Uint64 // head+mailboxSlots as a sender last read it: positions below it are free
	_     [48]byte
	head  atomic.Uint64 // next position to take: the receiver's line
	moves atomic.Uint64 // bumped whenever the receiver takes messages from its queue or inbox
	stuck atomic.Bool   // a sender waited a whole spin for the receiver in vain
	_     [44]byte
	slot  [mailboxSlots]slot
}

func newMailbox() *mailbox {
	b := new(mailbox)
	b.room.Store(mailboxSlots)
	return b
}

// mailboxAfter is how many small blocking sends a rank receives through the inbox
// before it gets a mailbox: a rank that receives a few (a million ranks passing one
// message round a ring) does without its memory.
const mailboxAfter = 64

// mailbox returns ep's mailbox, making it once ep has had mailboxAfter small
// messages, or nil.
func (ep *Endpoint) mailbox() *mailbox {
	if b := ep.box.Load(); b != nil {
		return b
	}
	if ep.smalls.Add(1) < mailboxAfter {
		return nil
	}
	b := newMailbox()
	if !ep.box.CompareAndSwap(nil, b) {
		b = ep.box.Load()
	}
	return b
}

// deposit leaves buf, with envelope k, in ep's mailbox when it fits, the pool has
// room, the inbox is empty and a slot is free or comes free while the receiver
// takes messages (see awaitSlot); it reports whether it did.
//
// A message in a slot is held in the ring's own memory and charges the pool
// nothing: reserving pool credit was a locked instruction of every hand-off (a
// send and its receive by one goroutine: 59 against 65 ns, medians of 10). A
// message charges the pool once it leaves the ring for the unexpected queue
// (takeBox), and the ring is used only while the pool has room, so that past
// the cap a standard send still waits for its receiver. The wait for a slot
// does not adapt as a receive's does: a sender that fell back to the inbox
// once would run ahead, wait long for its receiver, and never spin again.
func (ep *Endpoint) deposit(buf []byte, k key) bool {
	wd := ep.World
	if len(buf) > mailboxCap || len(buf) > wd.cfg.EagerLimit || wd.full(chargeOf(len(buf))) {
		return false
	}
	b := ep.mailbox()
	if b == nil {
		return false
	}
	s, pos := ep.claimSlot(b)
	if s == nil && !b.stuck.Load() {
		s, pos = ep.awaitSlot(b, k.tag)
	}
	if s == nil {
		return false
	}
	s.key, s.n = k, uint32(len(buf))
	copy(s.data[:], buf)
	s.publish(pos)
	// As for the inbox: we store the slot, then load parked.
	if ep.wants(k.tag) {
		ep.Progress()
	}
	return true
}

// awaitSlot waits for a slot of b, and claims it, as long as the receiver takes
// messages (from the ring, its queue or the inbox) within every spin: a sender
// that outruns its receiver so keeps pace with it instead of queueing a backlog.
// It waits until half the ring is free, so that sender and receiver each work
// through a batch of slots instead of passing the receiver's position line back
// and forth at every slot (its write of the position waits for a polling sender's
// copy of the line). When the receiver took none in a spin, it marks b stuck, so that senders
// use the inbox at once until the receiver takes messages again, and returns nil.
// The sender makes room itself, moving the ring's messages to the queue, when a
// goroutine of the receiver waits parked for a message of tag, the tag of the
// message to send, or when goroutines of the receiver are parked and nobody took
// a message during idleTurns turns: they wait for something else, and take none
// of the ring's messages meanwhile. While other goroutines of the receiver take
// them, it leaves the work to them (4 goroutine pairs: see wants).
func (ep *Endpoint) awaitSlot(b *mailbox, tag int32) (*slot, uint64) {
	moves, start := b.progress(), spin.Now()
	seen, idle := moves, 0
	for i := 1; ; i++ {
		if p := b.progress(); p != seen {
			seen, idle = p, 0
		} else {
			idle++
		}
		if ep.wants(tag) || idle >= idleTurns && ep.parked.Load() > 0 {
			ep.Progress()
			idle = 0
		}
		if ep.inbox.Load() == nil && b.free(mailboxSlots/2) {
			if s, pos := ep.claimSlot(b); s != nil {
				return s, pos
			}
		}
		// The receiver may be queued on our P: let it run at once.
		runtime.Gosched()
		if i%16 != 0 || spin.Now()-start < int64(ep.World.cfg.Spin) {
			continue
		}
		if b.progress() == moves {
			b.stuck.Store(true)
			return nil, 0
		}
		moves, start = b.progress(), spin.Now()
	}
}

// idleTurns is how many turns of awaitSlot without a message taken say that the
// receiver's parked goroutines are all it has.
const idleTurns = 16

// free reports whether the next n slots of b are free.
func (b *mailbox) free(n uint64) bool {
	return b.tail.Load()+n <= b.head.Load()+mailboxSlots
}

// progress counts the messages the receiver of b has taken, from the ring or
// elsewhere, so far.
func (b *mailbox) progress() uint64 { return b.head.Load() + b.moves.Load() }

// moved records that the receiver ep took messages from its queue or inbox:
// senders waiting for a slot wait on, and a stuck mailbox is open to them again.
// Caller holds ep.mu.
func (ep *Endpoint) moved() {
	if b := ep.box.Load(); b != nil {
		b.moves.Add(1)
		b.unstick()
	}
}

// unstick opens a stuck mailbox to waiting senders again: its receiver is back.
func (b *mailbox) unstick() {
	if b.stuck.Load() {
		b.stuck.Store(false)
	}
}

// claimSlot takes the next slot of b for a message to ep, and its position, or
// returns nil when the inbox holds messages or the ring is full.
func (ep *Endpoint) claimSlot(b *mailbox) (*slot, uint64) {
	for ep.inbox.Load() == nil {
		t := b.tail.Load()
		if t >= b.room.Load() {
			room := b.head.Load() + mailboxSlots
			if t >= room {
				return nil, 0 // full: the receiver has not taken the message a lap ago
			}
			b.room.Store(room) // a racing sender's older room only makes us read head sooner
		}
		if b.tail.CompareAndSwap(t, t+1) {
			return &b.slot[t%mailboxSlots], t
		}
	}
	return nil, 0
}

// publish makes the message at position pos, written into s, visible to the receiver.
func (s *slot) publish(pos uint64) { s.seq.Store(pos + 1) }

// stamp is the mailbox position before which every slot of ep is claimed now.
func (ep *Endpoint) stamp() uint64 {
	if b := ep.box.Load(); b != nil {
		return b.tail.Load()
	}
	return 0
}

// published, for takeBox: every message published so far, and no wait.
const published = ^uint64(0)

// takeBox takes the mailbox's messages in order: each goes into the earliest
// matching posted receive or, failing that, when pat is not nil and matches it,
// into buf, which ends the taking; else onto the unexpected queue as an eager copy
// charged to the pool (see hold). With until published it takes what is published and
// stops at the first slot that is not; else it takes the slots before position
// until, all claimed, waiting for those not yet published, and stops there. It
// returns the status of a message received into buf (ok) and how many posted
// receives it completed. Caller holds ep.mu.
func (ep *Endpoint) takeBox(pat *key, buf []byte, until uint64) (st Status, ok bool, completed int) {
	b := ep.box.Load()
	if b == nil {
		return
	}
	start := b.head.Load()
	pos := start
	for !ok && pos < until {
		s := &b.slot[pos%mailboxSlots]
		if s.seq.Load() != pos+1 {
			if until == published {
				break
			}
			runtime.Gosched() // a sender is between its claim and its publication
			continue
		}
		data, k := s.data[:s.n], s.key
		switch r := ep.takePosted(k); {
		case r != nil:
			deliver(r, data, k)
			completed++
		case pat != nil && matches(*pat, k):
			st, ok = receiveSlot(data, k, buf), true
		default:
			ep.hold(chargeOf(len(data)))
			ep.queue(newCopy(data, k))
		}
		pos++
		b.head.Store(pos)
	}
	if pos != start {
		b.unstick()
	}
	return
}

// takeNext receives the mailbox's next message into buf, and its status into st,
// when it matches pat and nothing the engine holds could come before it or claim it:
// no unexpected message, no posted receive. It skips the general path (takeBox's
// loop, the queues' searches), which a blocking exchange does not need (8-byte
// ping-pong, one way: 0.238 against 0.268 µs, medians of 20). Caller holds ep.mu.
func (ep *Endpoint) takeNext(pat key, buf []byte, st *Status) bool {
	b := ep.box.Load()
	if b == nil || ep.unexp.n != 0 || ep.posted.n != 0 || ep.wild.head != nil {
		return false
	}
	pos := b.head.Load()
	s := &b.slot[pos%mailboxSlots]
	if s.seq.Load() != pos+1 || !matches(pat, s.key) {
		return false
	}
	*st = receiveSlot(s.data[:s.n], s.key, buf)
	b.head.Store(pos + 1)
	b.unstick()
	return true
}

// receiveSlot receives a slot's message, data with envelope k, into buf, and
// returns its status.
func receiveSlot(data []byte, k key, buf []byte) Status {
	return Status{Source: int(k.src), Tag: int(k.tag), Bytes: copy(buf, data), Len: len(data)}
}

// hold charges the pool n bytes for a slot's message that leaves the ring for the
// unexpected queue as an eager copy: first from what received messages gave back
// and ep has not yet returned to the pool (no atomic operation under the lock:
// with a compare-and-swap there, 4 goroutine pairs' message rate lost 8%), else
// from ep's credit, else over the cap: the message is here already, and deposit
// stops filling the ring once the pool is full, so the cap is exceeded by at most
// what the rings hold. Caller holds ep.mu.
func (ep *Endpoint) hold(n int64) {
	switch {
	case ep.returned >= n:
		ep.returned -= n
	case !ep.reserve(n):
		ep.World.pooled.Add(n)
	}
}

// arrived reports whether a message waits in the mailbox or the inbox.
func (ep *Endpoint) arrived() bool {
	if ep.inbox.Load() != nil {
		return true
	}
	b := ep.box.Load()
	if b == nil {
		return false
	}
	pos := b.head.Load()
	return b.slot[pos%mailboxSlots].seq.Load() == pos+1
}
