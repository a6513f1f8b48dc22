package p2p

import (
	"runtime"
	"sync"
	"time"
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

// spinCheck is how many polls run between clock reads while spinning.
const spinCheck = 256

// yieldEvery is how long a spinner polls before it yields its processor once. A
// spinner may share its P with the very goroutine it waits for (a wake-up puts the
// woken goroutine on the waker's P); yielding lets that one run, and lets the
// scheduler move the spinner to an idle P, after which hand-offs are pure spins.
const yieldEvery = 500 * time.Nanosecond

// spinFloor is the least an adaptive spin budget shrinks to.
const spinFloor = time.Microsecond

// spinUntil polls cond for at most d and reports whether it came true.
func spinUntil(d time.Duration, cond func() bool) bool {
	if d <= 0 {
		return false
	}
	start := time.Now()
	yielded := start
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i%spinCheck != 0 {
			continue
		}
		now := time.Now()
		if now.Sub(start) > d {
			return false
		}
		if now.Sub(yielded) > yieldEvery {
			runtime.Gosched()
			yielded = time.Now()
		}
	}
}

// spinFor polls cond within the endpoint's spin budget. It returns whether cond came
// true and, if not, when the spin started, for settle.
func (ep *Endpoint) spinFor(cond func() bool) (bool, time.Time) {
	if ep.World.cfg.Spin <= 0 {
		return false, time.Time{}
	}
	start := time.Now()
	return spinUntil(time.Duration(ep.spin.Load()), cond), start
}

// settle adapts the spin budget after a wait that had to park: if spinning the whole
// configured time would have caught it, the budget goes back to that; otherwise it
// halves, so that a rank sharing its core with others, whose waits are long, soon
// stops spinning and blocks.
func (ep *Endpoint) settle(start time.Time) {
	limit := ep.World.cfg.Spin
	if limit <= 0 {
		return
	}
	budget := time.Duration(ep.spin.Load())
	switch {
	case time.Since(start) < limit:
		if budget != limit {
			ep.spin.Store(int64(limit))
		}
	case budget > spinFloor:
		ep.spin.Store(int64(max(budget/2, spinFloor)))
	}
}

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
	if ok {
		return true
	}
	rs := [1]*Request{r}
	ok = ep.park(rs[:])
	ep.settle(start)
	return ok
}
