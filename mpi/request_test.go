package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/mpi"
)

// isNullStatus reports whether st is the status of a null or inactive request.
func isNullStatus(st mpi.Status) bool {
	return st.Source == mpi.ProcNull && st.Tag == mpi.AnyTag && mpi.GetCount[byte](st) == 0 && !st.Cancelled && st.Err == nil
}

// pollTest calls r.Test until it reports completion, for at most syncTimeout.
func pollTest(r *mpi.Request) (mpi.Status, error) {
	deadline := time.Now().Add(syncTimeout)
	for time.Now().Before(deadline) {
		st, ok, err := r.Test()
		if ok || err != nil {
			return st, err
		}
		time.Sleep(50 * time.Microsecond)
	}
	return mpi.Status{}, errors.New("Test never reported completion")
}

func TestIsendIrecvTest(t *testing.T) {
	for _, n := range []int{4, 3 * mpi.DefaultEagerLimit} { // int64s: eager and rendezvous
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			posted := newGate()
			msg := make([]int64, n)
			for i := range msg {
				msg[i] = int64(i) - 7
			}
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if err := posted.wait(); err != nil {
						return err
					}
					r, err := mpi.Isend(c, msg, 1, 1)
					if err != nil {
						return err
					}
					if _, err := pollTest(r); err != nil {
						return fmt.Errorf("Isend: %v", err)
					}
					if _, _, err := r.Test(); !errors.Is(err, mpi.ErrRequest) {
						return fmt.Errorf("Test of a completed Isend: %v, want ErrRequest", err)
					}
					return nil
				},
				func(c *mpi.Comm) error {
					buf := make([]int64, n)
					r, err := mpi.Irecv(c, buf, 0, 1)
					if err != nil {
						return err
					}
					if st, ok, err := r.Test(); ok || err != nil {
						return fmt.Errorf("Test before the send: ok %v, %+v, %v", ok, st, err)
					}
					time.Sleep(time.Millisecond)
					if _, ok, err := r.Test(); ok || err != nil {
						return fmt.Errorf("Test before the send: ok %v, %v", ok, err)
					}
					posted.open()
					st, err := pollTest(r)
					if err != nil {
						return err
					}
					if st.Source != 0 || st.Tag != 1 || mpi.GetCount[int64](st) != n || !slices.Equal(buf, msg) {
						return fmt.Errorf("Irecv: status {source %d, tag %d, count %d} or data wrong", st.Source, st.Tag, mpi.GetCount[int64](st))
					}
					if _, err := r.Wait(); !errors.Is(err, mpi.ErrRequest) {
						return fmt.Errorf("Wait after Test completed the request: %v, want ErrRequest", err)
					}
					return nil
				}))
		})
	}
}

func TestIssendTest(t *testing.T) {
	tested := newGate()
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			r, err := mpi.Issend(c, []int{8}, 1, 0)
			if err != nil {
				return err
			}
			for range 2 {
				if _, ok, err := r.Test(); ok || err != nil {
					return fmt.Errorf("Test of an Issend before its receive was posted: ok %v, %v", ok, err)
				}
				time.Sleep(time.Millisecond)
			}
			tested.open()
			_, err = pollTest(r)
			return err
		},
		func(c *mpi.Comm) error {
			if err := tested.wait(); err != nil {
				return err
			}
			buf := []int{0}
			if _, err := mpi.Recv(c, buf, 0, 0); err != nil || buf[0] != 8 {
				return fmt.Errorf("Recv: %v, %v", buf, err)
			}
			return nil
		}))
}

// A stage is a group of messages that rank 0 sends to rank 1 when rank 1 says so.
type stage struct {
	tags []int
	gate gate // opened by the receiver when it is ready for these
	sent gate // opened by the sender once they are sent
}

func stages(tagGroups ...[]int) []stage {
	s := make([]stage, len(tagGroups))
	for i, tags := range tagGroups {
		s[i] = stage{tags, newGate(), newGate()}
	}
	return s
}

// sender sends the stages from rank 0 to rank 1: for each, it waits for its gate,
// sends []int{100+tag} with each tag, and opens sent.
func sender(ss []stage) func(c *mpi.Comm) error {
	return func(c *mpi.Comm) error {
		for _, s := range ss {
			if err := s.gate.wait(); err != nil {
				return err
			}
			for _, tag := range s.tags {
				if err := mpi.Send(c, []int{100 + tag}, 1, tag); err != nil {
					return err
				}
			}
			s.sent.open()
		}
		return nil
	}
}

// release lets the sender send stage s and waits until it has.
func (s stage) release() error {
	s.gate.open()
	return s.sent.wait()
}

// irecvs posts one Irecv of an int from rank 0 per tag; a tag < 0 leaves a nil entry.
func irecvs(c *mpi.Comm, tags ...int) ([]*mpi.Request, [][]int, error) {
	reqs, bufs := make([]*mpi.Request, len(tags)), make([][]int, len(tags))
	for i, tag := range tags {
		if tag < 0 {
			continue
		}
		bufs[i] = []int{-1}
		var err error
		if reqs[i], err = mpi.Irecv(c, bufs[i], 0, tag); err != nil {
			return nil, nil, err
		}
	}
	return reqs, bufs, nil
}

// wantRecv checks that a receive with tag got its message.
func wantRecv(what string, st mpi.Status, buf []int, tag int) error {
	if st.Source != 0 || st.Tag != tag || mpi.GetCount[int](st) != 1 || buf[0] != 100+tag || st.Err != nil {
		return fmt.Errorf("%s: status %+v, buffer %v; want source 0, tag %d, [%d]", what, st, buf, tag, 100+tag)
	}
	return nil
}

func TestWaitall(t *testing.T) {
	ss := stages([]int{0, 1, 2, 3})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		reqs, bufs, err := irecvs(c, 0, -1, -1, 1, -1)
		if err != nil {
			return err
		}
		inactive, err := mpi.RecvInit(c, []int{0}, 0, 2)
		if err != nil {
			return err
		}
		pbuf := []int{-1}
		started, err := mpi.RecvInit(c, pbuf, 0, 3)
		if err != nil {
			return err
		}
		if err := started.Start(); err != nil {
			return err
		}
		reqs[2], reqs[4] = inactive, started
		if err := ss[0].release(); err != nil {
			return err
		}
		sts, err := mpi.Waitall(reqs...)
		if err != nil {
			return err
		}
		if len(sts) != 5 {
			return fmt.Errorf("Waitall returned %d statuses for 5 requests", len(sts))
		}
		for i, tag := range map[int]int{0: 0, 3: 1} {
			if err := wantRecv(fmt.Sprintf("status %d", i), sts[i], bufs[i], tag); err != nil {
				return err
			}
		}
		if err := wantRecv("persistent status", sts[4], pbuf, 3); err != nil {
			return err
		}
		if !isNullStatus(sts[1]) || !isNullStatus(sts[2]) {
			return fmt.Errorf("statuses of a nil and an inactive request: %+v, %+v; want empty (ProcNull, AnyTag)", sts[1], sts[2])
		}
		want := []*mpi.Request{nil, nil, inactive, nil, started}
		if !slices.Equal(reqs, want) {
			return fmt.Errorf("after Waitall the requests are %v, want %v (completed ones nil, persistent ones kept)", reqs, want)
		}
		// Tag 2 was sent but its persistent receive never started: receive it now.
		if err := inactive.Start(); err != nil {
			return err
		}
		_, err = inactive.Wait()
		return err
	}))
}

func TestWaitallErrors(t *testing.T) {
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if err := mpi.Send(c, []int{1, 2}, 1, 0); err != nil {
				return err
			}
			return mpi.Send(c, []int{3}, 1, 1)
		},
		func(c *mpi.Comm) error {
			small, ok := []int{0}, []int{0}
			r0, err := mpi.Irecv(c, small, 0, 0)
			if err != nil {
				return err
			}
			r1, err := mpi.Irecv(c, ok, 0, 1)
			if err != nil {
				return err
			}
			sts, err := mpi.Waitall(r0, r1)
			if !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("Waitall with a truncated receive: %v, want ErrTruncate", err)
			}
			if !errors.Is(sts[0].Err, mpi.ErrTruncate) || sts[1].Err != nil || ok[0] != 3 {
				return fmt.Errorf("statuses' errors %v, %v (data %v); want ErrTruncate for the first only", sts[0].Err, sts[1].Err, ok)
			}
			return nil
		}))
}

// TestWaitallInto: WaitallInto and TestallInto write every status into the
// caller's slice, overwriting what a reused slice held (a failed receive's
// error, a receive's count under a send's status), ignore them when it is nil
// but still join the errors and retire the requests, and refuse a slice too
// short (ErrArg, naming the rank) without consuming any request.
func TestWaitallInto(t *testing.T) {
	mustRun(t, 2, func(c *mpi.Comm) error {
		peer := 1 - c.Rank()
		stale := mpi.Status{Source: 99, Tag: 99, Cancelled: true, Err: errors.New("stale")}
		sts := []mpi.Status{stale, stale, stale, stale}
		exchange := func(round int) ([]*mpi.Request, []int, error) {
			got := []int{-1}
			r, err := mpi.Irecv(c, got, peer, round)
			if err != nil {
				return nil, nil, err
			}
			s, err := mpi.Isend(c, []int{10*round + c.Rank()}, peer, round)
			if err != nil {
				return nil, nil, err
			}
			return []*mpi.Request{r, nil, s}, got, nil
		}
		reqs, got, err := exchange(0)
		if err != nil {
			return err
		}
		if err := mpi.WaitallInto(sts[:2], reqs...); !errors.Is(err, mpi.ErrArg) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", c.Rank())) {
			return fmt.Errorf("WaitallInto with 2 statuses for 3 requests: %v, want ErrArg naming rank %d", err, c.Rank())
		}
		if ok, err := mpi.TestallInto(sts[:1], reqs...); ok || !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("TestallInto with 1 status for 3 requests: %v, %v; want ErrArg", ok, err)
		}
		if reqs[0] == nil || reqs[2] == nil || sts[0].Source != 99 {
			return fmt.Errorf("a refused call consumed requests %v or wrote status %+v", reqs, sts[0])
		}
		if err := mpi.WaitallInto(sts, reqs...); err != nil {
			return err
		}
		want := mpi.Status{Source: peer, Tag: 0}
		if st := sts[0]; st.Source != peer || st.Tag != 0 || st.Cancelled || st.Err != nil || mpi.GetCount[int](st) != 1 || got[0] != peer {
			return fmt.Errorf("receive's status %+v, data %v; want %+v with one int, [%d]", st, got, want, peer)
		}
		if !isNullStatus(sts[1]) {
			return fmt.Errorf("nil request's status %+v, want empty", sts[1])
		}
		if st := sts[2]; st.Source != peer || st.Tag != 0 || st.Cancelled || st.Err != nil || mpi.GetCount[byte](st) != 0 {
			return fmt.Errorf("send's status %+v, want %+v and no count", st, want)
		}
		if sts[3] != stale || !slices.Equal(reqs, []*mpi.Request{nil, nil, nil}) {
			return fmt.Errorf("status past the requests %+v (want it untouched), requests %v (want all nil)", sts[3], reqs)
		}
		// A send's status where a receive's was has no count; a truncated receive
		// fails its status, and the next call into the same slice clears it.
		small := make([]int, 0)
		r, err := mpi.Irecv(c, small, peer, 1)
		if err != nil {
			return err
		}
		s, err := mpi.Isend(c, []int{7}, peer, 1)
		if err != nil {
			return err
		}
		if err := mpi.WaitallInto(sts, s, r); !errors.Is(err, mpi.ErrTruncate) || !errors.Is(sts[1].Err, mpi.ErrTruncate) || sts[0].Err != nil || mpi.GetCount[byte](sts[0]) != 0 {
			return fmt.Errorf("a send, then a truncated receive: %v, statuses %+v, %+v; want no count in the first, ErrTruncate in the second", err, sts[0], sts[1])
		}
		if reqs, got, err = exchange(2); err != nil {
			return err
		}
		ok := false
		for deadline := time.Now().Add(syncTimeout); !ok && err == nil && time.Now().Before(deadline); {
			ok, err = mpi.TestallInto(sts, reqs...)
		}
		if !ok || err != nil || sts[0].Tag != 2 || got[0] != 20+peer || !isNullStatus(sts[1]) || reqs[0] != nil {
			return fmt.Errorf("TestallInto into the failed slice: %v, %v, statuses %+v, %+v, data %v, requests %v", ok, err, sts[0], sts[1], got, reqs)
		}
		// A request already completed, waited for through another copy: ErrRequest,
		// in a status cleared of what the slice held.
		if err := mpi.WaitallInto(sts, s); !errors.Is(err, mpi.ErrRequest) || sts[0] != (mpi.Status{Err: sts[0].Err}) || !errors.Is(sts[0].Err, mpi.ErrRequest) {
			return fmt.Errorf("WaitallInto of a completed request: %v, status %+v; want ErrRequest alone", err, sts[0])
		}
		// nil statuses: ignored, and the errors still joined.
		r, err = mpi.Irecv(c, small, peer, 3)
		if err != nil {
			return err
		}
		if s, err = mpi.Isend(c, []int{7}, peer, 3); err != nil {
			return err
		}
		reqs = []*mpi.Request{r, s}
		if err := mpi.WaitallInto(nil, reqs...); !errors.Is(err, mpi.ErrTruncate) || reqs[0] != nil || reqs[1] != nil {
			return fmt.Errorf("WaitallInto(nil) with a truncated receive: %v, requests %v; want ErrTruncate, both nil", err, reqs)
		}
		return nil
	})
}

// TestIntoAllocates: waiting for a window of requests into reused slices, all at
// once (WaitallInto) or some at a time (WaitsomeInto), allocates nothing for the
// statuses and indices, where Waitall allocates them at every call.
func TestIntoAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops engine requests: allocations cannot be counted")
	}
	mustRun(t, 1, func(c *mpi.Comm) error {
		const window = 16
		sts, reqs := make([]mpi.Status, 2*window), make([]*mpi.Request, 2*window)
		buf, got := []byte{1}, make([]byte, 1)
		var err error
		step := func(wait func() error) func() {
			return func() {
				for i := range window {
					if reqs[2*i], err = mpi.Irecv(c, got, 0, i); err != nil {
						return
					}
					if reqs[2*i+1], err = mpi.Isend(c, buf, 0, i); err != nil {
						return
					}
				}
				err = wait()
			}
		}
		into := testing.AllocsPerRun(200, step(func() error { return mpi.WaitallInto(sts, reqs...) }))
		if err != nil {
			return err
		}
		fresh := testing.AllocsPerRun(200, step(func() error { _, err := mpi.Waitall(reqs...); return err }))
		if err != nil {
			return err
		}
		idx := make([]int, len(reqs))
		some := testing.AllocsPerRun(200, step(func() error {
			for left := len(reqs); left > 0; {
				n, err := mpi.WaitsomeInto(idx, sts, reqs...)
				if err != nil {
					return err
				}
				left -= n
			}
			return nil
		}))
		if err != nil {
			return err
		}
		// All take the requests' handles from slabs of up to 63 (one allocation per 63).
		if into > 2*window/63.0+0.5 || some > 2*window/63.0+0.5 || fresh < into+1 {
			return fmt.Errorf("allocations per window of %d requests: WaitallInto %.2f, WaitsomeInto %.2f, Waitall %.2f; want WaitallInto's and WaitsomeInto's only the handles' slabs, Waitall's one more", 2*window, into, some, fresh)
		}
		return nil
	})
}

func TestWaitany(t *testing.T) {
	ss := stages([]int{1}, []int{0}, []int{2})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		pbuf := []int{-1}
		persistent, err := mpi.RecvInit(c, pbuf, 0, 2)
		if err != nil {
			return err
		}
		reqs, bufs, err := irecvs(c, -1, -1, 0, 1)
		if err != nil {
			return err
		}
		reqs[1] = persistent
		for _, want := range []struct{ stage, index, tag int }{{0, 3, 1}, {1, 2, 0}} {
			if err := ss[want.stage].release(); err != nil {
				return err
			}
			i, st, err := mpi.Waitany(reqs...)
			if err != nil {
				return err
			}
			if i != want.index {
				return fmt.Errorf("Waitany returned %d, want %d (the only completed receive)", i, want.index)
			}
			if err := wantRecv("Waitany", st, bufs[i], want.tag); err != nil {
				return err
			}
			if reqs[i] != nil {
				return fmt.Errorf("Waitany left entry %d set", i)
			}
		}
		if err := persistent.Start(); err != nil {
			return err
		}
		if err := ss[2].release(); err != nil {
			return err
		}
		i, st, err := mpi.Waitany(reqs...)
		if err != nil || i != 1 {
			return fmt.Errorf("Waitany on the started persistent request: %d, %v; want 1", i, err)
		}
		if err := wantRecv("persistent", st, pbuf, 2); err != nil {
			return err
		}
		if reqs[1] != persistent {
			return errors.New("Waitany cleared a persistent request")
		}
		if i, _, err := mpi.Waitany(reqs...); i != mpi.Undefined || err != nil {
			return fmt.Errorf("Waitany after all completed: %d, %v; want Undefined", i, err)
		}
		return nil
	}))
}

func TestWaitsome(t *testing.T) {
	ss := stages([]int{2}, []int{0, 1, 3})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		reqs, bufs, err := irecvs(c, 0, -1, 1, 2, 3)
		if err != nil {
			return err
		}
		tagOf := map[int]int{0: 0, 2: 1, 3: 2, 4: 3}    // index -> tag
		for st, want := range [][]int{{3}, {0, 2, 4}} { // the indices each stage completes
			if err := ss[st].release(); err != nil {
				return err
			}
			idx, sts, err := mpi.Waitsome(reqs...)
			if err != nil {
				return err
			}
			if len(sts) != len(idx) {
				return fmt.Errorf("Waitsome: %d indices, %d statuses", len(idx), len(sts))
			}
			got := slices.Sorted(slices.Values(idx))
			if !slices.Equal(got, want) {
				return fmt.Errorf("Waitsome returned indices %v, want %v (those whose message was sent)", idx, want)
			}
			for k, i := range idx {
				if err := wantRecv(fmt.Sprintf("Waitsome index %d", i), sts[k], bufs[i], tagOf[i]); err != nil {
					return err
				}
				if reqs[i] != nil {
					return fmt.Errorf("Waitsome left entry %d set", i)
				}
			}
		}
		if idx, sts, err := mpi.Waitsome(reqs...); idx != nil || sts != nil || err != nil {
			return fmt.Errorf("Waitsome with nothing active: %v, %v, %v; want nothing", idx, sts, err)
		}
		return nil
	}))
}

// TestWaitsomeInto: WaitsomeInto and TestsomeInto store the completed requests'
// indices and statuses at the start of the caller's slices, whatever those held
// before, or ignore the statuses for a nil slice; slices shorter than the requests
// are ErrArg and consume nothing; 0 says nothing is active, or (TestsomeInto)
// nothing completed.
func TestWaitsomeInto(t *testing.T) {
	ss := stages([]int{1}, []int{2, 3}, []int{0, 4})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		reqs, bufs, err := irecvs(c, 0, -1, 1, 2, 3, 4)
		if err != nil {
			return err
		}
		tagOf := map[int]int{0: 0, 2: 1, 3: 2, 4: 3, 5: 4} // index -> tag
		stale := mpi.Status{Source: 99, Tag: 99, Cancelled: true, Err: errors.New("stale")}
		idx, sts := make([]int, len(reqs)), make([]mpi.Status, len(reqs))
		refill := func() {
			for i := range idx {
				idx[i], sts[i] = -7, stale
			}
		}
		check := func(what string, n int, want []int, withStatuses bool) error {
			if got := slices.Sorted(slices.Values(idx[:n])); !slices.Equal(got, want) {
				return fmt.Errorf("%s: indices %v, want %v", what, idx[:n], want)
			}
			for k, i := range idx[:n] {
				if withStatuses {
					if err := wantRecv(fmt.Sprintf("%s index %d", what, i), sts[k], bufs[i], tagOf[i]); err != nil {
						return err
					}
				} else if bufs[i][0] != 100+tagOf[i] {
					return fmt.Errorf("%s: index %d received %v, want [%d]", what, i, bufs[i], 100+tagOf[i])
				}
				if reqs[i] != nil {
					return fmt.Errorf("%s left entry %d set", what, i)
				}
			}
			if !slices.Equal(idx[n:], slices.Repeat([]int{-7}, len(idx)-n)) {
				return fmt.Errorf("%s wrote past its %d indices: %v", what, n, idx)
			}
			return nil
		}
		var e *mpi.Error
		if _, err := mpi.WaitsomeInto(idx[:4], sts, reqs...); !errors.As(err, &e) || e.Class != mpi.ErrArg || e.Rank != 1 {
			return fmt.Errorf("WaitsomeInto with 4 indices for 6 requests: %v; want ErrArg naming rank 1", err)
		}
		if _, err := mpi.TestsomeInto(idx, sts[:2], reqs...); !errors.As(err, &e) || e.Class != mpi.ErrArg {
			return fmt.Errorf("TestsomeInto with 2 statuses for 6 requests: %v; want ErrArg", err)
		}
		refill()
		if n, err := mpi.TestsomeInto(idx, sts, reqs...); n != 0 || err != nil {
			return fmt.Errorf("TestsomeInto before any send: %d, %v; want 0", n, err)
		}
		if err := check("TestsomeInto before any send", 0, nil, true); err != nil {
			return err
		}
		steps := []struct {
			what  string
			call  func() (int, error)
			want  []int // the indices the stage's messages complete
			withS bool  // statuses stored
		}{
			{"WaitsomeInto, statuses ignored", func() (int, error) { return mpi.WaitsomeInto(idx, nil, reqs...) }, []int{2}, false},
			{"TestsomeInto", func() (int, error) { return mpi.TestsomeInto(idx, sts, reqs...) }, []int{3, 4}, true},
			{"WaitsomeInto of the last two", func() (int, error) { return mpi.WaitsomeInto(idx, sts, reqs...) }, []int{0, 5}, true},
		}
		for i, step := range steps {
			if err := ss[i].release(); err != nil {
				return err
			}
			refill()
			n, err := step.call()
			if err != nil {
				return err
			}
			if err := check(step.what, n, step.want, step.withS); err != nil {
				return err
			}
		}
		if n, err := mpi.WaitsomeInto(idx, nil, reqs...); n != 0 || err != nil {
			return fmt.Errorf("WaitsomeInto with nothing active: %d, %v; want 0", n, err)
		}
		return nil
	}))
}

func TestTestFamily(t *testing.T) {
	ss := stages([]int{1}, []int{0})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		reqs, bufs, err := irecvs(c, 0, -1, 1)
		if err != nil {
			return err
		}
		orig := slices.Clone(reqs)
		nothingDone := func(when string) error {
			if sts, ok, err := mpi.Testall(reqs...); ok || sts != nil || err != nil {
				return fmt.Errorf("%s: Testall = %v, %v, %v; want false", when, sts, ok, err)
			}
			if i, _, ok, err := mpi.Testany(reqs...); ok || i != mpi.Undefined || err != nil {
				return fmt.Errorf("%s: Testany = %d, %v, %v; want not ok, Undefined", when, i, ok, err)
			}
			if idx, _, err := mpi.Testsome(reqs...); len(idx) != 0 || err != nil {
				return fmt.Errorf("%s: Testsome = %v, %v; want none", when, idx, err)
			}
			return nil
		}
		if err := nothingDone("before any send"); err != nil {
			return err
		}
		if !slices.Equal(reqs, orig) {
			return errors.New("Test calls that completed nothing changed the request slice")
		}
		if err := ss[0].release(); err != nil {
			return err
		}
		if sts, ok, err := mpi.Testall(reqs...); ok || sts != nil || err != nil {
			return fmt.Errorf("Testall with one of two complete = %v, %v, %v; want false", sts, ok, err)
		}
		i, st, ok, err := mpi.Testany(reqs...)
		if err != nil || !ok || i != 2 {
			return fmt.Errorf("Testany after tag 1 arrived: %d, %v, %v; want 2", i, ok, err)
		}
		if err := wantRecv("Testany", st, bufs[2], 1); err != nil {
			return err
		}
		if reqs[2] != nil {
			return errors.New("Testany left its completed entry set")
		}
		if err := nothingDone("after Testany took the completed one"); err != nil {
			return err
		}
		if err := ss[1].release(); err != nil {
			return err
		}
		sts, ok, err := mpi.Testall(reqs...)
		if err != nil || !ok || len(sts) != 3 {
			return fmt.Errorf("Testall after all arrived: %v, %v, %v", sts, ok, err)
		}
		if err := wantRecv("Testall", sts[0], bufs[0], 0); err != nil {
			return err
		}
		if !isNullStatus(sts[1]) || !isNullStatus(sts[2]) {
			return fmt.Errorf("Testall statuses of nil entries: %+v, %+v; want empty", sts[1], sts[2])
		}
		if slices.ContainsFunc(reqs, func(r *mpi.Request) bool { return r != nil }) {
			return fmt.Errorf("Testall left completed entries set: %v", reqs)
		}
		return nil
	}))
}

// TestNothingActive calls every Wait and Test function on requests none of which is
// active: nil entries and a persistent request never started. MPI: they return at
// once; Waitany and Testany with index MPI_UNDEFINED and an empty status.
func TestNothingActive(t *testing.T) {
	mustRun(t, 1, func(c *mpi.Comm) error {
		inactive, err := mpi.RecvInit(c, []int{0}, 0, 9)
		if err != nil {
			return err
		}
		reqs := []*mpi.Request{nil, inactive}
		var errs []error
		fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
		if i, st, err := mpi.Waitany(reqs...); i != mpi.Undefined || err != nil || !isNullStatus(st) {
			fail("Waitany: %d, %+v, %v; want Undefined and an empty status", i, st, err)
		}
		if i, st, ok, err := mpi.Testany(reqs...); !ok || i != mpi.Undefined || err != nil || !isNullStatus(st) {
			fail("Testany: %d, %+v, ok %v, %v; want ok, Undefined and an empty status", i, st, ok, err)
		}
		if idx, sts, err := mpi.Waitsome(reqs...); len(idx) != 0 || len(sts) != 0 || err != nil {
			fail("Waitsome: %v, %v, %v; want nothing", idx, sts, err)
		}
		if idx, sts, err := mpi.Testsome(reqs...); len(idx) != 0 || len(sts) != 0 || err != nil {
			fail("Testsome: %v, %v, %v; want nothing", idx, sts, err)
		}
		if sts, err := mpi.Waitall(reqs...); err != nil || len(sts) != 2 || !isNullStatus(sts[0]) || !isNullStatus(sts[1]) {
			fail("Waitall: %+v, %v; want two empty statuses", sts, err)
		}
		if sts, ok, err := mpi.Testall(reqs...); !ok || err != nil || len(sts) != 2 || !isNullStatus(sts[0]) || !isNullStatus(sts[1]) {
			fail("Testall: %+v, %v, %v; want ok and two empty statuses", sts, ok, err)
		}
		if i, _, err := mpi.Waitany(); i != mpi.Undefined || err != nil {
			fail("Waitany(): %d, %v; want Undefined", i, err)
		}
		if st, ok, err := inactive.Test(); !ok || err != nil || !isNullStatus(st) {
			fail("Test of an inactive persistent request: %+v, %v, %v; want ok and an empty status", st, ok, err)
		}
		if st, err := inactive.Wait(); err != nil || !isNullStatus(st) {
			fail("Wait on an inactive persistent request: %+v, %v; want an empty status", st, err)
		}
		if reqs[0] != nil || reqs[1] != inactive {
			fail("the request slice changed: %v", reqs)
		}
		return errors.Join(errs...)
	})
}

func TestTestsome(t *testing.T) {
	ss := stages([]int{3, 1})
	mustRun(t, 2, rankFuncs(sender(ss), func(c *mpi.Comm) error {
		reqs, bufs, err := irecvs(c, 0, 1, 2, 3)
		if err != nil {
			return err
		}
		if err := ss[0].release(); err != nil {
			return err
		}
		idx, sts, err := mpi.Testsome(reqs...)
		if err != nil {
			return err
		}
		if got := slices.Sorted(slices.Values(idx)); !slices.Equal(got, []int{1, 3}) {
			return fmt.Errorf("Testsome returned %v, want [1 3]", idx)
		}
		for k, i := range idx {
			if err := wantRecv("Testsome", sts[k], bufs[i], i); err != nil {
				return err
			}
		}
		if reqs[1] != nil || reqs[3] != nil || reqs[0] == nil || reqs[2] == nil {
			return fmt.Errorf("after Testsome the requests are %v; want entries 1 and 3 nil, 0 and 2 kept", reqs)
		}
		for _, r := range []*mpi.Request{reqs[0], reqs[2]} {
			if err := r.Cancel(); err != nil {
				return err
			}
			if st, err := r.Wait(); err != nil || !st.Cancelled {
				return fmt.Errorf("cancelled receive: %+v, %v", st, err)
			}
		}
		return nil
	}))
}

// TestRequestMisuse checks that using a request wrongly is an ErrRequest error that
// names the rank, and never a panic or a hang.
func TestRequestMisuse(t *testing.T) {
	mustRun(t, 1, func(c *mpi.Comm) error {
		// A receive from ProcNull completes at once.
		done := func() (*mpi.Request, error) {
			r, err := mpi.Irecv(c, []int{0}, mpi.ProcNull, 0)
			if err == nil {
				_, err = r.Wait()
			}
			return r, err
		}
		want := func(what string, err error, rank int) error {
			e, cerr := wantClass(err, mpi.ErrRequest)
			if cerr != nil {
				return fmt.Errorf("%s: %v", what, cerr)
			}
			if e.Rank != rank {
				return fmt.Errorf("%s: error names rank %d, want %d", what, e.Rank, rank)
			}
			return nil
		}
		r, err := done()
		if err != nil {
			return err
		}
		copied := r // another copy of the pointer, as after Waitall set the slice entry to nil
		checks := []struct {
			what string
			err  error
			rank int
		}{
			{"Wait twice", errOf(r.Wait()), 0},
			{"Wait through a copy", errOf(copied.Wait()), 0},
			{"Test after Wait", func() error { _, _, err := copied.Test(); return err }(), 0},
			{"Cancel after Wait", copied.Cancel(), 0},
			{"Free after Wait", copied.Free(), 0},
			{"Start a non-persistent request", copied.Start(), 0},
			{"Waitall with a completed request", errOf(mpi.Waitall(copied)), 0},
			{"Waitany with a completed request", func() error { _, _, err := mpi.Waitany(copied); return err }(), 0},
			{"Testany with a completed request", func() error { _, _, _, err := mpi.Testany(copied); return err }(), 0},
			{"Testsome with a completed request", func() error { _, _, err := mpi.Testsome(copied); return err }(), 0},
			{"Cancel(nil)", (*mpi.Request)(nil).Cancel(), mpi.NoValue},
			{"Free(nil)", (*mpi.Request)(nil).Free(), mpi.NoValue},
			{"Start(nil)", (*mpi.Request)(nil).Start(), mpi.NoValue},
			{"Mrecv(nil)", errOf(mpi.Mrecv(nil, []int{0})), mpi.NoValue},
		}
		// Free, then use.
		freed, err := mpi.Irecv(c, []int{0}, mpi.ProcNull, 0)
		if err != nil {
			return err
		}
		if err := freed.Free(); err != nil {
			return err
		}
		checks = append(checks, []struct {
			what string
			err  error
			rank int
		}{
			{"Wait after Free", errOf(freed.Wait()), 0},
			{"Free twice", freed.Free(), 0},
			{"Cancel after Free", freed.Cancel(), 0},
		}...)
		// A started persistent request cannot start again; an inactive one cannot be cancelled.
		p, err := mpi.SendInit(c, []int{1}, mpi.ProcNull, 0)
		if err != nil {
			return err
		}
		checks = append(checks, struct {
			what string
			err  error
			rank int
		}{"Cancel an inactive persistent request", p.Cancel(), 0})
		if err := p.Start(); err != nil {
			return err
		}
		checks = append(checks, struct {
			what string
			err  error
			rank int
		}{"Start an active persistent request", p.Start(), 0})
		for _, ch := range checks {
			if err := want(ch.what, ch.err, ch.rank); err != nil {
				return err
			}
		}
		if _, err := p.Wait(); err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("Start after Wait: %v", err)
		}
		if _, err := p.Wait(); err != nil {
			return err
		}
		// Nil requests are MPI's null request: Wait and Test complete at once.
		var null *mpi.Request
		if st, err := null.Wait(); err != nil || !isNullStatus(st) {
			return fmt.Errorf("Wait(nil): %+v, %v", st, err)
		}
		if st, ok, err := null.Test(); !ok || err != nil || !isNullStatus(st) {
			return fmt.Errorf("Test(nil): %+v, %v, %v", st, ok, err)
		}
		// Startall starts what it can and reports the rest.
		p2, err := mpi.RecvInit(c, []int{0}, mpi.ProcNull, 0)
		if err != nil {
			return err
		}
		err = mpi.Startall(p, copied, p2)
		if err := want("Startall with a completed non-persistent request", err, 0); err != nil {
			return err
		}
		_, err = mpi.Waitall(p, p2)
		if err != nil {
			return fmt.Errorf("the persistent requests Startall was given were not started: %v", err)
		}
		return nil
	})
}

func TestConcurrentWaitIsError(t *testing.T) {
	posted := newGate()
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if err := posted.wait(); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
			return mpi.Send(c, []int{5}, 1, 0)
		},
		func(c *mpi.Comm) error {
			buf := []int{0}
			r, err := mpi.Irecv(c, buf, 0, 0)
			if err != nil {
				return err
			}
			type result struct {
				st  mpi.Status
				err error
			}
			results := make(chan result, 2)
			for range 2 {
				go func() {
					st, err := r.Wait()
					results <- result{st, err}
				}()
			}
			first := <-results // the second Wait, refused while the first waits
			if !errors.Is(first.err, mpi.ErrRequest) {
				return fmt.Errorf("one of two concurrent Waits: %v, want ErrRequest", first.err)
			}
			posted.open()
			second := <-results
			if second.err != nil || buf[0] != 5 {
				return fmt.Errorf("the other Wait: %v, buffer %v", second.err, buf)
			}
			return nil
		}))
}

func TestFreeActiveSend(t *testing.T) {
	// A freed send still delivers.
	msg := pattern(1<<20, 4)
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			r, err := mpi.Isend(c, msg, 1, 0)
			if err != nil {
				return err
			}
			if err := r.Free(); err != nil {
				return err
			}
			_, err = mpi.Recv(c, []byte{0}, 1, 1) // the receiver's ack: msg may be reused
			return err
		},
		func(c *mpi.Comm) error {
			buf := make([]byte, len(msg))
			if _, err := mpi.Recv(c, buf, 0, 0); err != nil {
				return err
			}
			if !bytes.Equal(buf, msg) {
				return errors.New("the freed send delivered wrong data")
			}
			return mpi.Send(c, []byte{1}, 0, 1)
		}))
}

// TestPersistent exchanges changing data between two ranks through persistent
// requests started again and again with Startall.
func TestPersistent(t *testing.T) {
	const rounds = 20
	for _, cfg := range configs {
		for _, n := range []int{3, 5000} { // int64s: eager and rendezvous
			t.Run(fmt.Sprintf("%s/%d", cfg.name, n), func(t *testing.T) {
				mustRun(t, 2, func(c *mpi.Comm) error {
					peer := 1 - c.Rank()
					out, in := make([]int64, n), make([]int64, n)
					send, err := mpi.SendInit(c, out, peer, 7)
					if err != nil {
						return err
					}
					recv, err := mpi.RecvInit(c, in, peer, 7)
					if err != nil {
						return err
					}
					if st, err := recv.Wait(); err != nil || !isNullStatus(st) {
						return fmt.Errorf("Wait on a persistent request never started: %+v, %v; want an empty status at once", st, err)
					}
					reqs := []*mpi.Request{recv, send}
					value := func(rank, round, i int) int64 { return int64(rank*1_000_000 + round*1000 + i) }
					for round := range rounds {
						for i := range out {
							out[i] = value(c.Rank(), round, i)
						}
						if err := mpi.Startall(reqs...); err != nil {
							return err
						}
						if err := recv.Start(); !errors.Is(err, mpi.ErrRequest) {
							return fmt.Errorf("Start of an active persistent request: %v, want ErrRequest", err)
						}
						sts, err := mpi.Waitall(reqs...)
						if err != nil {
							return err
						}
						if reqs[0] != recv || reqs[1] != send {
							return errors.New("Waitall cleared persistent requests")
						}
						if sts[0].Source != peer || sts[0].Tag != 7 || mpi.GetCount[int64](sts[0]) != n {
							return fmt.Errorf("round %d: status %+v", round, sts[0])
						}
						for i, v := range in {
							if v != value(peer, round, i) {
								return fmt.Errorf("round %d: element %d is %d, want %d", round, i, v, value(peer, round, i))
							}
						}
					}
					return errors.Join(send.Free(), recv.Free())
				}, cfg.opts...)
			})
		}
	}
}

func TestPersistentModes(t *testing.T) {
	inits := []struct {
		name     string
		init     func(*mpi.Comm, []byte, int, int) (*mpi.Request, error)
		buffered bool
	}{
		{"SendInit", mpi.SendInit[byte], false},
		{"BsendInit", mpi.BsendInit[byte], true},
		{"SsendInit", mpi.SsendInit[byte], false},
		{"RsendInit", mpi.RsendInit[byte], false},
	}
	for _, in := range inits {
		t.Run(in.name, func(t *testing.T) {
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if in.buffered {
						if err := c.AttachBuffer(make([]byte, 100+mpi.BsendOverhead)); err != nil {
							return err
						}
					}
					buf := make([]byte, 100)
					r, err := in.init(c, buf, 1, 0)
					if err != nil {
						return err
					}
					for round := range 3 {
						copy(buf, pattern(100, byte(round)))
						if err := r.Start(); err != nil {
							return err
						}
						if _, err := r.Wait(); err != nil {
							return err
						}
						if _, err := mpi.Recv(c, []byte{0}, 1, 1); err != nil { // ack: the Bsend room is free
							return err
						}
					}
					return nil
				},
				func(c *mpi.Comm) error {
					buf := make([]byte, 100)
					for round := range 3 {
						if _, err := mpi.Recv(c, buf, 0, 0); err != nil {
							return err
						}
						if !bytes.Equal(buf, pattern(100, byte(round))) {
							return fmt.Errorf("round %d: data differs", round)
						}
						if err := mpi.Send(c, []byte{1}, 0, 1); err != nil {
							return err
						}
					}
					return nil
				}))
		})
	}
}

// ---- Cancel ----

func TestCancelRecv(t *testing.T) {
	tests := []struct {
		name string
		src  int
		init func(c *mpi.Comm, buf []int, src, tag int) (*mpi.Request, error)
	}{
		{"exact", 0, mpi.Irecv[int]},
		{"AnySource", mpi.AnySource, mpi.Irecv[int]},
		{"persistent", 0, func(c *mpi.Comm, buf []int, src, tag int) (*mpi.Request, error) {
			r, err := mpi.RecvInit(c, buf, src, tag)
			if err == nil {
				err = r.Start()
			}
			return r, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cancelled := newGate()
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if err := cancelled.wait(); err != nil {
						return err
					}
					return mpi.Send(c, []int{1, 2}, 1, 3)
				},
				func(c *mpi.Comm) error {
					buf := []int{-9, -9}
					r, err := tt.init(c, buf, tt.src, 3)
					if err != nil {
						return err
					}
					if err := r.Cancel(); err != nil {
						return err
					}
					st, err := r.Wait()
					if err != nil || !st.Cancelled {
						return fmt.Errorf("Wait on a cancelled receive: %+v, %v; want Cancelled", st, err)
					}
					cancelled.open()
					later := []int{0, 0}
					st, err = mpi.Recv(c, later, 0, 3)
					if err != nil || st.Cancelled || later[0] != 1 || later[1] != 2 {
						return fmt.Errorf("receive after the cancelled one got %v, %+v, %v", later, st, err)
					}
					if buf[0] != -9 || buf[1] != -9 {
						return fmt.Errorf("the cancelled receive's buffer changed: %v", buf)
					}
					return nil
				}))
		})
	}
}

func TestCancelSend(t *testing.T) {
	tests := []struct {
		name     string
		start    func(*mpi.Comm, []byte, int, int) (*mpi.Request, error)
		size     int
		buffered bool
		opts     []mpi.Option
	}{
		{"eager Isend", mpi.Isend[byte], 100, false, nil},
		{"rendezvous Isend", mpi.Isend[byte], 1 << 20, false, nil},
		{"Isend with pool cap 0", mpi.Isend[byte], 100, false, []mpi.Option{mpi.WithPoolCap(0)}},
		{"Issend", mpi.Issend[byte], 100, false, nil},
		{"Irsend", mpi.Irsend[byte], 100, false, nil},
		{"Ibsend", mpi.Ibsend[byte], 100, true, nil},
		{"large Ibsend", mpi.Ibsend[byte], 1 << 20, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cancelled, probed := newGate(), newGate()
			second := pattern(tt.size, 2)
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if tt.buffered {
						if err := c.AttachBuffer(make([]byte, tt.size+mpi.BsendOverhead)); err != nil {
							return err
						}
					}
					r, err := tt.start(c, pattern(tt.size, 1), 1, 5)
					if err != nil {
						return err
					}
					if err := r.Cancel(); err != nil {
						return err
					}
					st, err := r.Wait()
					if err != nil || !st.Cancelled {
						return fmt.Errorf("Wait on the cancelled send: %+v, %v; want Cancelled", st, err)
					}
					if tt.buffered {
						// The cancelled copy's room is free: DetachBuffer need not wait.
						if _, err := c.DetachBuffer(); err != nil {
							return err
						}
					}
					cancelled.open()
					if err := probed.wait(); err != nil {
						return err
					}
					return mpi.Send(c, second, 1, 5)
				},
				func(c *mpi.Comm) error {
					if err := cancelled.wait(); err != nil {
						return err
					}
					if st, ok, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); ok || err != nil {
						return fmt.Errorf("Iprobe after the send was cancelled: ok %v (%+v), %v; want no message", ok, st, err)
					}
					probed.open()
					buf := make([]byte, tt.size)
					if _, err := mpi.Recv(c, buf, 0, 5); err != nil {
						return err
					}
					if !bytes.Equal(buf, second) {
						return errors.New("received the cancelled message")
					}
					return nil
				}), tt.opts...)
		})
	}
}

func TestCancelMatched(t *testing.T) {
	for _, n := range []int{100, 1 << 20} {
		t.Run(fmt.Sprintf("send/%d", n), func(t *testing.T) {
			received := newGate()
			msg := pattern(n, 3)
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					r, err := mpi.Isend(c, msg, 1, 0)
					if err != nil {
						return err
					}
					if err := received.wait(); err != nil {
						return err
					}
					if err := r.Cancel(); err != nil {
						return err
					}
					if st, err := r.Wait(); err != nil || st.Cancelled {
						return fmt.Errorf("a received send after Cancel: %+v, %v; want not cancelled", st, err)
					}
					return nil
				},
				func(c *mpi.Comm) error {
					buf := make([]byte, n)
					if _, err := mpi.Recv(c, buf, 0, 0); err != nil {
						return err
					}
					received.open()
					if !bytes.Equal(buf, msg) {
						return errors.New("data differs")
					}
					return nil
				}))
		})
		t.Run(fmt.Sprintf("recv/%d", n), func(t *testing.T) {
			sent := newGate()
			msg := pattern(n, 3)
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					r, err := mpi.Isend(c, msg, 1, 0)
					if err != nil {
						return err
					}
					sent.open()
					_, err = r.Wait()
					return err
				},
				func(c *mpi.Comm) error {
					if err := sent.wait(); err != nil {
						return err
					}
					buf := make([]byte, n)
					r, err := mpi.Irecv(c, buf, 0, 0) // matches the queued message at once
					if err != nil {
						return err
					}
					if err := r.Cancel(); err != nil {
						return err
					}
					st, err := r.Wait()
					if err != nil || st.Cancelled || !bytes.Equal(buf, msg) {
						return fmt.Errorf("a matched receive after Cancel: %+v, %v; want the message, not cancelled", st, err)
					}
					return nil
				}))
		})
	}
}

// TestRequestRecycled shows that a completed nonblocking operation gives its engine
// request back: a stream of Isend, Irecv and Wait allocates only the two small
// handles per message, in slabs (the engine's request alone is 256 bytes).
func TestRequestRecycled(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop objects")
	}
	err := mpi.Run(1, func(c *mpi.Comm) error {
		buf, out := []int64{42}, []int64{0}
		one := func() error {
			rr, err := mpi.Irecv(c, out, 0, 7)
			if err != nil {
				return err
			}
			sr, err := mpi.Isend(c, buf, 0, 7)
			if err != nil {
				return err
			}
			if _, err := sr.Wait(); err != nil {
				return err
			}
			st, err := rr.Wait()
			if err == nil && (out[0] != 42 || st.Source != 0 || st.Tag != 7) {
				err = fmt.Errorf("received %d from %d tag %d, want 42 from 0 tag 7", out[0], st.Source, st.Tag)
			}
			return err
		}
		const n = 1000
		for range n { // fill the pools
			if err := one(); err != nil {
				return err
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			if err := one(); err != nil {
				return err
			}
		}
		runtime.ReadMemStats(&after)
		// Two handles of at most 96 bytes (a size class) each.
		if got := unsafe.Sizeof(mpi.Request{}); got > 96 {
			return fmt.Errorf("a Request handle is %d bytes, want at most 96", got)
		}
		// Handles come in slabs (see Comm.request): their headers and size classes
		// cost about 2 bytes a handle.
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 2*(96+4) {
			return fmt.Errorf("%d bytes allocated per message, want at most two handles and their share of a slab, 200", per)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEarlyRequests checks requests that complete as they start, with no request of
// the engine's: receives whose message had come (with wildcards, truncated, and
// beside a posted receive in Waitany) and small sends left as copies at their receiver.
func TestEarlyRequests(t *testing.T) {
	mustRun(t, 2, rankFuncs(func(c *mpi.Comm) error {
		for tag, msg := range [][]int32{{1, 2, 3}, {4, 5, 6, 7}} {
			r, err := mpi.Isend(c, msg, 1, tag)
			if err != nil {
				return err
			}
			if st, ok, err := r.Test(); !ok || err != nil || st.Source != 1 || st.Tag != tag || st.Cancelled {
				return fmt.Errorf("Test of small Isend %d: %+v, %v, %v; want done at once", tag, st, ok, err)
			}
		}
		if err := c.Barrier(); err != nil { // both messages are at rank 1 now
			return err
		}
		if _, err := mpi.Recv(c, []int32{0}, 1, 9); err != nil { // rank 1 posted its receive
			return err
		}
		return mpi.Send(c, []int32{8}, 1, 2)
	}, func(c *mpi.Comm) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		buf := make([]int32, 4)
		r, err := mpi.Irecv(c, buf, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		if st, ok, err := r.Test(); !ok || err != nil || st.Source != 0 || st.Tag != 0 || mpi.GetCount[int32](st) != 3 || !slices.Equal(buf[:3], []int32{1, 2, 3}) {
			return fmt.Errorf("Irecv of a message come already: %+v, %v, %v, %v", st, ok, err, buf)
		}
		short := make([]int32, 2)
		r, err = mpi.Irecv(c, short, 0, 1)
		if err != nil {
			return err
		}
		st, err := r.Wait()
		if _, cerr := wantClass(err, mpi.ErrTruncate); cerr != nil || st.Source != 0 || st.Tag != 1 {
			return fmt.Errorf("truncated early Irecv: %+v: %v", st, cerr)
		}
		posted, err := mpi.Irecv(c, buf, 0, 2)
		if err != nil {
			return err
		}
		none, err := mpi.Irecv(c, buf, mpi.ProcNull, 0)
		if err != nil {
			return err
		}
		reqs := []*mpi.Request{posted, none}
		if i, st, err := mpi.Waitany(reqs...); i != 1 || err != nil || st.Source != mpi.ProcNull {
			return fmt.Errorf("Waitany of a posted and a ProcNull receive: %d, %+v, %v; want 1 at once", i, st, err)
		}
		if err := mpi.Send(c, []int32{0}, 0, 9); err != nil {
			return err
		}
		if st, err := posted.Wait(); err != nil || st.Tag != 2 || buf[0] != 8 {
			return fmt.Errorf("posted receive: %+v, %v, %v", st, err, buf)
		}
		return nil
	}))
}

// TestRequestsDistinct: goroutines of one rank that make requests at once each get
// their own handle (they come from slabs the rank's goroutines share), every
// message arrives whole, and a handle completed through one copy of the pointer is
// an ErrRequest error through another.
func TestRequestsDistinct(t *testing.T) {
	const goroutines, each = 8, 100
	mustRun(t, 2, func(c *mpi.Comm) error {
		reqs := make([][]*mpi.Request, goroutines)
		bufs := make([][]int64, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				bufs[g] = make([]int64, each)
				for i := range each {
					var r *mpi.Request
					var err error
					if c.Rank() == 0 {
						bufs[g][i] = int64(g*each + i)
						r, err = mpi.Isend(c, bufs[g][i:i+1], 1, g)
					} else {
						r, err = mpi.Irecv(c, bufs[g][i:i+1], 0, g)
					}
					if err != nil {
						errs[g] = err
						return
					}
					reqs[g] = append(reqs[g], r)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		seen := map[*mpi.Request]bool{}
		var all []*mpi.Request
		for _, rs := range reqs {
			for _, r := range rs {
				seen[r] = true
			}
			all = append(all, rs...)
		}
		if len(seen) != goroutines*each {
			return fmt.Errorf("%d distinct requests among %d", len(seen), goroutines*each)
		}
		again := all[0]
		if _, err := mpi.Waitall(all...); err != nil {
			return err
		}
		for g := range goroutines {
			for i, v := range bufs[g] {
				if v != int64(g*each+i) {
					return fmt.Errorf("goroutine %d, message %d: got %d, want %d", g, i, v, g*each+i)
				}
			}
		}
		if _, err := again.Wait(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("waiting again on a completed request: %v, want ErrRequest", err)
		}
		return nil
	})
}
