package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

func TestRunBadArguments(t *testing.T) {
	var called atomic.Int32
	fn := func(*mpi.Comm) error { called.Add(1); return nil }
	tests := []struct {
		name string
		n    int
		fn   func(*mpi.Comm) error
		opts []mpi.Option
	}{
		{"no ranks", 0, fn, nil},
		{"negative ranks", -1, fn, nil},
		{"nil function", 1, nil, nil},
		{"negative eager limit", 1, fn, []mpi.Option{mpi.WithEagerLimit(-1)}},
		{"negative pool cap", 1, fn, []mpi.Option{mpi.WithPoolCap(-1)}},
		{"negative spin", 1, fn, []mpi.Option{mpi.WithSpin(-time.Second)}},
		{"thread level too high", 1, fn, []mpi.Option{mpi.WithThreadLevel(mpi.ThreadMultiple + 1)}},
		{"thread level too low", 1, fn, []mpi.Option{mpi.WithThreadLevel(-1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t, tt.n, tt.fn, tt.opts...)
			if _, cerr := wantClass(err, mpi.ErrArg); cerr != nil {
				t.Error(cerr)
			}
		})
	}
	if n := called.Load(); n != 0 {
		t.Errorf("the rank function ran %d times in jobs that could not start", n)
	}
}

func TestRunRanks(t *testing.T) {
	const n = 5
	var mu sync.Mutex
	seen := map[int]int{}
	mustRun(t, n, func(c *mpi.Comm) error {
		mu.Lock()
		seen[c.Rank()]++
		mu.Unlock()
		if c.Size() != n {
			return fmt.Errorf("Size %d, want %d", c.Size(), n)
		}
		if s := c.String(); !strings.Contains(s, fmt.Sprintf("rank %d of %d", c.Rank(), n)) {
			return fmt.Errorf("String %q does not name rank %d of %d", s, c.Rank(), n)
		}
		return nil
	})
	for r := range n {
		if seen[r] != 1 {
			t.Errorf("rank %d ran %d times", r, seen[r])
		}
	}
	if len(seen) != n {
		t.Errorf("ranks seen: %v", seen)
	}
}

func TestRunJoinsErrors(t *testing.T) {
	sentinel := errors.New("rank one's own failure")
	failed := newGate() // rank 1 fails after rank 3, whose call would otherwise see the end of the job
	err := run(t, 4, func(c *mpi.Comm) error {
		switch c.Rank() {
		case 1:
			if err := failed.wait(); err != nil {
				return err
			}
			return fmt.Errorf("wrapped: %w", sentinel)
		case 3:
			defer failed.open()
			return mpi.Send(c, []int{1}, 99, 0) // an *mpi.Error naming rank 3 itself
		}
		return nil
	})
	if !errors.Is(err, sentinel) || !errors.Is(err, mpi.ErrRank) {
		t.Fatalf("Run error %v: want both ranks' errors, through errors.Is", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || lines[0] != "rank 1: wrapped: rank one's own failure" || !strings.Contains(lines[1], "rank 3") {
		t.Errorf("Run error:\n%v\nwant two lines in rank order, each naming its rank", err)
	}
	var e *mpi.Error
	if !errors.As(err, &e) || e.Rank != 3 || e.Peer != 99 {
		t.Errorf("errors.As found %+v, want rank 3's *mpi.Error", e)
	}
}

// blockedOps are operations that rank 0 starts towards rank 1 and that wait for it.
var blockedOps = []struct {
	name      string
	op        string // the Op, peer and tag of the error it returns
	peer, tag int
	do        func(c *mpi.Comm) error
}{
	{"Recv", "Recv", 1, 0, func(c *mpi.Comm) error { return errOf(mpi.Recv(c, make([]byte, 8), 1, 0)) }},
	{"Recv AnySource", "Recv", mpi.AnySource, mpi.AnyTag, func(c *mpi.Comm) error {
		return errOf(mpi.Recv(c, make([]byte, 8), mpi.AnySource, mpi.AnyTag))
	}},
	{"Probe", "Probe", 1, 0, func(c *mpi.Comm) error { return errOf(mpi.Probe(c, 1, 0)) }},
	{"Mprobe", "Mprobe", 1, 0, func(c *mpi.Comm) error { _, _, err := mpi.Mprobe(c, 1, 0); return err }},
	{"Wait", "Irecv", 1, 0, func(c *mpi.Comm) error {
		r, err := mpi.Irecv(c, make([]byte, 8), 1, 0)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}},
	{"Waitany", "Irecv", 1, 0, func(c *mpi.Comm) error {
		r1, _ := mpi.Irecv(c, make([]byte, 8), 1, 0)
		r2, _ := mpi.Irecv(c, make([]byte, 8), 1, 1)
		_, _, err := mpi.Waitany(r1, r2)
		return err
	}},
	{"Waitall", "Irecv", 1, 0, func(c *mpi.Comm) error {
		r1, _ := mpi.Irecv(c, make([]byte, 8), 1, 0)
		r2, _ := mpi.Irecv(c, make([]byte, 8), 1, 1)
		return errOf(mpi.Waitall(r1, r2))
	}},
	{"Ssend", "Ssend", 1, 0, func(c *mpi.Comm) error { return mpi.Ssend(c, []byte{1}, 1, 0) }},
	{"rendezvous Send", "Send", 1, 0, func(c *mpi.Comm) error { return mpi.Send(c, make([]byte, 1<<20), 1, 0) }},
	{"Wait for Isend", "Isend", 1, 0, func(c *mpi.Comm) error {
		return waited(mpi.Isend[byte])(c, make([]byte, 1<<20), 1, 0)
	}},
	{"Sendrecv", "Sendrecv", 1, 0, func(c *mpi.Comm) error {
		return errOf(mpi.Sendrecv(c, []byte{1}, 1, 0, make([]byte, 1), 1, 0))
	}},
	{"DetachBuffer", "DetachBuffer", mpi.NoValue, mpi.NoValue, func(c *mpi.Comm) error {
		if err := c.AttachBuffer(make([]byte, 1000)); err != nil {
			return err
		}
		if err := mpi.Bsend(c, []byte{1}, 1, 0); err != nil {
			return err
		}
		return errOf(c.DetachBuffer())
	}},
}

// findClass returns the first *mpi.Error of class in err's tree, or nil.
func findClass(err error, class mpi.Class) *mpi.Error {
	if e, ok := err.(*mpi.Error); ok && e.Class == class {
		return e
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, part := range u.Unwrap() {
			if e := findClass(part, class); e != nil {
				return e
			}
		}
	case interface{ Unwrap() error }:
		return findClass(u.Unwrap(), class)
	}
	return nil
}

// TestFailureReleasesBlockedRanks makes rank 1 fail (panic, return an error, or
// Abort) while rank 0 waits for it in each blocking operation: rank 0 must get an
// error naming rank 1 (ErrProcFailed, or ErrAborted with the code), not hang.
func TestFailureReleasesBlockedRanks(t *testing.T) {
	failures := []struct {
		name   string
		fail   func(c *mpi.Comm, op string) error // rank 1, after a delay
		class  mpi.Class                          // of rank 0's error
		detail string                             // what rank 0's error says of rank 1, before the op's name
	}{
		{"panic", func(_ *mpi.Comm, op string) error { panic("kaboom during " + op) },
			mpi.ErrProcFailed, "rank 1 panicked: kaboom during "},
		{"error", func(_ *mpi.Comm, op string) error { return errors.New("rank one gave up during " + op) },
			mpi.ErrProcFailed, "rank 1 returned an error: rank one gave up during "},
		{"abort", func(c *mpi.Comm, op string) error { return c.Abort(3) },
			mpi.ErrAborted, "rank 1 called Abort(3)"},
	}
	for _, f := range failures {
		for _, b := range blockedOps {
			t.Run(f.name+"/"+b.name, func(t *testing.T) {
				var blockedErr error
				err := run(t, 2, rankFuncs(
					func(c *mpi.Comm) error {
						blockedErr = b.do(c)
						return blockedErr
					},
					func(c *mpi.Comm) error {
						time.Sleep(20 * time.Millisecond) // let rank 0 block
						return f.fail(c, b.name)
					}))
				if err := checkError(blockedErr, f.class, b.op, 0, b.peer, b.tag); err != nil {
					t.Errorf("rank 0's %s: %v", b.name, err)
				}
				want := f.detail
				if f.class == mpi.ErrProcFailed {
					want += b.name
				}
				if blockedErr == nil || !strings.Contains(blockedErr.Error(), want) {
					t.Errorf("rank 0's %s error %q does not say %q", b.name, blockedErr, want)
				}
				if e := findClass(blockedErr, mpi.ErrAborted); f.class == mpi.ErrAborted && (e == nil || e.Code != 3) {
					t.Errorf("rank 0's %s error %v: want the abort code 3", b.name, blockedErr)
				}
				if !errors.Is(err, f.class) {
					t.Errorf("Run error %v does not carry rank 0's %v", err, f.class)
				}
				if f.name != "panic" {
					return
				}
				e := findClass(err, mpi.ErrPanic)
				if e == nil {
					t.Fatalf("Run error %v: no ErrPanic", err)
				}
				if e.Rank != 1 || !strings.Contains(e.Error(), "kaboom during "+b.name) ||
					!strings.Contains(e.Error(), "goroutine ") || !strings.Contains(e.Error(), "run_test.go") {
					t.Errorf("the panic error names rank %d and says:\n%v\nwant rank 1, the panic value and the stack", e.Rank, e)
				}
			})
		}
	}
}

// TestGoexitReleasesBlockedRanks has rank 1 end with runtime.Goexit, as t.FailNow in
// a rank function does: neither a return nor a panic, but the rank is gone all the
// same, and rank 0, waiting for it, must be released rather than hang. Rank 0 polls
// with Test for 3 s so that the test fails rather than hangs when it is not.
func TestGoexitReleasesBlockedRanks(t *testing.T) {
	var blockedErr error
	err := run(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			r, err := mpi.Irecv(c, []int{0}, 1, 0)
			if err != nil {
				return err
			}
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) {
				_, ok, err := r.Test()
				if ok {
					blockedErr = err
					return err
				}
				time.Sleep(time.Millisecond)
			}
			blockedErr = errors.New("still waiting 3 s after rank 1 called runtime.Goexit")
			r.Cancel()
			r.Wait()
			return blockedErr
		},
		func(c *mpi.Comm) error {
			time.Sleep(20 * time.Millisecond)
			runtime.Goexit()
			return nil
		}))
	if !errors.Is(blockedErr, mpi.ErrProcFailed) || !strings.Contains(fmt.Sprint(blockedErr), "rank 1") {
		t.Errorf("rank 0's receive from rank 1: %v; want ErrProcFailed naming rank 1", blockedErr)
	}
	if err == nil || !strings.Contains(err.Error(), "rank 1:") {
		t.Errorf("Run error %v: want one naming rank 1, which never returned", err)
	}
}

func TestAbort(t *testing.T) {
	const code = 3
	var mu sync.Mutex
	errs := map[string]error{} // what each rank's operations returned
	record := func(rank int, op string, err error) {
		mu.Lock()
		errs[fmt.Sprintf("rank %d: %s", rank, op)] = err
		mu.Unlock()
	}
	err := run(t, 3, func(c *mpi.Comm) error {
		if c.Rank() == 2 {
			time.Sleep(20 * time.Millisecond)
			err := c.Abort(code)
			record(2, "Abort", err)
			return err
		}
		// Ranks 0 and 1 block, on different operations, until the abort releases them.
		var err error
		if c.Rank() == 0 {
			_, err = mpi.Recv(c, []int{0}, 2, 0)
		} else {
			_, err = mpi.Probe(c, mpi.AnySource, mpi.AnyTag)
		}
		record(c.Rank(), "blocked", err)
		// Every later operation fails at once, even one that would succeed.
		record(c.Rank(), "Send", mpi.Send(c, []int{1}, 1-c.Rank(), 0))
		record(c.Rank(), "Isend", errOf(mpi.Isend(c, []int{1}, 1-c.Rank(), 0)))
		record(c.Rank(), "Irecv", errOf(mpi.Irecv(c, []int{1}, 1-c.Rank(), 0)))
		record(c.Rank(), "Recv", errOf(mpi.Recv(c, []int{1}, 1-c.Rank(), 0)))
		record(c.Rank(), "Iprobe", func() error { _, _, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); return err }())
		record(c.Rank(), "Dup", errOf(c.Dup()))
		record(c.Rank(), "AttachBuffer", c.AttachBuffer(make([]byte, 100)))
		return err
	})
	for what, err := range errs {
		var e *mpi.Error
		if !errors.Is(err, mpi.ErrAborted) || !errors.As(err, &e) || e.Code != code {
			t.Errorf("%s: %v; want ErrAborted with code %d", what, err, code)
			continue
		}
		if !strings.HasPrefix(what, fmt.Sprintf("rank %d:", e.Rank)) || !strings.Contains(err.Error(), "rank 2 called Abort(3)") {
			t.Errorf("%s: %v; want it to name its own rank and say that rank 2 called Abort(3)", what, err)
		}
	}
	if len(errs) != 1+2*8 {
		t.Errorf("%d operations recorded, want 17", len(errs))
	}
	var e *mpi.Error
	if !errors.Is(err, mpi.ErrAborted) || !errors.As(err, &e) || e.Code != code {
		t.Errorf("Run error %v: want ErrAborted carrying code %d", err, code)
	}
	if errors.Is(err, mpi.ErrProcFailed) {
		t.Errorf("Run error %v: an abort is not a process failure", err)
	}
}

func TestTunables(t *testing.T) {
	want := []mpi.Tunable{
		{Name: "WithEagerLimit", Env: "WEFT_EAGER_LIMIT", Default: "16384"},
		{Name: "WithNetEagerLimit", Env: "WEFT_NET_EAGER_LIMIT", Default: "65536"},
		{Name: "WithPoolCap", Env: "WEFT_POOL_CAP", Default: "67108864"},
		{Name: "WithSpin", Env: "WEFT_SPIN", Default: "20µs"},
		{Name: "WithNetSpin", Env: "WEFT_NET_SPIN", Default: "200µs"},
		{Name: "WithNetDelay", Env: "WEFT_NET_DELAY", Default: "0s"},
		{Name: "WithNetUnix", Env: "WEFT_NET_UNIX", Default: "true"},
		{Name: "WithNetCongestion", Env: "WEFT_NET_CONGESTION", Default: "auto"},
		{Name: "WithNetShm", Env: "WEFT_NET_SHM", Default: "true"},
		{Name: "WithHostColl", Env: "WEFT_HOST_COLL", Default: "true"},
		{Name: "WithErrorsReturn", Env: "WEFT_ERRORS", Default: "fatal"},
		{Name: "WithThreadLevel", Env: "WEFT_THREAD_LEVEL", Default: "multiple"},
	}
	unsetenv(t, "WEFT_EAGER_LIMIT", "WEFT_NET_EAGER_LIMIT", "WEFT_POOL_CAP", "WEFT_SPIN", "WEFT_NET_SPIN", "WEFT_NET_DELAY", "WEFT_NET_UNIX", "WEFT_NET_CONGESTION", "WEFT_NET_SHM", "WEFT_HOST_COLL", "WEFT_ERRORS", "WEFT_THREAD_LEVEL")
	t.Setenv("WEFT_POOL_CAP", "12345")
	got := mpi.Tunables()
	if len(got) != len(want) {
		t.Fatalf("Tunables() = %+v, want %d entries", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		w.Value = w.Default
		if w.Env == "WEFT_POOL_CAP" {
			w.Value = "12345"
		}
		if g.Name != w.Name || g.Env != w.Env || g.Default != w.Default || g.Value != w.Value || g.Doc == "" {
			t.Errorf("Tunables()[%d] = %+v, want %+v with a Doc", i, g, w)
		}
	}
}

func TestBadEnvironment(t *testing.T) {
	tests := []struct{ env, value string }{
		{"WEFT_SPIN", "fast"},
		{"WEFT_SPIN", "-1s"},
		{"WEFT_EAGER_LIMIT", "-1"},
		{"WEFT_EAGER_LIMIT", "16k"},
		{"WEFT_NET_EAGER_LIMIT", "-5"},
		{"WEFT_NET_EAGER_LIMIT", "2000000000"},
		{"WEFT_NET_SPIN", "-1us"},
		{"WEFT_NET_DELAY", "-50us"},
		{"WEFT_POOL_CAP", "lots"},
		{"WEFT_ERRORS", "ignore"},
		{"WEFT_NET_UNIX", "maybe"},
		{"WEFT_NET_SHM", "yes please"},
		{"WEFT_NET_CONGESTION", "cubic; reno"},
		{"WEFT_NET_CONGESTION", "a-name-longer-than-15"},
		{"WEFT_THREAD_LEVEL", "turbo"},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			called := false
			err := run(t, 2, func(*mpi.Comm) error { called = true; return nil })
			if _, cerr := wantClass(err, mpi.ErrArg); cerr != nil {
				t.Error(cerr)
			} else if !strings.Contains(err.Error(), tt.env) || !strings.Contains(err.Error(), tt.value) {
				t.Errorf("error %q does not name %s=%s", err, tt.env, tt.value)
			}
			if called {
				t.Error("the ranks ran despite the bad setting")
			}
		})
	}
}

func TestEnvironmentSettings(t *testing.T) {
	t.Run("WEFT_EAGER_LIMIT=0", func(t *testing.T) {
		t.Setenv("WEFT_EAGER_LIMIT", "0")
		checkCompletion(t, mpi.Send[byte], false, 8, true)
	})
	t.Run("option wins over environment", func(t *testing.T) {
		t.Setenv("WEFT_EAGER_LIMIT", "0")
		checkCompletion(t, mpi.Send[byte], false, 8, false, mpi.WithEagerLimit(1024))
	})
	t.Run("WEFT_POOL_CAP=0", func(t *testing.T) {
		t.Setenv("WEFT_POOL_CAP", "0")
		checkCompletion(t, mpi.Send[byte], false, 8, true)
	})
}

// unsetenv unsets the variables for the rest of the test.
func unsetenv(t *testing.T, names ...string) {
	for _, name := range names {
		t.Setenv(name, "") // restores the old value after the test
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEnvironmentInfo(t *testing.T) {
	t0 := mpi.Wtime()
	time.Sleep(20 * time.Millisecond)
	if d := mpi.Wtime() - t0; d < 0.02 || d > 5 {
		t.Errorf("Wtime advanced %g s over a 20 ms sleep", d)
	}
	if tick := mpi.Wtick(); tick <= 0 || tick > 1e-3 {
		t.Errorf("Wtick() = %g, want a positive resolution of at most 1 ms", tick)
	}
	if lv := mpi.LibraryVersion(); !strings.Contains(lv, mpi.WeftVersion) || !strings.Contains(lv, runtime.Version()) {
		t.Errorf("LibraryVersion() = %q, want it to name Weft %s and %s", lv, mpi.WeftVersion, runtime.Version())
	}
	if major, minor := mpi.Version(); major < 1 || minor < 0 {
		t.Errorf("Version() = %d.%d", major, minor)
	}
	host, _ := os.Hostname()
	if name, err := mpi.ProcessorName(); err != nil || name != host {
		t.Errorf("ProcessorName() = %q, %v; want the host name %q", name, err, host)
	}
}
