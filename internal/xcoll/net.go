// Package xcoll is Weft's collectives among the ranks of a communicator that lives
// in several procs: the collective channel between procs (net.go) and the
// two-level algorithms on it (comm.go), where the ranks of each proc meet in
// internal/coll's shared-memory collectives and one leader per proc talks to the
// other procs' leaders. Collectives never go through the point-to-point engine.
package xcoll

import (
	"fmt"
	"sync"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/netd/wire"
)

// fragBytes is the largest payload of one message of the channel: a larger one is
// cut into fragments, so that no single write or read holds a huge buffer's worth
// of the connection while other collectives wait behind it.
const fragBytes = 1 << 20

// Sender writes a message to another proc; *netd.Device is one.
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
	aborted <-chan struct{} // the world's: closed when the job ends abnormally
	onLost  func(proc int)  // told when a proc is lost, before waiters are released
	dev     Sender          // set by Connect
	mu      sync.Mutex      // guards boxes
	boxes   map[name]*box   // messages under way or waiting for their receiver
	lost    chan struct{}   // closed when the first proc is lost
	once    sync.Once       // closes lost
}

// name names one message of the channel.
type name struct {
	ctx  uint32
	seq  uint64
	tag  int32
	proc int
}

// box is one message: filled by the receive daemon of its sender's connection,
// read by the collective once done is closed.
type box struct {
	sig, fault uint64 // the header's SendReq and RecvReq: see Msg
	buf        []byte
	got        int  // bytes received so far (receive daemon only)
	started    bool // the first fragment came (receive daemon only)
	done       chan struct{}
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
	return &Net{self: self, aborted: aborted, onLost: onLost, boxes: make(map[name]*box), lost: make(chan struct{})}
}

// Connect gives n the device it sends with; it must be called before the first
// collective.
func (n *Net) Connect(dev Sender) { n.dev = dev }

// Self returns our proc's index.
func (n *Net) Self() int { return n.self }

// boxOf returns the box of k, making it if needed. Called with n.mu held.
func (n *Net) boxOf(k name) *box {
	b := n.boxes[k]
	if b == nil {
		b = &box{done: make(chan struct{})}
		n.boxes[k] = b
	}
	return b
}

// Handle takes one fragment from proc's receive daemon: it reads the payload into
// the message's buffer, allocated on the first fragment, and releases the
// receiver once the message is whole. It never blocks on anything but the read.
func (n *Net) Handle(proc int, h *wire.Header, p *netd.Payload) error {
	return n.deliver(proc, h, p.ReadInto)
}

// deliver is Handle with the payload's reader as a function, so that tests can
// feed it without a connection.
func (n *Net) deliver(proc int, h *wire.Header, read func([]byte) error) error {
	if h.Kind != wire.Coll {
		return fmt.Errorf("xcoll: %v message from proc %d on the collective channel", h.Kind, proc)
	}
	k := name{ctx: h.Context, seq: h.Seq, tag: h.Tag, proc: proc}
	n.mu.Lock()
	b := n.boxOf(k)
	n.mu.Unlock()
	if b.started && b.got == len(b.buf) {
		return fmt.Errorf("xcoll: proc %d sent two messages named (context %d, collective %d, step %d)", proc, h.Context, h.Seq, h.Tag)
	}
	if !b.started {
		if h.Len > uint64(maxMsg) {
			return fmt.Errorf("xcoll: a %d-byte collective message from proc %d: larger than any buffer here", h.Len, proc)
		}
		b.started, b.sig, b.fault = true, h.SendReq, h.RecvReq
		b.buf = make([]byte, h.Len)
	}
	switch {
	case uint64(len(b.buf)) != h.Len || b.sig != h.SendReq || b.fault != h.RecvReq:
		return fmt.Errorf("xcoll: proc %d sent two messages named (context %d, collective %d, step %d)", proc, h.Context, h.Seq, h.Tag)
	case h.Offset != uint64(b.got):
		return fmt.Errorf("xcoll: fragment at %d from proc %d, want %d (context %d, collective %d, step %d)", h.Offset, proc, b.got, h.Context, h.Seq, h.Tag)
	}
	if err := read(b.buf[b.got : b.got+int(h.Frag)]); err != nil {
		return err
	}
	b.got += int(h.Frag)
	if b.got == len(b.buf) {
		close(b.done)
	}
	return nil
}

// maxMsg bounds what one message makes a receiver allocate.
const maxMsg = 1 << 40

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
// mailbox. It returns coll.ErrAborted if the job ends or a proc is lost first.
func (n *Net) Recv(proc int, ctx uint32, seq uint64, tag int32) (Msg, error) {
	k := name{ctx: ctx, seq: seq, tag: tag, proc: proc}
	n.mu.Lock()
	b := n.boxOf(k)
	n.mu.Unlock()
	select {
	case <-b.done:
	default:
		select {
		case <-b.done:
		case <-n.aborted:
			return Msg{}, coll.ErrAborted
		case <-n.lost:
			return Msg{}, coll.ErrAborted
		}
	}
	n.mu.Lock()
	delete(n.boxes, k)
	n.mu.Unlock()
	return Msg{Sig: b.sig, Fault: b.fault, Data: b.buf}, nil
}

// Send writes m to proc as the message (ctx, seq, tag), in fragments of at most
// fragBytes. A failed write means the job is ending (a lost link also fails the
// job): it returns coll.ErrAborted then, and the write error otherwise.
func (n *Net) Send(proc int, ctx uint32, seq uint64, tag int32, m Msg) error {
	h := wire.Header{Kind: wire.Coll, Context: ctx, Seq: seq, Tag: tag, Len: uint64(len(m.Data)), SendReq: m.Sig, RecvReq: m.Fault}
	for off := 0; ; {
		end := min(off+fragBytes, len(m.Data))
		h.Offset = uint64(off)
		if err := n.dev.Send(proc, netd.ChannelColl, &h, m.Data[off:end]); err != nil {
			select {
			case <-n.aborted:
				return coll.ErrAborted
			case <-n.lost:
				return coll.ErrAborted
			default:
				return fmt.Errorf("xcoll: proc %d to proc %d: %w", n.self, proc, err)
			}
		}
		if off = end; off == len(m.Data) {
			return nil
		}
	}
}

// pending returns how many messages are under way or waiting for their receiver,
// for tests: a collective that completed leaves none behind.
func (n *Net) pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.boxes)
}
