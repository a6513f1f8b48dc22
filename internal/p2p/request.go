package p2p

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weft-mpi/weft/internal/spin"
)

// Mode is a send mode.
type Mode uint8

// The send modes of MPI.
const (
	Standard Mode = iota
	Buffered
	Synchronous
	Ready
)

// kind says what a Request stands for in a queue.
type kind uint8

const (
	recvKind   kind = iota + 1 // a posted receive
	sendKind                   // a send whose data still sits in the sender's buffer
	eagerKind                  // a copy of a message's data, owned by the engine
	remoteKind                 // a message whose data is still at its sender's proc
)

// where says which queue of its engine holds a Request.
type where uint8

const (
	nowhere    where = iota
	postedHere       // an exact posted receive
	wildHere         // a posted receive with AnySource or AnyTag
	unexpHere        // an unexpected message
)

// flags are the yes-or-no facts about a Request.
type flags uint8

const (
	probed      flags = 1 << iota // taken out of the queue by Mprobe, not yet received
	pooled                        // recycled by its endpoint once received
	cancelled                     // withdrawn by Cancel
	cancellable                   // an eager copy that an Isend may still withdraw
	dropped                       // a remote eager message whose payload the pool had no room for
	unringed                      // an eager copy of a message that left a mailbox's ring; seq is its ticket
)

// key is a message envelope: communicator context, source rank in it, and tag.
// A posted receive's key may hold AnySource or AnyTag.
type key struct {
	ctx      uint32
	src, tag int32
}

// Status describes a completed operation.
type Status struct {
	Source, Tag int
	Bytes       int // bytes placed in the receive buffer
	Len         int // bytes in the message: more than Bytes when it was truncated
	Cancelled   bool
}

// Request is one point-to-point operation, or one queued message.
//
// Its first 64 bytes, one cache line, hold all that a matching peer reads and writes
// (place in the queue, envelope, buffer, outcome, completion flag, and the data of a
// message up to 8 bytes), so that handing a message from one core to another moves
// as few lines as possible. Requests are allocated in a size class that is a
// multiple of 64, which aligns that line.
//
// The plain fields are guarded by the lock of the endpoint that queues the Request,
// or owned by the goroutine that took it out of the queue; the outcome is written
// before done is set and read after.
type Request struct {
	next  *Request       // next in the posted or unexpected queue, or in the inbox
	key   key            // envelope; once a receive completes, the matched source and tag
	where where          //
	kind  kind           //
	mode  Mode           //
	flags flags          //
	bufp  unsafe.Pointer // user buffer, or the eager copy
	blen  int            //
	mlen  int            // length of the message matched
	done  atomic.Uint32  // set once the operation is complete
	tiny  [8]byte        // the data of an eager copy of up to 8 bytes

	// The second line is read by whoever completes the Request (waiter) and written
	// only on rare paths, so that it stays shared between the cores.
	waiter atomic.Pointer[waiter] // a parked goroutine to wake on completion
	prev   *Request               // previous in its queue: written by the queue's owner only
	bnext  *Request               // next in its bucket of the queue's index
	msg    *Request               // a send's eager copy at the receiver, while it may still be cancelled
	bseg   *bsendBuf              // attached buffer to release once the copy is received
	boff   int                    // offset of the copy in bseg
	err    error

	// The third line is the owner's, written at every post; an eager copy of up to 16
	// bytes carries its data in it.
	gen    atomic.Uint32 // an eager copy's incarnation, bumped each time it is recycled
	msgGen uint32        // the incarnation of msg that this send made
	seq    uint64        // post order, to choose between an exact and a wildcard receive
	ep     *Endpoint     // endpoint that queues (or queued) it
	store  []byte        // backing array of an eager copy, kept across reuse
	inline [16]byte      // the data of an eager copy of up to 16 bytes

	// The fourth line: a large copy a spinning waiter may help with, when a parked
	// waiter's request completed, for its spin budget, and a message's other proc.
	job     atomic.Pointer[copyJob]
	firedAt atomic.Int64 // by spin.Now
	from    *peer        // the other proc of a remote send, receive or message
	rid     uint64       // the id the other proc knows it by: a send's or message's sequence number, a receive's id
	want    int          // bytes a remote receive waits for; then bytes still to come
	dest    int32        // a remote send's receiving rank, in the world
	comm    *Comm        // a posted receive's communicator, in errors-return mode: a lost proc fails it
	bkt     *bucket      // its bucket in the index of the queue that holds it, if indexed
}

var requests = sync.Pool{New: func() any { return new(Request) }}

// NewRequest returns a pooled Request, new or Reset, for one operation.
func NewRequest() *Request { return requests.Get().(*Request) }

// Recycle returns a completed Request to the pool; nobody may use it afterwards.
func Recycle(r *Request) {
	r.Reset()
	requests.Put(r)
}

// Reset readies a completed request for another start, keeping its eager storage.
func (r *Request) Reset() {
	store := r.store
	r.next, r.key, r.where, r.kind, r.mode, r.flags = nil, key{}, nowhere, 0, 0, 0
	r.bufp, r.blen, r.mlen = nil, 0, 0
	r.done.Store(0)
	// The second line only when dirty: it is read by the next completer.
	if r.waiter.Load() != nil {
		r.waiter.Store(nil)
	}
	if r.prev != nil || r.bnext != nil || r.msg != nil || r.bseg != nil || r.err != nil {
		r.prev, r.bnext, r.msg, r.bseg, r.boff, r.err = nil, nil, nil, nil, 0, nil
	}
	if r.job.Load() != nil || r.firedAt.Load() != 0 || r.from != nil {
		r.job.Store(nil)
		r.firedAt.Store(0)
		r.from, r.rid, r.want, r.dest = nil, 0, 0, 0
	}
	if r.seq != 0 || r.ep != nil || r.comm != nil {
		r.seq, r.ep, r.comm = 0, nil, nil
	}
	r.store = store
}

func (r *Request) setBuf(b []byte) {
	r.bufp, r.blen = unsafe.Pointer(unsafe.SliceData(b)), len(b)
}

func (r *Request) buf() []byte { return unsafe.Slice((*byte)(r.bufp), r.blen) }

// Done reports whether the operation has completed.
func (r *Request) Done() bool { return r.done.Load() != 0 }

// Result stores in st the status of a completed operation and returns its error.
func (r *Request) Result(st *Status) error {
	st.Len, st.Bytes, st.Cancelled = r.mlen, min(r.mlen, r.blen), r.flags&cancelled != 0
	st.Source, st.Tag = 0, 0
	if r.kind == recvKind {
		st.Source, st.Tag = int(r.key.src), int(r.key.tag)
	}
	return r.err
}

// fire marks r complete and wakes its waiter. The firer stores done then loads the
// waiter; a waiter stores itself then loads done: with sequentially consistent
// atomics one of them sees the other, so a wake-up is never lost.
//
// Once done is stored the waiter may recycle r, so fire writes nothing after it:
// the time of completion goes first, for a waiter that has already parked. The
// load after done may then see the waiter of r's next operation, which takes the
// ring as a spurious one.
func (r *Request) fire() {
	w := r.waiter.Load()
	if w != nil {
		r.firedAt.Store(spin.Now())
	}
	r.done.Store(1)
	if w == nil {
		w = r.waiter.Load()
	}
	if w != nil {
		w.ring()
	}
}
