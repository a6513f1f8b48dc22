package p2p

import (
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/weft-mpi/weft/internal/spin"
)

// A waiter is a parked goroutine's doorbell. Rings may be spurious (a stale ring
// from an earlier use), so every wait loop re-checks its condition after waking.
type waiter struct{ ch chan struct{} }

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan struct{}, 1)} }}

func (w *waiter) ring() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// spinFor polls cond within the endpoint's spin budget. It returns whether cond came
// true and, if not, when the wait started (spin.Now), for settle. Every wait starts
// here, so it first writes what streaming sends left to the send daemons
// (flushDeferred): what the wait is for may answer them. Where it polls no rings and
// GOMAXPROCS was 1 when the world was made, it yields at every poll (spin.Yielding):
// whatever it waits for runs on its P. In a world of several procs
// it also polls the network device (netd.Device.Poll) between polls of cond: the
// waiting rank handles what comes from other procs itself, instead of waiting for a
// receive daemon's turn on the processor and its hand-over.
func (ep *Endpoint) spinFor(cond func() bool) (bool, int64) {
	wd := ep.World
	wd.flushDeferred()
	if wd.cfg.Spin <= 0 {
		return false, 0
	}
	budget := time.Duration(ep.spin.Load())
	np := wd.poller
	if np == nil && wd.oneP { // on one P, what we wait for runs only when we yield
		return spin.Yielding(budget, cond)
	}
	if np == nil || budget <= 0 {
		return spin.Timed(budget, cond)
	}
	np.PollBegin()
	defer np.PollEnd()
	return spin.Timed(budget, func() bool {
		if cond() {
			return true
		}
		if !np.Poll() {
			return false
		}
		if cond() {
			return true
		}
		runtime.Gosched() // the ranks it woke, queued on our P
		return false
	})
}

// settle adapts the spin budget after a wait that had to park. A wait that a spin of
// twice the budget would have caught (or one under spinCatch, cheaper than parking
// whatever the budget) brings the budget back to the configured spin; a longer one
// cuts it to a quarter, down to nothing. Spinning lengthens the waits of ranks that
// share a core, so only waits near the budget say that more spinning would pay.
//
// waited is how long the wait took until the operation completed, not until the
// parked goroutine ran again: a wake-up would count against spinning otherwise.
func (ep *Endpoint) settle(waited time.Duration) {
	limit := ep.World.cfg.Spin
	if limit <= 0 {
		return
	}
	budget := time.Duration(ep.spin.Load())
	switch {
	case waited < max(2*budget, spinCatch):
		if budget != limit {
			ep.spin.Store(int64(limit))
		}
	case budget > 0:
		ep.spin.Store(int64(budget / 4))
	}
}

// spinCatch is a wait short enough that spinning through it beats parking.
const spinCatch = 2 * time.Microsecond

// park blocks a rank of ep until any of rs has completed or the world aborts; it
// returns false on abort. While parked it counts in ep.parked, so that senders of
// small messages of the tag classes tags drain the inbox for it (see wants). It
// registers one waiter on every request, so callers that need all of many
// requests should wait for them one at a time.
func (ep *Endpoint) park(rs []*Request, tags uint64) bool {
	w := waiters.Get().(*waiter)
	for _, r := range rs {
		r.waiter.Store(w)
	}
	ep.want(tags, 1) // before parked: see wants
	ep.parked.Add(1)
	ep.World.demand.Add() // whether it waits for another proc or not: cheaper than finding out
	ok := true
loop:
	for {
		ep.World.flushDeferred()
		if ep.pending() {
			ep.drainNow()
		}
		for _, r := range rs {
			if j := r.job.Load(); j != nil {
				j.help()
			}
			if r.Done() {
				break loop
			}
		}
		select {
		case <-w.ch:
		case <-ep.World.abort:
			ok = false
			break loop
		}
	}
	ep.World.demand.Done()
	ep.parked.Add(-1)
	ep.want(tags, -1)
	for _, r := range rs {
		r.waiter.CompareAndSwap(w, nil)
	}
	waiters.Put(w)
	return ok
}

// await waits for r on behalf of a rank of ep: a spin, then parking. Both drain the
// inbox when something arrives in it; the spin also helps copy a large message into
// or out of r. tags are the tag classes of the messages that may complete r (see
// wants). It returns false on abort.
func (ep *Endpoint) await(r *Request, tags uint64) bool {
	if r.Done() {
		return true
	}
	ready := func() bool {
		if j := r.job.Load(); j != nil {
			j.help()
		}
		ep.progress(r)
		return r.Done()
	}
	ok, start := ep.spinFor(ready)
	return ok || ep.parkUntil(r, start, tags)
}

// parkUntil parks a rank of ep until r completes, after a spin that began at start,
// and adapts the spin budget to how long the wait took. It returns false on abort.
func (ep *Endpoint) parkUntil(r *Request, start int64, tags uint64) bool {
	ok := ep.park([]*Request{r}, tags)
	ep.settleSince(r, start)
	return ok
}

// settleSince adapts the spin budget to a wait for r that began at start.
func (ep *Endpoint) settleSince(r *Request, start int64) {
	end := r.firedAt.Load()
	if end == 0 { // completed before we parked, or aborted
		end = spin.Now()
	}
	ep.settle(time.Duration(end - start))
}

// A sender that leaves a small message for a rank with parked goroutines drains
// the rank's mailbox and inbox for them, so that a parked receive it completes
// wakes. It does so only when one of them waits for the message's tag: with 4
// goroutine pairs of one rank pair on 4 tags, each sender drained whenever any
// receiver had parked, and so queued the others' messages as unexpected copies
// (most of them), which cost their receivers a copy, a queue entry and a search
// each. Drained for the parked tags only, the 4 pairs sent 8% more messages a
// second (median of the ratios of 14 rounds, alternating which build ran first).
//
// The parked goroutines' tags are counted by class (tag mod 64; allTags for
// anything else: a wildcard, a send, a probe), and wanted is the classes counted.
// A goroutine counts itself before it adds to parked, and a sender loads parked,
// then wanted, after it stored the message: a sender that sees a goroutine parked
// sees what it waits for, and a goroutine that parks after the sender looked
// drains the message itself.

// allTags is a wait that any message may end.
const allTags = ^uint64(0)

// waits counts the parked goroutines of a rank by the tag classes they wait for.
type waits struct {
	mu   sync.Mutex
	n    [64]int32
	some uint64 // the classes whose count is not 0
	all  int32
}

// tagsOf returns the tag class of the messages that may complete a receive of
// tag (maybe AnyTag).
func tagsOf(tag int) uint64 {
	if tag < 0 {
		return allTags
	}
	return 1 << (tag % 64)
}

// want counts (d = 1) or uncounts (d = -1) a parked wait for the tag classes m,
// and updates wanted.
func (ep *Endpoint) want(m uint64, d int32) {
	ws := ep.waits.Load()
	if ws == nil {
		ws = new(waits)
		if !ep.waits.CompareAndSwap(nil, ws) {
			ws = ep.waits.Load()
		}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if m == allTags {
		ws.all += d
	} else {
		for rest := m; rest != 0; rest &= rest - 1 {
			i := bits.TrailingZeros64(rest)
			if ws.n[i] += d; ws.n[i] == 0 {
				ws.some &^= 1 << i
			} else {
				ws.some |= 1 << i
			}
		}
	}
	wanted := ws.some
	if ws.all > 0 {
		wanted = allTags
	}
	ep.wanted.Store(wanted)
}

// wants reports whether a parked goroutine of ep may wait for a message of tag.
func (ep *Endpoint) wants(tag int32) bool {
	return ep.parked.Load() > 0 && ep.wanted.Load()&(1<<(uint32(tag)%64)) != 0
}
