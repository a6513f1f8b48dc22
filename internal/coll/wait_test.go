//go:build unix

package coll

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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

// barrierAll runs Barrier on n goroutine ranks; rank 0 first calls before, and
// joins only if it returns true. It returns every rank's error (nil for a rank 0
// that did not join), and fails t if they have not all returned within 30 s.
func barrierAll(t *testing.T, c *Comm, n int, before func() bool) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if r == 0 && !before() {
				return
			}
			errs[r] = c.Barrier(r)
		})
	}
	awaitRanks(t, &wg, 30*time.Second, "the barrier")
	return errs
}

// TestBarrierLongWaitCPU: ranks that wait long in a barrier (one rank computes for
// 200 ms) park after a bounded number of yields instead of keeping the processors
// busy: the process uses a small fraction of the processor time it had.
func TestBarrierLongWaitCPU(t *testing.T) {
	for _, n := range []int{16, 256, 257, 259} { // one counter; as the processors here say; in groups; in chains
		_, c := barrierComm(n)
		const compute = 200 * time.Millisecond
		start, cpu0 := time.Now(), cpuTime(t)
		for _, err := range barrierAll(t, c, n, func() bool { time.Sleep(compute); return true }) {
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
// parked, with ErrAborted, whether the aborting rank then joins it or never does.
func TestBarrierAbort(t *testing.T) {
	for _, n := range []int{4, 16, 256, 257, 258, 259, 260} {
		for _, joins := range []bool{true, false} {
			j, c := barrierComm(n)
			abort := func() bool { time.Sleep(20 * time.Millisecond); j.Abort(); return joins }
			for r, err := range barrierAll(t, c, n, abort) {
				if (r != 0 || joins) && !errors.Is(err, ErrAborted) {
					t.Fatalf("%d ranks, rank 0 joins %v: rank %d returned %v, want ErrAborted", n, joins, r, err)
				}
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

// barrierComm returns a job and the collective state of n ranks polling for 20 µs,
// whose Barrier is as the processors here make it, but for 257 ranks (3 groups whose
// leaders poll, then park) and 258 (2 groups whose leaders park at once), and 259
// and 260 alike in chains.
func barrierComm(n int) (*Job, *Comm) {
	switch n {
	case 257:
		return grouped(n, 3, 20*time.Microsecond, false)
	case 258:
		return grouped(n, 2, 0, false)
	case 259:
		return grouped(n, 3, 20*time.Microsecond, true)
	case 260:
		return grouped(n, 2, 0, true)
	}
	j := NewJob()
	return j, New(j, n, 20*time.Microsecond)
}

// grouped returns a job and the collective state of n ranks whose Barrier arrives in
// groups whose leaders poll for lead, whatever the number of processors here, and
// which wake in chains if chained.
func grouped(n, groups int, lead time.Duration, chained bool) (*Job, *Comm) {
	j := NewJob()
	c := New(j, n, lead)
	c.groups, c.leadSpin = groups, lead
	if chained {
		c.chainMin = 1
	}
	return j, c
}

// TestBarrierGroups: in groups even and uneven, one to sixteen, with leaders that poll
// or park at once, no rank leaves a Barrier before every rank has arrived, over
// enough episodes to reuse every slot of the ring twice.
func TestBarrierGroups(t *testing.T) {
	for _, tc := range []struct {
		n, groups int
		lead      time.Duration
	}{
		{65, 1, 0}, {65, 2, 20 * time.Microsecond}, {67, 3, 0}, {300, 7, 20 * time.Microsecond},
		{300, 2, 0}, {256, 16, 20 * time.Microsecond},
	} {
		for _, chained := range []bool{false, true} {
			t.Run(fmt.Sprintf("ranks=%d/groups=%d/lead=%v/chained=%v", tc.n, tc.groups, tc.lead, chained), func(t *testing.T) {
				j, c := grouped(tc.n, tc.groups, tc.lead, chained)
				barrierRounds(t, j, c, nil)
			})
		}
	}
}

// TestBarrierMakers: ranks that spin leave the making of a Barrier's episode to
// one of them in turn; when that one comes late (every third barrier), the others
// make it themselves, and still no rank leaves before every rank has arrived.
func TestBarrierMakers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3)) // a processor per rank: they spin
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			j := NewJob()
			c := New(j, n, 20*time.Microsecond)
			barrierRounds(t, j, c, func(r, k int) {
				if k%3 == 0 && r == (2*k)%n { // the maker of the barrier to come
					time.Sleep(50 * time.Microsecond)
				}
			})
		})
	}
}

// barrierRounds has the ranks of c pass barriers over six laps of the ring,
// every other one checked: no rank may leave it before every rank has arrived.
// Each rank calls before, if not nil, with its rank and the check's number, as it
// arrives at a checked barrier. A fault aborts the job, so that the others leave.
func barrierRounds(t *testing.T, j *Job, c *Comm, before func(r, k int)) {
	t.Helper()
	n := c.Size()
	var arrived atomic.Int64
	fault := make(chan error, n)
	fail := func(err error) { fault <- err; j.Abort() } // the others leave at once
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for k := range 3 * ringSize {
				if before != nil {
					before(r, k)
				}
				arrived.Add(1)
				if err := c.Barrier(r); err != nil {
					fail(err)
					return
				}
				if got, want := arrived.Load(), int64((k+1)*n); got < want {
					fail(fmt.Errorf("rank %d left barrier %d with %d arrivals, want %d", r, 2*k, got, want))
					return
				}
				if err := c.Barrier(r); err != nil { // nobody arrives again before all checked
					fail(err)
					return
				}
			}
		})
	}
	awaitRanks(t, &wg, 30*time.Second, "the barriers")
	close(fault)
	for err := range fault {
		if !errors.Is(err, ErrAborted) { // the first fault's echoes
			t.Fatal(err)
		}
	}
}

// TestRunAheadResumes: a root that runs laps of the ring ahead of a slow rank parks
// for its slots and resumes as the slow rank catches up, which gets every value:
// no wake-up is lost, whether the ranks poll or park at once.
func TestRunAheadResumes(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		c := New(NewJob(), 2, spin)
		const calls = 4 * ringSize
		done := make(chan error, 2)
		go func() {
			for i := range calls {
				if err := c.Bcast(0, []byte{byte(i)}, 1, 0); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		go func() {
			time.Sleep(20 * time.Millisecond) // the root runs a lap ahead and parks
			buf := make([]byte, 1)
			for i := range calls {
				if i%ringSize == ringSize/3 {
					time.Sleep(time.Millisecond) // and again, at other distances
				}
				if err := c.Bcast(1, buf, 1, 0); err != nil {
					done <- err
					return
				}
				if buf[0] != byte(i) {
					done <- fmt.Errorf("spin %v: Bcast %d delivered %d", spin, i, buf[0])
					return
				}
			}
			done <- nil
		}()
		for range 2 {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("spin %v: the Bcasts hang", spin)
			}
		}
	}
}

// awaitRanks waits for the ranks of wg, and fails the test if they are not all
// done within d: what hangs.
func awaitRanks(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s hang", what)
	}
}
