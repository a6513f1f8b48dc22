// Package p2p is Weft's point-to-point engine for the ranks of one process: matching
// (posted and unexpected queues per rank), the send modes, eager copies into a bounded
// pool, rendezvous with a single copy by whichever side arrives second, and waiting.
package p2p

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
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
	EagerLimit int           // largest standard send copied into the pool so the sender returns at once
	PoolCap    int64         // bytes the eager copies of one process may hold at once
	Spin       time.Duration // how long a waiter polls before it parks
}

// envelopeCharge is what a queued eager message costs the pool besides its payload,
// so that even zero-byte messages are bounded.
const envelopeCharge = 64

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
}

// NewWorld makes the endpoints of n ranks.
func NewWorld(n int, cfg Config) *World {
	wd := &World{cfg: cfg, Endpoints: make([]*Endpoint, n), abort: make(chan struct{})}
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

// Config returns the tunables in force.
func (wd *World) Config() Config { return wd.cfg }

// Abort ends the job: every waiting operation returns ErrAborted and so does every
// later one. The first cause is kept.
func (wd *World) Abort(cause *errs.Error) {
	if wd.cause.CompareAndSwap(nil, cause) {
		close(wd.abort)
	}
}

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
