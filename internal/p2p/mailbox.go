package p2p

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/weft-mpi/weft/internal/spin"
)

// The mailbox is a receiver's rings of one-line slots for small messages, made once
// it has had a few through the inbox. A blocking sender claims the next slot (and
// the ones after it for a message longer than the line holds: see mailboxCap) and
// writes envelope and data into it without the receiver's lock; the receiver, which
// polls its next slot while it waits, finds the message's envelope in that one
// line, and a receive that the message matches takes it straight from the slots,
// with no queue entry and no pooled copy. Only senders write a slot: the receiver frees slots by
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
// Lanes. A message goes into the ring (lane) of its tag's class (laneOf). Goroutines
// of one rank pair that exchange on different tags (Thakur and Gropp's 4T-4T) so
// each have a ring of their own, and a receive takes its messages from its lane's
// head with nothing of the others in the way. In one ring most of the messages at
// the head were for goroutines that were not running (8 goroutines on 2 cores), and
// went through the unexpected queue as pooled copies: 4T-4T sent 8.5-10.4 million
// messages a second against 18.1-20.4 with lanes.
//
// Order. A sender claims a slot only while the inbox is empty, and every message
// takes a stamp from the mailbox's clock before it claims a slot in its lane. So of
// two messages of one sender, m1 then m2, anything ahead of m1 in its lane claimed
// its slot before m1 did, hence its stamp before m1 was published, hence before
// m2's stamp: lower than m2's. A merge that takes the lanes' heads lowest stamp
// first, and waits at a head claimed but not published, therefore takes
// m1 before m2, provided it sees m1 whenever it sees m2. It reads the heads one
// after another, so m1 may land in a lane already read while m2 lands in one
// read later; a merge therefore takes a head only once two looks at the heads in
// a row find it the earliest. m1 was published before m2 took its stamp, hence
// before the first look saw m2, so the second sees m1, or what is ahead of it in
// its lane, stamped lower than m2 (TestMergeSeesEarlierLanes; with one look,
// about one run in 600 of TestAnyTagKeepsSenderOrder received a sender's
// messages out of order. Reading the clock before the heads and taking only a
// head stamped before it is as safe, but the clock's line then moved from the
// senders to the receiver and back at every message: BenchmarkAnyTagStream took
// 83 ns a message against 66 with one look, and takes 70 with two, medians of
// 10). What a sender pushes into the inbox carries the clock as its stamp
// (Request.seq): a drain takes the ring's published slots, then the inbox, and
// before it matches an inbox message it merges every slot stamped before it. A
// direct send, which queues itself after a drain, first merges every slot stamped
// so far (takeBox up to the clock). A receive of one tag can only match messages
// of its lane: while no posted receive has a wildcard, lanes are taken one at a
// time, each in its own order, into the receives that match their heads, and
// anything that must leave a lane for the unexpected queue leaves it through a
// merge. So the unexpected queue keeps every sender's order for the wildcards to
// come, and a sender's messages are matched in the order sent.

// A message takes one slot (a line) when it fits the slotData bytes left of the
// line after its envelope, and the slots after it (slotMore bytes each: all but
// the sequence word) up to maxSpan in all when it is longer. Up to mailboxCap
// bytes so go from sender to receiver as the smallest do, a line or a few moved
// once each, instead of through the inbox, where a posted receive's lock, queue
// and request each moved a line (64-byte ping-pong, one way: 0.153 µs against
// 0.097 at 32 bytes; Open MPI 0.147).
const (
	slotData   = 32
	slotMore   = 56
	maxSpan    = 8
	mailboxCap = slotData + (maxSpan-1)*slotMore
)

// spanOf is how many slots a message of n bytes takes.
func spanOf(n int) uint64 {
	if n <= slotData {
		return 1
	}
	return 1 + uint64(n-slotData+slotMore-1)/slotMore
}

// laneSlots is a lane's size: how far a blocking sender runs ahead of its
// receiver before it waits.
const laneSlots = 64

// mailboxLanes is how many lanes a mailbox has, made as tags first use them.
const mailboxLanes = 8

// laneOf returns the lane of the messages of tag: consecutive tags, and tags a
// multiple of 8 apart, take different lanes.
func laneOf(tag int32) int {
	t := uint32(tag)
	return int((t ^ t>>3 ^ t>>6) % mailboxLanes)
}

// slot is the first line of a message of a lane. seq is pos+1 once the message at
// position pos is published: the slot is free for pos+laneSlots once head has
// passed pos. A slot that continues the message before it holds its bytes after
// seq (more), and keeps the seq of an older lap, which matches no head to come.
type slot struct {
	seq   atomic.Uint64
	stamp uint64 // the mailbox's clock when the sender began: see Order
	key   key
	n     uint32 // the message's length, and cancelledBit
	data  [slotData]byte
}

// more is the part of s that holds a message it continues: every byte after seq.
func (s *slot) more() *[slotMore]byte { return (*[slotMore]byte)(unsafe.Pointer(&s.stamp)) }

// len is the length of the message in s.
func (s *slot) len() int { return int(s.n &^ cancelledBit) }

// span is how many slots the message in s takes.
func (s *slot) span() uint64 { return spanOf(s.len()) }

// lane is one ring of a mailbox. Its pointer to the claims makes Go's allocator
// put a header of 8 bytes in front of it, so that its first 56 bytes end a line.
type lane struct {
	*claims       // what the senders write
	id      uint8 // its index in the mailbox, read by the senders
	_       [47]byte
	head    atomic.Uint64 // next position to take: the receiver's line; stored with release order (senders poll it for room, nothing parks on it)
	left    atomic.Uint64 // 1 + the position of the head a drain last left where it was (see waiting)
	seen    atomic.Uint64 // the tail then
	stuck   atomic.Bool   // a sender waited a whole spin for the receiver in vain
	_       [36]byte
	slot    [laneSlots]slot
}

// claims is what a lane's senders write: an allocation of 128 bytes of its own, as
// the clock is. In the lane's first line, even with an empty line after it, a
// sender's claim waited for the line at every message once messages took two
// slots (64-byte ping-pong, one way: 0.18 against 0.11 µs): cores streaming
// through the ring's lines take lines near them along (which prefetcher, we
// could not tell in this VM).
type claims struct {
	tail atomic.Uint64 // next position to claim
	room atomic.Uint64 // head+laneSlots as a sender last read it: positions below it are free
	_    [112]byte
}

// mailbox holds a receiver's lanes, and the clock its senders stamp messages with.
type mailbox struct {
	lanes [mailboxLanes]atomic.Pointer[lane] // read by all, each written once
	clock *clock
	_     [56]byte
	moves atomic.Uint64 // bumped whenever the receiver takes messages from its queue or inbox
	_     [56]byte
}

// clock counts the stamps given. It is an allocation of its own, of 128 bytes:
// inside the mailbox (with a line or 128 bytes to itself) every stamp still waited
// for a line transfer (8-byte ping-pong round trip 0.33-0.40 against 0.20 µs).
type clock struct {
	n atomic.Uint64
	_ [120]byte
}

func newMailbox() *mailbox { return &mailbox{clock: new(clock)} }

func newLane(id int) *lane {
	ln := &lane{claims: new(claims), id: uint8(id)}
	ln.room.Store(laneSlots)
	return ln
}

// lane returns lane i of b, making it if need be.
func (b *mailbox) lane(i int) *lane {
	if ln := b.lanes[i].Load(); ln != nil {
		return ln
	}
	ln := newLane(i)
	if !b.lanes[i].CompareAndSwap(nil, ln) {
		ln = b.lanes[i].Load()
	}
	return ln
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
	return ep.makeMailbox()
}

// makeMailbox counts a small message to ep and makes its mailbox once it has had
// mailboxAfter of them.
func (ep *Endpoint) makeMailbox() *mailbox {
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
// room, the inbox is empty and a slot of its lane is free or, if it may wait, comes
// free while the receiver takes messages (see awaitSlot); it reports whether it
// did, and the message's ticket, by which an Isend may cancel it (withdrawSlot).
//
// A message in a slot is held in the ring's own memory and charges the pool
// nothing: reserving pool credit was a locked instruction of every hand-off (a
// send and its receive by one goroutine: 59 against 65 ns, medians of 10). A
// message charges the pool once it leaves the ring for the unexpected queue
// (takeBox), and the ring is used only while the pool has room, so that past
// the cap a standard send still waits for its receiver. The wait for a slot
// does not adapt as a receive's does: a sender that fell back to the inbox
// once would run ahead, wait long for its receiver, and never spin again.
func (ep *Endpoint) deposit(buf []byte, k key, wait bool) (ticket uint64, ok bool) {
	wd := ep.World
	if len(buf) > mailboxCap || len(buf) > wd.cfg.EagerLimit || wd.full(chargeOf(len(buf))) {
		return 0, false
	}
	b := ep.mailbox()
	if b == nil {
		return 0, false
	}
	ln := b.lane(laneOf(k.tag))
	span := spanOf(len(buf))
	stamp := b.clock.n.Add(1) - 1 // before the claim: see Order
	s, pos := ep.claimSlot(ln, span)
	if s == nil && wait && !ln.stuck.Load() {
		s, pos = ep.awaitSlot(b, ln, span, k.tag)
	}
	if s == nil {
		return 0, false
	}
	s.stamp, s.key, s.n = stamp, k, uint32(len(buf))
	ln.copyIn(s, pos, buf)
	s.publish(pos)
	// As for the inbox: we stored the claim (with a fence), then load parked.
	if ep.wants(k.tag) {
		ep.wake()
	}
	return ticketOf(ln, pos), true
}

// A ticket names a message of a mailbox by its lane and position (never 0). A
// message that leaves the ring for the unexpected queue keeps it, as the seq of
// its eager copy (flagged unringed), so that Cancel finds it there too.
func ticketOf(ln *lane, pos uint64) uint64 { return 1 + uint64(ln.id) + mailboxLanes*pos }

// copyIn writes buf into s, the slot at position pos of ln, and the slots after it.
func (ln *lane) copyIn(s *slot, pos uint64, buf []byte) {
	c := copy(s.data[:], buf)
	for c < len(buf) {
		pos++
		c += copy(ln.slot[pos%laneSlots].more()[:], buf[c:])
	}
}

// copyOut copies the message in s, the slot at position pos of ln, into dst as
// far as it fits, and returns how many bytes it copied.
func (ln *lane) copyOut(dst []byte, s *slot, pos uint64) int {
	n := min(len(dst), s.len())
	c := copy(dst[:n], s.data[:])
	for c < n {
		pos++
		c += copy(dst[c:n], ln.slot[pos%laneSlots].more()[:])
	}
	return c
}

// cancelledBit marks the length of a slot whose message Cancel withdrew: every
// taker passes over it (and the slots it takes).
const cancelledBit = 1 << 31

func (s *slot) cancelled() bool { return s.n&cancelledBit != 0 }

// withdrawSlot takes back the message of envelope k and ticket t that an Isend left
// in ep's mailbox, unless a receive has taken it, and reports whether it did: in
// the ring it marks the slot cancelled; in the unexpected queue it drops its copy.
// Caller holds ep.mu: no taker moves the lane's head meanwhile, and no sender can
// claim the slot again before the head has passed it.
func (ep *Endpoint) withdrawSlot(k key, t uint64) bool {
	i, pos := (t-1)%mailboxLanes, (t-1)/mailboxLanes
	ln := ep.box.Load().lanes[i].Load()
	if ln.head.Load() <= pos {
		ln.slot[pos%laneSlots].n |= cancelledBit
		return true
	}
	m := ep.unexp.find(k, func(m *Request) bool { return m.flags&unringed != 0 && m.seq == t })
	if m == nil {
		return false
	}
	ep.dequeue(m)
	ep.release(m)
	return true
}

// awaitSlot waits for a slot of lane ln of b, and claims it, as long as the receiver
// takes messages (from the ring, its queue or the inbox) within every spin: a sender
// that outruns its receiver so keeps pace with it instead of queueing a backlog.
// It waits until half the lane is free, so that sender and receiver each work
// through a batch of slots instead of passing the receiver's position line back
// and forth at every slot (its write of the position waits for a polling sender's
// copy of the line). When the receiver took none in a spin, it marks the lane stuck,
// so that senders use the inbox at once until the receiver takes messages again,
// and returns nil. The sender lets the receiver's parked goroutines have what the
// lanes hold for them when one of them waits for tag, the tag of the message to
// send; and makes room itself, moving the lanes' messages to the queue, when
// goroutines of the receiver are parked and nobody took a message during
// idleTurns turns: they wait for something else, and take none of the ring's
// messages meanwhile. While other goroutines of the receiver take them, it leaves
// the work to them (4 goroutine pairs: see wants).
func (ep *Endpoint) awaitSlot(b *mailbox, ln *lane, span uint64, tag int32) (*slot, uint64) {
	moves, start := b.progress(ln), spin.Now()
	seen, idle := moves, 0
	for i := 1; ; i++ {
		if p := b.progress(ln); p != seen {
			seen, idle = p, 0
		} else {
			idle++
		}
		switch {
		case idle >= idleTurns && ep.parked.Load() > 0:
			ep.mu.Lock()
			ep.merge()
			ep.mu.Unlock()
			idle = 0
		case ep.wants(tag):
			ep.Progress()
		}
		if ep.inbox.Load() == nil && ln.free(laneSlots/2) {
			if s, pos := ep.claimSlot(ln, span); s != nil {
				return s, pos
			}
		}
		// The receiver may be queued on our P: let it run at once.
		runtime.Gosched()
		if i%16 != 0 || spin.Now()-start < int64(ep.World.cfg.Spin) {
			continue
		}
		if b.progress(ln) == moves {
			ln.stuck.Store(true)
			return nil, 0
		}
		moves, start = b.progress(ln), spin.Now()
	}
}

// idleTurns is how many turns of awaitSlot without a message taken say that the
// receiver's parked goroutines are all it has.
const idleTurns = 16

// free reports whether the next n slots of ln are free.
func (ln *lane) free(n uint64) bool {
	return ln.tail.Load()+n <= ln.head.Load()+laneSlots
}

// progress counts the messages the receiver of b has taken, from lane ln or
// elsewhere, so far.
func (b *mailbox) progress(ln *lane) uint64 { return ln.head.Load() + b.moves.Load() }

// moved records that the receiver ep took messages from its queue or inbox:
// senders waiting for a slot wait on, and a stuck lane is open to them again.
// Caller holds ep.mu.
func (ep *Endpoint) moved() {
	if b := ep.box.Load(); b != nil {
		b.moves.Add(1)
		for i := range b.lanes {
			if ln := b.lanes[i].Load(); ln != nil {
				ln.unstick()
			}
		}
	}
}

// unstick opens a stuck lane to waiting senders again: its receiver is back.
func (ln *lane) unstick() {
	if ln.stuck.Load() {
		ln.stuck.Store(false)
	}
}

// claimSlot takes the next span slots of ln for a message to ep, and the first one's
// position, or returns nil when the inbox holds messages or the lane has not
// that many free.
func (ep *Endpoint) claimSlot(ln *lane, span uint64) (*slot, uint64) {
	for ep.inbox.Load() == nil {
		t := ln.tail.Load()
		if t+span > ln.room.Load() {
			room := ln.head.Load() + laneSlots
			if t+span > room {
				return nil, 0 // full: the receiver has not taken the messages a lap ago
			}
			ln.room.Store(room) // a racing sender's older room only makes us read head sooner
		}
		if ln.tail.CompareAndSwap(t, t+span) {
			return &ln.slot[t%laneSlots], t
		}
	}
	return nil, 0
}

// publish makes the message at position pos, written into s, visible to the
// receiver. A release store: a receiver that parks looks for it through the
// lane's tail, which the sender's claim stored with a fence (see pending).
func (s *slot) publish(pos uint64) { storeRelease(&s.seq, pos+1) }

// published reports whether the message at position pos of its lane is in s.
func (s *slot) published(pos uint64) bool { return s.seq.Load() == pos+1 }

// stamp is the mailbox's clock: every message stamped before it took a lower stamp.
func (ep *Endpoint) stamp() uint64 {
	if b := ep.box.Load(); b != nil {
		return b.clock.n.Load()
	}
	return 0
}

// published, for takeBox: every message, whatever its stamp.
const published = ^uint64(0)

// takeBox takes the mailbox's messages: each goes into the earliest matching
// posted receive or, failing that, when pat is not nil and matches it, into buf,
// which ends the taking; else onto the unexpected queue as an eager copy charged
// to the pool (see hold). With until published it takes what is published, lane
// by lane while no posted receive has a wildcard, no Probe waits (it looks at the
// unexpected queue only) and pat has no AnyTag (takeLanes), else merged (see
// Order). With a stamp as until it merges every message stamped before until. A
// merge waits at a head claimed but not yet published; so does a lane with a
// posted receive. It reports whether a message was received into buf (ok), whose
// status it stores in st (a pointer, not a result: a status returned through
// several calls was copied with loads that straddled its stores, each stalling
// until they left the core), and how many posted receives it completed. Caller
// holds ep.mu.
func (ep *Endpoint) takeBox(pat *key, buf []byte, st *Status, until uint64) (ok bool, completed int) {
	b := ep.box.Load()
	if b == nil {
		return
	}
	if until == published && ep.wild.head == nil && len(ep.probes) == 0 && (pat == nil || pat.tag != AnyTag) {
		var blocked bool
		if ok, completed, blocked = ep.takeLanes(b, pat, buf, st); ok || !blocked {
			return
		}
	}
	ok, n := ep.mergeBox(b, pat, buf, st, until)
	return ok, completed + n
}

// mergeBox is takeBox merging the lanes (see Order). Caller holds ep.mu.
func (ep *Endpoint) mergeBox(b *mailbox, pat *key, buf []byte, st *Status, until uint64) (ok bool, completed int) {
	for !ok {
		ln, s, pos := b.earliest(until)
		if s == nil {
			break
		}
		var done bool
		if ok, done = ep.takeSlot(ln, s, pos, pat, buf, st, true); done {
			completed++
		}
		storeRelease(&ln.head, pos+s.span())
		ln.unstick()
	}
	return
}

// takeSlot takes the message in s, at position pos of ln: into the earliest
// matching posted receive (done), into buf when pat is not nil and matches it
// (ok), or, with queue, onto the unexpected queue, as an eager copy that keeps the
// message's ticket. A cancelled slot it passes over. Caller holds ep.mu.
func (ep *Endpoint) takeSlot(ln *lane, s *slot, pos uint64, pat *key, buf []byte, st *Status, queue bool) (ok, done bool) {
	if s.cancelled() {
		return
	}
	k := s.key
	switch r := ep.takePosted(k); {
	case r != nil:
		ln.copyOut(r.buf(), s, pos)
		r.delivered(k, s.len())
		done = true
	case pat != nil && matches(*pat, k):
		ln.receive(s, pos, buf, st)
		ok = true
	case queue:
		n := s.len()
		ep.hold(chargeOf(n))
		m := newCopy(n, k)
		ln.copyOut(m.buf(), s, pos)
		m.flags |= unringed
		m.seq = ticketOf(ln, pos)
		ep.queue(m)
	}
	return
}

// takeLanes takes each lane's published messages in order while they go into a
// posted receive or, pat not nil, into buf (which ends the taking). A lane stops
// at a message that goes into neither, and stays as it is; blocked reports that
// one of them may hide a message that a posted receive or pat waits for, which
// only a merge may then move to the unexpected queue. Caller holds ep.mu, and no
// posted receive has a wildcard, no Probe waits.
func (ep *Endpoint) takeLanes(b *mailbox, pat *key, buf []byte, st *Status) (ok bool, completed int, blocked bool) {
	for i := range b.lanes {
		ln := b.lanes[i].Load()
		if ln == nil {
			continue
		}
		pos := ln.head.Load()
		for !ok {
			s := &ln.slot[pos%laneSlots]
			if !s.published(pos) {
				if ep.lanePosted[i] == 0 || ln.tail.Load() <= pos {
					break
				}
				// A sender between its claim and its publication: behind it may
				// be the message of a posted receive, whose goroutine may be
				// parked, and the sender drains only for its own message's tag.
				runtime.Gosched()
				continue
			}
			var done bool
			ok, done = ep.takeSlot(ln, s, pos, pat, buf, st, false)
			if !ok && !done {
				if ep.lanePosted[i] != 0 || pat != nil && laneOf(pat.tag) == i {
					blocked = true
				} else if ep.polling&(pollBit(AnyTag)|1<<i) == 0 { // else a polling receive may take it
					ln.seen.Store(ln.tail.Load())
					ln.left.Store(pos + 1)
				}
				break
			}
			if done {
				completed++
			}
			pos += s.span()
		}
		if pos != ln.head.Load() {
			storeRelease(&ln.head, pos)
			ln.unstick()
		}
		if ok {
			return
		}
	}
	return
}

// earliest returns the lane, slot and position of the published head of the lowest
// stamp when that stamp is below until, or a nil slot. At a head claimed but not
// published it waits for it: a merge that stopped there would leave behind it what
// a parked receive waits for, and its sender drains only for its own message's tag.
// It returns a head only once two looks at the heads in a row find it the
// earliest (see Order).
func (b *mailbox) earliest(until uint64) (*lane, *slot, uint64) {
	var before *slot // the earliest published head of the look before
	for {
		var (
			best  *lane
			first *slot
			at    uint64
			wait  bool
		)
		for i := range b.lanes {
			ln := b.lanes[i].Load()
			if ln == nil {
				continue
			}
			pos := ln.head.Load()
			s := &ln.slot[pos%laneSlots]
			switch {
			case !s.published(pos):
				wait = wait || ln.tail.Load() > pos
			case first == nil || s.stamp < first.stamp:
				best, first, at = ln, s, pos
			}
		}
		switch {
		case wait:
			runtime.Gosched() // a sender is between its claim and its publication
		case first == nil || first.stamp >= until:
			return nil, nil, 0
		case first == before:
			return best, first, at
		}
		before = first
	}
}

// takeNext receives the next message of pat's lane into buf, and its status into
// st, when it matches pat and nothing the engine holds could come before it or
// claim it: no unexpected message, no posted receive of that lane, no wildcard. It
// skips the general path (takeBox's loop, the queues' searches), which a blocking
// exchange does not need (8-byte ping-pong, one way: 0.238 against 0.268 µs,
// medians of 20). Caller holds ep.mu.
func (ep *Endpoint) takeNext(pat key, buf []byte, st *Status) bool {
	b := ep.box.Load()
	if b == nil || pat.tag == AnyTag || ep.unexp.n != 0 || ep.wild.head != nil {
		return false
	}
	i := laneOf(pat.tag)
	ln := b.lanes[i].Load()
	if ln == nil || ep.lanePosted[i] != 0 {
		return false
	}
	pos := ln.head.Load()
	s := &ln.slot[pos%laneSlots]
	if !s.published(pos) || s.cancelled() || !matches(pat, s.key) {
		return false
	}
	ln.receive(s, pos, buf, st)
	storeRelease(&ln.head, pos+s.span())
	ln.unstick()
	return true
}

// receive receives the message in s, at position pos of ln, into buf, and stores
// its status in st.
func (ln *lane) receive(s *slot, pos uint64, buf []byte, st *Status) {
	*st = Status{Source: int(s.key.src), Tag: int(s.key.tag), Bytes: ln.copyOut(buf, s, pos), Len: s.len()}
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

// pending reports whether the inbox or a lane holds messages, published or still
// being written: a parking goroutine's last look, which must see a message behind
// a slot that another sender has claimed and not yet written (arrived does not
// look past it, nor does the drain of that sender, whose message may be of a tag
// nobody waits for), and must see a message whose publication (a release store,
// which a later load of the sender may pass) is not yet visible: the sender
// claimed its slot with a compare-and-swap, a fence, before it looks at parked,
// and the goroutine counts itself in parked, with a fence, before it looks here,
// so one of the two sees the other.
func (ep *Endpoint) pending() bool {
	if ep.inbox.Load() != nil {
		return true
	}
	b := ep.box.Load()
	if b == nil {
		return false
	}
	for i := range b.lanes {
		if ln := b.lanes[i].Load(); ln != nil && ln.tail.Load() > ln.head.Load() {
			return true
		}
	}
	return false
}

// arrived reports whether a message waits in the mailbox or the inbox.
func (ep *Endpoint) arrived() bool { return ep.arrivedFor(AnyTag) }

// arrivedFor reports whether a message waits in the inbox or in the mailbox's
// lanes where a receive of tag (maybe AnyTag) finds its messages.
func (ep *Endpoint) arrivedFor(tag int32) bool {
	if ep.inbox.Load() != nil {
		return true
	}
	b := ep.box.Load()
	if b == nil {
		return false
	}
	if tag != AnyTag {
		return b.lanes[laneOf(tag)].Load().waiting()
	}
	for i := range b.lanes {
		if b.lanes[i].Load().waiting() {
			return true
		}
	}
	return false
}

// waiting reports whether a message waits at the head of ln (which may be nil)
// that a drain may take: not when a drain left the head where it was (nothing
// posted could take it, and no receive polled its lane) and nothing came behind it
// since. Else every rank's spinning wait would take the lock and look again at a
// message that nothing posted can take, where a drain of one ring queued it as
// unexpected. A receive looks at its lane's head itself before it polls or posts.
func (ln *lane) waiting() bool {
	if ln == nil {
		return false
	}
	pos := ln.head.Load()
	if !ln.slot[pos%laneSlots].published(pos) {
		return false
	}
	return ln.left.Load() != pos+1 || ln.tail.Load() != ln.seen.Load()
}
