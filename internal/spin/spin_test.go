package spin

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestTimed checks what a caller that parks after the spin relies on: a condition
// already true costs no clock read (start 0), a spin that gives up took about d and
// says when it began, and no spin at all still says when the wait began.
func TestTimed(t *testing.T) {
	if ok, start := Timed(time.Millisecond, func() bool { return true }); !ok || start != 0 {
		t.Fatalf("a true condition: ok %v start %d, want true and 0", ok, start)
	}
	polls := 0
	ok, start := Timed(time.Millisecond, func() bool { polls++; return polls == first+1 })
	if !ok || start == 0 {
		t.Fatalf("true after the first polls: ok %v start %d, want true and the time it began", ok, start)
	}
	before := Now()
	ok, start = Timed(2*time.Millisecond, func() bool { return false })
	took := time.Duration(Now() - before)
	if ok || start < before || took < 2*time.Millisecond || took > time.Second {
		t.Fatalf("a false condition: ok %v, start %d (called at %d), took %v; want false after 2ms", ok, start, before, took)
	}
	before = Now()
	if ok, start := Timed(0, func() bool { return true }); ok || start < before {
		t.Fatalf("no spin: ok %v start %d, want false and a start from %d", ok, start, before)
	}
}

// TestYielding has a goroutine on the waiter's only processor make the condition
// true as soon as it runs: the waiter must let it run at its yields, so the
// condition is polled a few times (Timed polls hundreds of times before it yields). A
// condition that never comes true ends the wait after about d, and no budget ends
// it at once; both say when the wait began.
func TestYielding(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var set atomic.Bool
	go set.Store(true)
	polls := 0
	before := Now()
	ok, start := Yielding(time.Second, func() bool { polls++; return set.Load() })
	// The second poll sees it, after the first yield ran the goroutine; or a later one,
	// when a yield handed the processor back to us first (the scheduler takes from the
	// global queue, where Gosched put us, one time in 61). Timed would poll hundreds of
	// times before its first yield.
	if !ok || polls < 2 || polls > 8 || start < before {
		t.Fatalf("ok %v after %d polls, start %d (called at %d); want true after 2 to 8 polls", ok, polls, start, before)
	}
	before = Now()
	ok, start = Yielding(2*time.Millisecond, func() bool { return false })
	took := time.Duration(Now() - before)
	if ok || start < before || took < 2*time.Millisecond || took > time.Second {
		t.Fatalf("a false condition: ok %v, start %d (called at %d), took %v; want false after 2ms", ok, start, before, took)
	}
	if ok, start := Yielding(0, func() bool { return true }); ok || start == 0 {
		t.Fatalf("no spin: ok %v start %d, want false and a start", ok, start)
	}
}
