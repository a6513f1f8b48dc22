package p2p

import (
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
// (flushDeferred): what the wait is for may answer them. In a world of several procs
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
// small messages drain the inbox for it. It registers one waiter on every request,
// so callers that need all of many requests should wait for them one at a time.
func (ep *Endpoint) park(rs []*Request) bool {
	w := waiters.Get().(*waiter)
	for _, r := range rs {
		r.waiter.Store(w)
	}
	ep.parked.Add(1)
	ep.World.demand.Add() // whether it waits for another proc or not: cheaper than finding out
	ok := true
loop:
	for {
		ep.Progress()
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
	for _, r := range rs {
		r.waiter.CompareAndSwap(w, nil)
	}
	waiters.Put(w)
	return ok
}

// await waits for r on behalf of a rank of ep: a spin, then parking. Both drain the
// inbox when something arrives in it; the spin also helps copy a large message into
// or out of r. It returns false on abort.
func (ep *Endpoint) await(r *Request) bool {
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
	return ok || ep.parkUntil(r, start)
}

// parkUntil parks a rank of ep until r completes, after a spin that began at start,
// and adapts the spin budget to how long the wait took. It returns false on abort.
func (ep *Endpoint) parkUntil(r *Request, start int64) bool {
	rs := [1]*Request{r}
	ok := ep.park(rs[:])
	end := r.firedAt.Load()
	if end == 0 { // completed before we parked, or aborted
		end = spin.Now()
	}
	ep.settle(time.Duration(end - start))
	return ok
}
