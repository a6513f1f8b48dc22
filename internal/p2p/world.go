// Package p2p is Weft's point-to-point engine for the ranks of one process: matching
// (posted and unexpected queues per rank), the send modes, eager copies into a bounded
// pool, rendezvous with a single copy by whichever side arrives second, and waiting.
package p2p

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/topo"
)

// The wildcards and the null process.
const (
	AnySource = errs.AnySource
	AnyTag    = errs.AnyTag
	ProcNull  = errs.ProcNull
)

// ErrAborted is returned by any operation that the end of the job interrupted; the
// caller turns it into a full error with World.Cause.
var ErrAborted = errors.New("p2p: job aborted")

// Config holds the tunables of the engine.
type Config struct {
	EagerLimit    int           // largest standard send copied into the pool so the sender returns at once
	NetEagerLimit int           // largest message sent to another proc at once, without waiting for a receive
	PoolCap       int64         // bytes the eager copies of one process may hold at once
	Spin          time.Duration // how long a waiter polls before it parks
	// ErrorsReturn keeps the job running when a proc is lost: only what involves
	// it fails, with ErrProcFailed (MPI's errors-return); else the loss aborts the job.
	ErrorsReturn bool
}

// envelopeCharge is what a queued eager message costs the pool besides its payload:
// the Request that holds it, so that the cap bounds the memory the copies take, even
// of zero-byte messages.
const envelopeCharge = int64(unsafe.Sizeof(Request{}))

// World is the set of ranks in this process and what they share.
type World struct {
	cfg       Config
	Endpoints []*Endpoint   // by world rank
	pooled    atomic.Int64  // pool credit handed out to endpoints
	chunk     int64         // how much credit moves between the process and an endpoint at a time
	sweepMu   sync.Mutex    // one sweep of idle credit at a time
	sweeps    atomic.Uint64 // sweeps done
	abort     chan struct{} // closed when the job ends abnormally
	cause     atomic.Pointer[errs.Error]
	loss      atomic.Pointer[errs.Error] // the first proc lost, in errors-return mode
	losses    atomic.Uint32              // procs lost so far, in errors-return mode
	deferred  atomic.Int32               // peers whose messages wait for the send daemon

	layout *topo.Layout // where every rank of the job lives; nil for a world of one proc
	self   int          // our proc in layout
	peers  []*peer      // by proc; nil for ours
	net    Net          // how messages reach the other procs
	demand *netd.Demand // the device's count of parked ranks; nil without one
	poller netd.Poller  // the device, if waiting ranks may poll it; else nil
	oneP   bool         // GOMAXPROCS was 1 when the world was made: see spinFor
}

// NewWorld makes the endpoints of n ranks.
func NewWorld(n int, cfg Config) *World {
	wd := &World{cfg: cfg, Endpoints: make([]*Endpoint, n), abort: make(chan struct{}), oneP: runtime.GOMAXPROCS(0) == 1}
	// Credit idle in endpoints is lost to the others: keep it a small share of the cap.
	wd.chunk = min(max(cfg.PoolCap/int64(8*n), 4*envelopeCharge), 64<<10)
	// Endpoints must start on cache lines. Small heap objects do (their size classes
	// are whole lines), and so do large ones (whole pages); the arrays in between carry
	// an 8-byte allocation header, so a small world allocates its endpoints one by one.
	var eps []Endpoint
	if n*int(unsafe.Sizeof(Endpoint{})) > 32<<10 {
		eps = make([]Endpoint, n)
	}
	for i := range n {
		ep := new(Endpoint)
		if eps != nil {
			ep = &eps[i]
		}
		ep.init(wd, i)
		wd.Endpoints[i] = ep
	}
	return wd
}

// NewJobWorld makes the endpoints of a job that spans procs: one for every rank of
// the job, by global rank; those of proc self's ranks are this proc's engine, the
// others stand for ranks of other procs, which Connect makes reachable.
func NewJobWorld(l *topo.Layout, self int, cfg Config) (*World, error) {
	first, n, err := l.ProcRanks(self)
	if err != nil {
		return nil, err
	}
	local := NewWorld(n, cfg)
	wd := NewWorld(l.Size(), cfg) // endpoints of the other procs' ranks are plain allocations
	copy(wd.Endpoints[first:], local.Endpoints)
	wd.chunk = local.chunk
	wd.layout, wd.self, wd.peers = l, self, make([]*peer, l.Procs())
	for proc := range l.Procs() {
		f, m, _ := l.ProcRanks(proc)
		if proc != self {
			wd.peers[proc] = newPeer(wd, proc)
		}
		for rank := f; rank < f+m; rank++ {
			ep := wd.Endpoints[rank]
			ep.World, ep.Rank = wd, rank
			if proc != self {
				ep.peer = wd.peers[proc]
			}
		}
	}
	return wd, nil
}

// Layout returns where every rank of the job lives, and Self our proc in it; a
// world of one proc has no layout.
func (wd *World) Layout() *topo.Layout { return wd.layout }

// Self returns our proc's index in the job.
func (wd *World) Self() int { return wd.self }

// Proc returns the proc that runs the rank of ep.
func (ep *Endpoint) Proc() int {
	if ep.peer != nil {
		return ep.peer.proc
	}
	return ep.World.self
}

// Local reports whether the rank of ep runs in this proc.
func (ep *Endpoint) Local() bool { return ep.peer == nil }

// lostCause explains why the job ended when the link to proc broke.
func (wd *World) lostCause(proc int, err error) *errs.Error {
	first, n, _ := wd.layout.ProcRanks(proc)
	host, _ := wd.layout.HostOf(proc)
	return &errs.Error{Class: errs.ProcFailed, Rank: errs.None, Peer: errs.None, Tag: errs.None,
		Detail: fmt.Sprintf("lost proc %d (host %d, ranks %d-%d): %v", proc, host, first, first+n-1, err)}
}

// Config returns the tunables in force.
func (wd *World) Config() Config { return wd.cfg }

// Abort ends the job: every waiting operation returns ErrAborted and so does every
// later one. The first cause is kept.
func (wd *World) Abort(cause *errs.Error) {
	if wd.cause.CompareAndSwap(nil, cause) {
		close(wd.abort)
	}
}

// Loss returns what the first proc lost was, or nil; only in errors-return mode,
// where a loss does not abort the job, for the operations it fails outside the engine.
func (wd *World) Loss() *errs.Error { return wd.loss.Load() }

// Aborted returns a channel closed when the job is aborted, for waits outside the engine.
func (wd *World) Aborted() <-chan struct{} { return wd.abort }

// Cause returns why the job was aborted, or nil.
func (wd *World) Cause() *errs.Error { return wd.cause.Load() }

// Pooled returns the pool credit the endpoints hold now.
func (wd *World) Pooled() int64 { return wd.pooled.Load() }

// Comm is a communicator as the engine sees it: a context and the endpoints of its ranks.
type Comm struct {
	Ctx   uint32
	Peers []*Endpoint // by rank in the communicator
	World *World
}
