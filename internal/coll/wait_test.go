//go:build unix

package coll

import (
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the processor time this process has used so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// barrierAll runs Barrier on n goroutine ranks; rank 0 first calls before. It
// returns every rank's error.
func barrierAll(c *Comm, n int, before func()) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if r == 0 {
				before()
			}
			errs[r] = c.Barrier(r)
		})
	}
	wg.Wait()
	return errs
}

// TestBarrierLongWaitCPU: ranks that wait long in a barrier (one rank computes for
// 200 ms) park after a bounded number of yields instead of keeping the processors
// busy: the process uses a small fraction of the processor time it had.
func TestBarrierLongWaitCPU(t *testing.T) {
	for _, n := range []int{16, 256} { // one counter; the tree
		c := New(NewJob(), n, 20*time.Microsecond)
		const compute = 200 * time.Millisecond
		start, cpu0 := time.Now(), cpuTime(t)
		for _, err := range barrierAll(c, n, func() { time.Sleep(compute) }) {
			if err != nil {
				t.Fatal(err)
			}
		}
		wall, cpu := time.Since(start), cpuTime(t)-cpu0
		t.Logf("%d ranks: %v of processor time in %v", n, cpu, wall)
		if wall < compute || cpu > wall/4 {
			t.Errorf("%d ranks waiting %v used %v of processor time, want under %v", n, wall, cpu, wall/4)
		}
	}
}

// TestBarrierAbort: Job.Abort releases every rank waiting in a barrier, yielding or
// parked, with ErrAborted.
func TestBarrierAbort(t *testing.T) {
	for _, n := range []int{4, 16, 256} {
		j := NewJob()
		c := New(j, n, 20*time.Microsecond)
		for r, err := range barrierAll(c, n, func() { time.Sleep(20 * time.Millisecond); j.Abort() }) {
			if !errors.Is(err, ErrAborted) {
				t.Fatalf("%d ranks: rank %d returned %v, want ErrAborted", n, r, err)
			}
		}
	}
}

// TestRunAheadAbort: a root that ran a lap of the ring ahead of a rank that never
// joins parks for a free slot, costs no processor time there, and Job.Abort
// releases it with ErrAborted.
func TestRunAheadAbort(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		j := NewJob()
		c := New(j, 2, spin)
		done := make(chan error, 1)
		go func() {
			for range ringSize + 1 {
				if err := c.Bcast(0, []byte{1}, 1, 0); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		cpu0 := cpuTime(t)
		select {
		case err := <-done:
			t.Fatalf("the root ran %d Bcasts ahead of a rank that never joined one: %v", ringSize+1, err)
		case <-time.After(100 * time.Millisecond):
		}
		if cpu := cpuTime(t) - cpu0; cpu > 25*time.Millisecond {
			t.Errorf("a root waiting 100 ms for a slot used %v of processor time", cpu)
		}
		j.Abort()
		if err := <-done; !errors.Is(err, ErrAborted) {
			t.Fatalf("spin %v: the waiting root returned %v, want ErrAborted", spin, err)
		}
	}
}
