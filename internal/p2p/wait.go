package p2p

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// An event is a one-shot completion flag that one goroutine at a time may wait on.
// fire and wait race only through sequentially consistent atomics: the firer stores
// done then loads the waiter; the waiter stores itself then loads done; at least one
// of them sees the other, so a wake-up is never lost.
type event struct {
	done atomic.Bool
	w    atomic.Pointer[waiter]
}

func (e *event) fire() {
	e.done.Store(true)
	if w := e.w.Load(); w != nil {
		w.ring()
	}
}

func (e *event) fired() bool { return e.done.Load() }

// spinCheck is how many polls run between clock reads and yields while spinning.
const spinCheck = 64

// spinUntil polls cond for at most d, yielding the processor now and then so that a
// spinning rank never starves a runnable one on the same P. It reports whether cond held.
func spinUntil(d time.Duration, cond func() bool) bool {
	if d <= 0 {
		return cond()
	}
	var start time.Time
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i%spinCheck == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > d {
				return false
			}
			runtime.Gosched()
		}
	}
}

// park blocks until any of evs has fired or the world aborts; it returns false on abort.
// It registers one waiter on every event, so callers with many events should
// prefer waiting on them one at a time when they need all of them.
func (wd *World) park(evs []*event) bool {
	w := waiters.Get().(*waiter)
	for _, e := range evs {
		e.w.Store(w)
	}
	ok := true
loop:
	for {
		for _, e := range evs {
			if e.fired() {
				break loop
			}
		}
		select {
		case <-w.ch:
		case <-wd.abort:
			ok = false
			break loop
		}
	}
	for _, e := range evs {
		e.w.CompareAndSwap(w, nil)
	}
	waiters.Put(w)
	return ok
}

// await waits for one event: a short spin, then parking. It returns false on abort.
func (wd *World) await(e *event) bool {
	if e.fired() || spinUntil(wd.cfg.Spin, e.fired) {
		return true
	}
	evs := [1]*event{e}
	return wd.park(evs[:])
}
