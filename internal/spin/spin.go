// Package spin is bounded polling for the waits of goroutine ranks: poll a condition
// for a short while before parking, yielding the processor now and then, because the
// goroutine a spinner waits for may be queued on the spinner's own P (a wake-up puts
// the woken goroutine on the waker's P) and yielding also lets the Go scheduler move
// two spinners onto different processors. Yield, for a goroutine that polls
// another process, gives the OS thread's processor to the threads waiting for it.
package spin

import (
	"runtime"
	"time"
)

const (
	check      = 256                   // polls between clock reads
	yieldEvery = 500 * time.Nanosecond // polling time between yields
)

// Until polls cond for at most d and reports whether it came true.
func Until(d time.Duration, cond func() bool) bool {
	if d <= 0 {
		return false
	}
	start := time.Now()
	yielded := start
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i%check != 0 {
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
