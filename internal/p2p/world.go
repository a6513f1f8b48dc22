// Package p2p is Weft's point-to-point engine for the ranks of one process: matching
// (posted and unexpected queues per rank), the send modes, eager copies into a bounded
// pool, rendezvous with a single copy by whichever side arrives second, and waiting.
package p2p

import (
	"errors"
	"sync/atomic"
	"time"

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
	Endpoints []*Endpoint // by world rank
	pooled    atomic.Int64
	abort     chan struct{} // closed when the job ends abnormally
	cause     atomic.Pointer[errs.Error]
}

// NewWorld makes the endpoints of n ranks.
func NewWorld(n int, cfg Config) *World {
	wd := &World{cfg: cfg, Endpoints: make([]*Endpoint, n), abort: make(chan struct{})}
	eps := make([]Endpoint, n)
	for i := range eps {
		ep := &eps[i]
		ep.World, ep.Rank = wd, i
		ep.wild.i, ep.arrived.i = 1, 1
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

// Cause returns why the job was aborted, or nil.
func (wd *World) Cause() *errs.Error { return wd.cause.Load() }

// Pooled returns the bytes the pool holds now.
func (wd *World) Pooled() int64 { return wd.pooled.Load() }

// eagerCopy copies buf into a pool-charged message, or returns nil when the pool is full.
// pooled messages are recycled on receipt; the others may still be referenced by a
// user's request, for Cancel.
func (wd *World) eagerCopy(buf []byte, k key, pooled bool) *Request {
	charge := int64(len(buf)) + envelopeCharge
	if wd.pooled.Add(charge) > wd.cfg.PoolCap {
		wd.pooled.Add(-charge)
		return nil
	}
	var m *Request
	if pooled {
		m = getReq()
	} else {
		m = new(Request)
	}
	if cap(m.store) < len(buf) {
		m.store = make([]byte, len(buf))
	}
	m.buf = m.store[:len(buf)]
	copy(m.buf, buf)
	m.kind, m.key, m.charge, m.pooled = eagerKind, k, charge, pooled
	return m
}

// release frees what a received or cancelled eager message held.
func (wd *World) release(m *Request) {
	wd.pooled.Add(-m.charge)
	if m.bseg != nil {
		m.bseg.free(m.boff)
	}
	if m.pooled {
		putReq(m)
	}
}

// Comm is a communicator as the engine sees it: a context and the endpoints of its ranks.
type Comm struct {
	Ctx   uint32
	Peers []*Endpoint // by rank in the communicator
	World *World
}

