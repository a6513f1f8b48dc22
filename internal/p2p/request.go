package p2p

import "sync"

// Mode is a send mode.
type Mode uint8

// The send modes of MPI.
const (
	Standard Mode = iota
	Buffered
	Synchronous
	Ready
)

var modeOps = [...]string{Standard: "Send", Buffered: "Bsend", Synchronous: "Ssend", Ready: "Rsend"}

// Op names the blocking call of a mode, for error messages.
func (m Mode) Op() string { return modeOps[m] }

// kind says what a Request stands for in a queue.
type kind uint8

const (
	recvKind  kind = iota + 1 // a posted receive
	sendKind                  // a send whose data still sits in the sender's buffer
	eagerKind                 // a copy of a message's data, owned by the engine
)

// where says which queue of its engine holds a Request.
type where uint8

const (
	nowhere    where = iota
	postedHere       // an exact posted receive: in a bucket
	wildHere         // a posted receive with AnySource or AnyTag: in the wildcard list
	unexpHere        // an unexpected message: in a bucket and in the arrival list
)

// key is a message envelope: communicator context, source rank in it, and tag.
// A posted receive's key may hold AnySource or AnyTag.
type key struct {
	ctx      uint32
	src, tag int32
}

// links chain a Request into one list; each Request can sit in two lists at once.
type links struct{ next, prev *Request }

// Status describes a completed operation.
type Status struct {
	Source, Tag int
	Bytes       int // bytes placed in the receive buffer
	Len         int // bytes in the message: more than Bytes when it was truncated
	Cancelled   bool
}

// Request is one point-to-point operation, or one queued message.
type Request struct {
	op
	ev event
}

// op is the plain state of a Request. It is guarded by the lock of the engine that
// queues the Request, or owned by the goroutine that took it out of a queue; the
// outcome (status, err) is written before ev fires and read after.
type op struct {
	links  [2]links // 0: bucket, 1: wildcard or arrival order
	where  where
	kind   kind
	mode   Mode
	probed bool   // taken out of the queue by Mprobe, not yet received
	pooled bool   // recycled by the engine once received
	seq    uint64 // post order, to choose between an exact and a wildcard receive
	key    key
	buf    []byte    // user buffer, or the eager copy
	store  []byte    // backing array of an eager copy, kept across reuse
	ep     *Endpoint // engine that queues (or queued) it
	msg    *Request  // a send's eager copy at the receiver, while it may still be cancelled
	bseg   *bsendBuf // attached buffer to release once the copy is received
	boff   int       // offset of the copy in bseg
	charge int64     // bytes charged to the eager pool
	status Status
	err    error
}

var requests = sync.Pool{New: func() any { return new(Request) }}

// getReq returns a pooled Request for an operation that no user can see.
func getReq() *Request { return requests.Get().(*Request) }

// putReq recycles r, keeping only its eager storage.
func putReq(r *Request) {
	r.op = op{store: r.store}
	r.ev.done.Store(false)
	r.ev.w.Store(nil)
	requests.Put(r)
}

// Done reports whether the operation has completed.
func (r *Request) Done() bool { return r.ev.fired() }

// Result returns the status and error of a completed operation.
func (r *Request) Result() (Status, error) { return r.status, r.err }

// complete records the outcome and wakes the waiter.
func (r *Request) complete(st Status, err error) {
	r.status = st
	r.err = err
	r.ev.fire()
}
