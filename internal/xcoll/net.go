// Package xcoll is Weft's collectives among the ranks of a communicator that lives
// in several procs: the collective channel between procs (net.go) and the
// two-level algorithms on it (comm.go, more.go), where the ranks of each proc meet in
// internal/coll's shared-memory collectives and one leader per proc talks to the
// other procs' leaders. Collectives never go through the point-to-point engine.
package xcoll

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/spin"
)

// fragBytes is the largest payload of one message of the channel: a larger one is
// cut into fragments, so that no single write or read holds a huge buffer's worth
// of the connection while other collectives wait behind it.
const fragBytes = 1 << 20

// Sender writes a message to another proc; *netd.Device is one. It does not
// keep h once Send returns.
type Sender interface {
	Send(proc int, ch netd.Channel, h *wire.Header, payload []byte) error
}

// Net is one proc's end of the collective channel: netd's Handler for it, and the
// mailboxes where messages wait until a collective asks for them.
//
// A message is named by (context, sequence number of the collective on that
// communicator, step within the collective, sending proc); one collective step
// never sends two messages with one name, so a message that comes before its
// receiver asks is simply kept under its name.
type Net struct {
	self    int
	aborted <-chan struct{}      // the world's: closed when the job ends abnormally
	onLost  func(proc int)       // told when a proc is lost, before waiters are released
	dev     Sender               // set by Connect
	demand  *netd.Demand         // the device's count of waiting ranks, or nil
	poller  netd.Poller          // the device, if a waiting rank may poll it; else nil
	spin    time.Duration        // how long a Recv polls it before it parks
	mu      sync.Mutex           // guards calls and what they hold
	calls   map[uint64]*mailbox  // messages under way or waiting for their receiver, by call (see short)
	aliases map[callKey]*mailbox // calls whose short key another call's mailbox holds
	spare   spares               // what calls leave, for the next ones
	eager   int                  // eagerBytes; tests lower it
	hostOf  func(proc int) int   // a proc's host, if communicators whose procs share one use host mode (host.go)
	crowded bool                 // this host runs more procs than it has CPUs
	logf    func(string, ...any) // where a failed host mode set-up is told, once (see unhosted)
	told    atomic.Bool          // logf was told
	lost    chan struct{}        // closed when the first proc is lost
	once    sync.Once            // closes lost
}

// name names one message of the channel.
type name struct {
	ctx  uint32
	seq  uint64
	tag  int32
	proc int
}

// callKey names one collective call on one communicator: the messages of its
// steps, from every proc, share it.
type callKey struct {
	ctx uint32
	seq uint64
}

// short is k's key in Net.calls: its context and the low 32 bits of its
// sequence number. A map on that hashes much faster than on callKey (hashing
// was a tenth of a 1x4 Bcast's CPU), and only calls 2^32 apart share it: one
// of them goes to Net.aliases.
func (k callKey) short() uint64 { return uint64(k.ctx)<<32 | uint64(uint32(k.seq)) }

// mailbox holds the messages of one collective call under way or waiting for
// their receiver, and the Recv waiting in that call, if any. It holds few: one
// call's steps in flight at a time. Keeping them by call, not in one map of
// every message, spares the watch of a Recv a walk over all the messages that a
// pipelined stream of collectives left waiting (and over the empty slots of a
// map that once held thousands of them: 1x4 Bcast spent a quarter of its time
// there).
type mailbox struct {
	key   callKey
	boxes []*box
	watch *watch
}

// spares keeps the mailboxes, boxes and watches that calls are done with, so
// that a stream of small collectives allocates none of them: allocating them
// was a quarter of a cross-proc Barrier's time in this package (three objects
// and two channels per message). Guarded by Net.mu; at most spareMax of each.
type spares struct {
	mailboxes []*mailbox
	boxes     []*box
	watches   []*watch
}

const spareMax = 64

// take returns the last of *list, or nil.
func take[T any](list *[]*T) *T {
	l := *list
	if len(l) == 0 {
		return nil
	}
	x := l[len(l)-1]
	*list = l[:len(l)-1]
	return x
}

// keep adds x to *list unless it holds spareMax already.
func keep[T any](list *[]*T, x *T) {
	if len(*list) < spareMax {
		*list = append(*list, x)
	}
}

// watch is a Recv waiting in the collective call key: a message of that call
// whose signature differs from the receiver's ends the wait, since the procs made
// different calls and the message it waits for may never come (each proc follows
// the steps of its own call: another collective, or another root).
type watch struct {
	sig     uint64
	box     *box          // the message awaited
	wake    chan struct{} // rung (capacity 1) once box is whole or the watch trips
	tripped bool          // such a message has come
	from    int           // its sender
	other   uint64        // its signature
}

// OddCall is the error of a Recv ended by a message of the same collective call
// from proc Proc whose signature, Sig, differs from the receiver's, or by an alarm
// of that proc (which found such a message; Sig may then be the receiver's).
type OddCall struct {
	Proc int
	Sig  uint64
}

func (e *OddCall) Error() string {
	return fmt.Sprintf("xcoll: proc %d made another collective call (signature %#x)", e.Proc, e.Sig)
}

// box is one message: filled by the receive daemon of its sender's connection,
// read by the collective once it is whole.
type box struct {
	tag        int32  // its step
	proc       int    // its sender
	sig, fault uint64 // the header's SendReq and RecvReq: see Msg
	buf        []byte
	want       int  // its length, from its first fragment's header
	got        int  // bytes received so far (receive daemon only)
	started    bool // the first fragment came (receive daemon only)
	whole      bool // the last fragment came: set under Net.mu, by the receive daemon
}

// Msg is a message of the channel as the collectives see it. Sig names the
// collective call (kind, root, element size) so a receiver can tell that its
// sender made another call; Fault, when not 0, is the class of an error the sender
// met, and Data then describes it.
type Msg struct {
	Sig, Fault uint64
	Data       []byte
}

// NewNet returns proc self's end of the collective channel. Waits end with
// coll.ErrAborted once aborted is closed or a proc is lost; onLost (may be nil) is
// called first when a proc is lost, so that the caller can end the job's
// in-process collectives too.
func NewNet(self int, aborted <-chan struct{}, onLost func(proc int)) *Net {
	return &Net{self: self, aborted: aborted, onLost: onLost, calls: make(map[uint64]*mailbox), eager: eagerBytes, lost: make(chan struct{})}
}

// Connect gives n the device it sends with; it must be called before the first
// collective. A device that counts the ranks waiting for other procs
// (netd.Device) is told of every wait.
func (n *Net) Connect(dev Sender) {
	n.dev = dev
	if d, ok := dev.(interface{ Demand() *netd.Demand }); ok {
		n.demand = d.Demand()
	}
}

// PollNet has a Recv that waits poll p for its message for up to spin, or once
// if spin is 0, before it parks (see poll). Call it before the first collective.
func (n *Net) PollNet(p netd.Poller, spin time.Duration) { n.poller, n.spin = p, spin }

// HostMode has communicators whose procs all run on one host (hostOf names a
// proc's) meet in a shared segment (host.go); crowded says that the host runs
// more procs than it has CPUs. logf is told, once, when this proc cannot share
// a segment, and its communicators keep the channel. Call it before the first
// collective.
func (n *Net) HostMode(hostOf func(proc int) int, crowded bool, logf func(string, ...any)) {
	n.hostOf, n.crowded, n.logf = hostOf, crowded, logf
}

// unhosted tells logf, the first time, why this proc could not share a
// segment: the collectives of procs of one host then run on the channel, as
// correct but slower, which nobody would otherwise know.
func (n *Net) unhosted(err error) {
	if n.logf != nil && !n.told.Swap(true) {
		n.logf("collectives of procs on one host stay on the collective channel: %v", err)
	}
}

// ended says whether the job ended abnormally or a proc was lost.
func (n *Net) ended() bool {
	select {
	case <-n.aborted:
		return true
	case <-n.lost:
		return true
	default:
		return false
	}
}

// Self returns our proc's index.
func (n *Net) Self() int { return n.self }

// mailboxOf returns the mailbox of call k, making it if needed. Called with
// n.mu held.
func (n *Net) mailboxOf(k callKey) *mailbox {
	m := n.calls[k.short()]
	if m != nil && m.key == k {
		return m
	}
	if a := n.aliases[k]; a != nil {
		return a
	}
	fresh := take(&n.spare.mailboxes)
	if fresh == nil {
		fresh = &mailbox{}
	}
	fresh.key = k
	switch {
	case m == nil:
		n.calls[k.short()] = fresh
	case n.aliases == nil:
		n.aliases = map[callKey]*mailbox{k: fresh}
	default:
		n.aliases[k] = fresh
	}
	return fresh
}

// boxOf returns the box of k, making it if needed, and its call's mailbox.
// Called with n.mu held.
func (n *Net) boxOf(k name) (*box, *mailbox) {
	m := n.mailboxOf(callKey{k.ctx, k.seq})
	for _, b := range m.boxes {
		if b.tag == k.tag && b.proc == k.proc {
			return b, m
		}
	}
	b := take(&n.spare.boxes)
	if b == nil {
		b = &box{}
	}
	b.tag, b.proc = k.tag, k.proc
	m.boxes = append(m.boxes, b)
	return b, m
}

// drop takes b out of its call's mailbox m, and the mailbox out of n once it
// holds nothing, keeping both for later calls. Called with n.mu held.
func (n *Net) drop(k callKey, m *mailbox, b *box) {
	if i := slices.Index(m.boxes, b); i >= 0 {
		m.boxes = slices.Delete(m.boxes, i, i+1)
		*b = box{}
		keep(&n.spare.boxes, b)
	}
	n.dropEmpty(k, m)
}

// dropEmpty takes the mailbox m of call k out of n if it holds nothing and
// nobody waits there. Called with n.mu held.
func (n *Net) dropEmpty(k callKey, m *mailbox) {
	if len(m.boxes) == 0 && m.watch == nil {
		if n.calls[k.short()] == m {
			delete(n.calls, k.short())
		} else {
			delete(n.aliases, k)
		}
		keep(&n.spare.mailboxes, m)
	}
}

// Handle takes one fragment from proc's receive daemon: it reads the payload into
// the message's buffer, allocated on the first fragment, and releases the
// receiver once the message is whole. It never blocks on anything but the read.
func (n *Net) Handle(proc int, h *wire.Header, p *netd.Payload) error {
	return n.deliver(proc, h, p.ReadInto)
}

// deliver is Handle with the payload's reader as a function, so that tests can
// feed it without a connection. Whatever the header says, it stores the fragment
// or returns an error (which ends the job): the sender is another process, and
// the wire decoder's checks are not this function's to rely on.
func (n *Net) deliver(proc int, h *wire.Header, read func([]byte) error) error {
	if h.Kind != wire.Coll {
		return fmt.Errorf("xcoll: %v message from proc %d on the collective channel", h.Kind, proc)
	}
	k := name{ctx: h.Context, seq: h.Seq, tag: h.Tag, proc: proc}
	n.mu.Lock()
	b, m := n.boxOf(k)
	n.mu.Unlock()
	if !b.started {
		if h.Len > maxMsg {
			return fmt.Errorf("xcoll: a %d-byte collective message from proc %d: larger than any buffer here", h.Len, proc)
		}
		b.started, b.sig, b.fault, b.want = true, h.SendReq, h.RecvReq, int(h.Len)
		b.buf = make([]byte, 0, min(b.want, n.eager))
	}
	switch {
	case b.whole: // only this daemon sets it
		return fmt.Errorf("xcoll: proc %d sent two messages named (context %d, collective %d, step %d)", proc, h.Context, h.Seq, h.Tag)
	case uint64(b.want) != h.Len || b.sig != h.SendReq || b.fault != h.RecvReq:
		return fmt.Errorf("xcoll: proc %d sent two messages named (context %d, collective %d, step %d)", proc, h.Context, h.Seq, h.Tag)
	case h.Offset != uint64(b.got):
		return fmt.Errorf("xcoll: fragment at %d from proc %d, want %d (context %d, collective %d, step %d)", h.Offset, proc, b.got, h.Context, h.Seq, h.Tag)
	case uint64(h.Frag) > uint64(b.want-b.got):
		return fmt.Errorf("xcoll: a %d-byte fragment at %d from proc %d, past the end of its %d-byte message (context %d, collective %d, step %d)", h.Frag, h.Offset, proc, b.want, h.Context, h.Seq, h.Tag)
	}
	// Read in pieces, growing the buffer as the bytes come (doubling, up to the
	// message's length): what a fragment claims is not there yet.
	for end := b.got + int(h.Frag); b.got < end; {
		if b.got == cap(b.buf) {
			b.buf = slices.Grow(b.buf, min(b.want, max(2*cap(b.buf), n.eager))-len(b.buf))
		}
		piece := min(end, cap(b.buf))
		b.buf = b.buf[:piece]
		if err := read(b.buf[b.got:piece]); err != nil {
			return err
		}
		b.got = piece
	}
	if b.got == b.want {
		// m is still b's mailbox: a mailbox goes only once empty, and a box
		// only once whole.
		n.mu.Lock()
		b.whole = true
		if w := m.watch; w != nil {
			w.see(b)
		}
		n.mu.Unlock()
	}
	return nil
}

// see tells w that the message b of its call is whole: it ends w's wait if b
// is the message awaited, or if its signature is not w's, or it is an alarm
// (the watch then trips). Called with n.mu held.
func (w *watch) see(b *box) {
	switch {
	case (b.sig != w.sig || b.tag == tagAlarm) && !w.tripped:
		w.tripped, w.from, w.other = true, b.proc, b.sig
	case b != w.box:
		return
	}
	select {
	case w.wake <- struct{}{}:
	default: // already rung
	}
}

// maxMsg bounds the length a message may claim. What a receiver allocates is
// bounded by what the sender really sends, not by this: the buffer grows as the
// fragments come (see eagerBytes).
const maxMsg = 1 << 40

// eagerBytes is how much of a message's claimed length a receiver allocates at
// its first fragment; the buffer then doubles as the bytes come. A header alone,
// whatever lengths it claims, thus makes us allocate at most this much, while a long message costs a few reallocations
// beyond 64 MiB (copying about its length once more), which its transfer dwarfs.
const eagerBytes = 64 << 20

// Lost fails every wait of the channel: the job cannot go on without proc.
func (n *Net) Lost(proc int, _ error) {
	n.once.Do(func() {
		if n.onLost != nil {
			n.onLost(proc)
		}
		close(n.lost)
	})
}

// Recv waits for the message (ctx, seq, tag) from proc and takes it out of its
// mailbox. It returns coll.ErrAborted if the job ends or a proc is lost first,
// and an *OddCall if, while it waits, a message of the same collective call
// (ctx, seq) with another signature than sig is there, from any proc: that
// message is left where it is.
func (n *Net) Recv(proc int, ctx uint32, seq uint64, tag int32, sig uint64) (Msg, error) {
	k := name{ctx: ctx, seq: seq, tag: tag, proc: proc}
	ck := callKey{ctx, seq}
	n.mu.Lock()
	defer n.mu.Unlock()
	b, m := n.boxOf(k)
	if !b.whole {
		w := n.watch(m, b, sig)
		n.mu.Unlock()
		n.poll(w)
		var err error
		select {
		case <-w.wake:
		case <-n.aborted:
			err = coll.ErrAborted
		case <-n.lost:
			err = coll.ErrAborted
		}
		n.mu.Lock()
		if m.watch == w {
			m.watch = nil
		}
		w.box = nil
		keep(&n.spare.watches, w)
		switch {
		case b.whole:
			err = nil // if it came as the job ended, it is whole all the same
		case err == nil: // rung, and not for b
			err = &OddCall{Proc: w.from, Sig: w.other}
		}
		if err != nil {
			n.dropEmpty(ck, m)
			return Msg{}, err
		}
	}
	msg := Msg{Sig: b.sig, Fault: b.fault, Data: b.buf}
	n.drop(ck, m, b)
	return msg, nil
}

// poll handles the device's messages on the calling goroutine (netd.Poller)
// until w is rung or the spin runs out, or once without a spin: a message from a
// proc of this host then ends the wait without a receive daemon's turn on the
// processor and its hand-over.
func (n *Net) poll(w *watch) {
	p := n.poller
	if p == nil {
		return
	}
	p.PollBegin()
	defer p.PollEnd()
	if n.spin <= 0 {
		p.Poll()
		return
	}
	spin.Until(n.spin, func() bool { return len(w.wake) > 0 || p.Poll() && len(w.wake) > 0 })
}

// watch registers a Recv about to wait for b in the call whose mailbox is m
// (which holds b, so it stays), tripped at once if a whole message of that call
// with another signature than sig, or an alarm, already waits there. Called with
// n.mu held.
func (n *Net) watch(m *mailbox, b *box, sig uint64) *watch {
	w := take(&n.spare.watches)
	if w == nil {
		w = &watch{wake: make(chan struct{}, 1)}
	}
	select {
	case <-w.wake: // rung for its last Recv after that one stopped waiting
	default:
	}
	w.sig, w.box, w.tripped = sig, b, false
	m.watch = w
	for _, x := range m.boxes {
		if x.whole {
			w.see(x)
		}
	}
	return w
}

// Send writes m to proc as the message (ctx, seq, tag), in fragments of at most
// fragBytes. A failed write means the job is ending (a lost link also fails the
// job): it returns coll.ErrAborted then, and the write error otherwise.
func (n *Net) Send(proc int, ctx uint32, seq uint64, tag int32, m Msg) error {
	h := headers.Get().(*wire.Header) // through the interface, a local one would escape
	defer headers.Put(h)
	*h = wire.Header{Kind: wire.Coll, Context: ctx, Seq: seq, Tag: tag, Len: uint64(len(m.Data)), SendReq: m.Sig, RecvReq: m.Fault}
	for off := 0; ; {
		end := min(off+fragBytes, len(m.Data))
		h.Offset = uint64(off)
		if err := n.dev.Send(proc, netd.ChannelColl, h, m.Data[off:end]); err != nil {
			if n.ended() {
				return coll.ErrAborted
			}
			return fmt.Errorf("xcoll: proc %d to proc %d: %w", n.self, proc, err)
		}
		if off = end; off == len(m.Data) {
			return nil
		}
	}
}

// headers are Send's headers, which it would otherwise allocate at every message.
var headers = sync.Pool{New: func() any { return new(wire.Header) }}

// pending returns how many messages are under way or waiting for their receiver,
// for tests: a collective that completed leaves none behind.
func (n *Net) pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, m := range n.calls {
		k += len(m.boxes)
	}
	for _, m := range n.aliases {
		k += len(m.boxes)
	}
	return k
}
