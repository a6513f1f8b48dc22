package mpi_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// call is one API call that takes a peer and a tag; in these tests it must fail
// before sending or waiting for anything.
type call struct {
	op string // the Op its errors name
	do func(c *mpi.Comm, peer, tag int) error
}

// reqErr passes on the error of a call that returns a request, refusing a request
// returned along with an error.
func reqErr(r *mpi.Request, err error) error {
	if err != nil && r != nil {
		return fmt.Errorf("returned a request along with the error (%v)", err)
	}
	return err
}

var sendCalls = []call{
	{"Send", func(c *mpi.Comm, p, tag int) error { return mpi.Send(c, []int{1}, p, tag) }},
	{"Bsend", func(c *mpi.Comm, p, tag int) error { return mpi.Bsend(c, []int{1}, p, tag) }},
	{"Ssend", func(c *mpi.Comm, p, tag int) error { return mpi.Ssend(c, []int{1}, p, tag) }},
	{"Rsend", func(c *mpi.Comm, p, tag int) error { return mpi.Rsend(c, []int{1}, p, tag) }},
	{"Isend", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.Isend(c, []int{1}, p, tag)) }},
	{"Ibsend", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.Ibsend(c, []int{1}, p, tag)) }},
	{"Issend", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.Issend(c, []int{1}, p, tag)) }},
	{"Irsend", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.Irsend(c, []int{1}, p, tag)) }},
	{"SendInit", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.SendInit(c, []int{1}, p, tag)) }},
	{"BsendInit", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.BsendInit(c, []int{1}, p, tag)) }},
	{"SsendInit", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.SsendInit(c, []int{1}, p, tag)) }},
	{"RsendInit", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.RsendInit(c, []int{1}, p, tag)) }},
	{"Sendrecv", func(c *mpi.Comm, p, tag int) error {
		return errOf(mpi.Sendrecv(c, []int{1}, p, tag, []int{0}, mpi.ProcNull, 0))
	}},
	{"SendrecvReplace", func(c *mpi.Comm, p, tag int) error {
		return errOf(mpi.SendrecvReplace(c, []int{1}, p, tag, mpi.ProcNull, 0))
	}},
}

var recvCalls = []call{
	{"Recv", func(c *mpi.Comm, p, tag int) error { return errOf(mpi.Recv(c, []int{0}, p, tag)) }},
	{"Irecv", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.Irecv(c, []int{0}, p, tag)) }},
	{"RecvInit", func(c *mpi.Comm, p, tag int) error { return reqErr(mpi.RecvInit(c, []int{0}, p, tag)) }},
	{"Probe", func(c *mpi.Comm, p, tag int) error { return errOf(mpi.Probe(c, p, tag)) }},
	{"Iprobe", func(c *mpi.Comm, p, tag int) error {
		_, ok, err := mpi.Iprobe(c, p, tag)
		if ok && err != nil {
			return fmt.Errorf("Iprobe reported a message along with the error (%v)", err)
		}
		return err
	}},
	{"Mprobe", func(c *mpi.Comm, p, tag int) error {
		m, _, err := mpi.Mprobe(c, p, tag)
		if m != nil && err != nil {
			return fmt.Errorf("Mprobe returned a message along with the error (%v)", err)
		}
		return err
	}},
	{"Improbe", func(c *mpi.Comm, p, tag int) error {
		m, _, ok, err := mpi.Improbe(c, p, tag)
		if (m != nil || ok) && err != nil {
			return fmt.Errorf("Improbe returned a message along with the error (%v)", err)
		}
		return err
	}},
	{"Sendrecv", func(c *mpi.Comm, p, tag int) error {
		return errOf(mpi.Sendrecv(c, []int{1}, mpi.ProcNull, 0, []int{0}, p, tag))
	}},
	{"SendrecvReplace", func(c *mpi.Comm, p, tag int) error {
		return errOf(mpi.SendrecvReplace(c, []int{1}, mpi.ProcNull, 0, p, tag))
	}},
}

// safely runs f, turning a panic into an error.
func safely(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return f()
}

func peerName(p int) string {
	switch p {
	case mpi.AnySource:
		return "AnySource"
	case mpi.ProcNull:
		return "ProcNull"
	}
	return fmt.Sprint(p)
}

func tagName(tag int) string {
	if tag == mpi.AnyTag {
		return "AnyTag"
	}
	return fmt.Sprint(tag)
}

// checkError checks that err is a *mpi.Error of class, naming op, rank, peer and tag
// in its fields and its message.
func checkError(err error, class mpi.Class, op string, rank, peer, tag int) error {
	e, cerr := wantClass(err, class)
	if cerr != nil {
		return cerr
	}
	if e.Op != op || e.Rank != rank || e.Peer != peer || e.Tag != tag {
		return fmt.Errorf("error %q has {op %q, rank %d, peer %d, tag %d}, want {%q, %d, %d, %d}",
			err, e.Op, e.Rank, e.Peer, e.Tag, op, rank, peer, tag)
	}
	want := []string{op, class.Error()}
	if rank != mpi.NoValue {
		want = append(want, fmt.Sprintf("rank %d", rank))
	}
	if peer != mpi.NoValue {
		want = append(want, "peer "+peerName(peer))
	}
	if tag != mpi.NoValue {
		want = append(want, "tag "+tagName(tag))
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			return fmt.Errorf("error %q does not mention %q", err, s)
		}
	}
	return nil
}

func TestInvalidArguments(t *testing.T) {
	type arg struct {
		peer, tag int
		class     mpi.Class
	}
	const size = 3
	sendArgs := []arg{
		{size, 0, mpi.ErrRank},
		{100, 0, mpi.ErrRank},
		{-3, 0, mpi.ErrRank},
		{mpi.AnySource, 0, mpi.ErrRank},
		{math.MinInt, 0, mpi.ErrRank},
		{1, mpi.AnyTag, mpi.ErrTag},
		{1, -7, mpi.ErrTag},
		{1, mpi.TagUB + 1, mpi.ErrTag},
		{1, math.MinInt, mpi.ErrTag},
	}
	recvArgs := []arg{
		{size, 0, mpi.ErrRank},
		{-3, 0, mpi.ErrRank},
		{math.MaxInt, mpi.AnyTag, mpi.ErrRank},
		{1, -2, mpi.ErrTag},
		{mpi.AnySource, -5, mpi.ErrTag},
		{1, mpi.TagUB + 1, mpi.ErrTag},
	}
	mustRun(t, size, func(c *mpi.Comm) error {
		var errs []error
		try := func(calls []call, args []arg) {
			for _, cl := range calls {
				for _, a := range args {
					err := safely(func() error { return cl.do(c, a.peer, a.tag) })
					if err := checkError(err, a.class, cl.op, c.Rank(), a.peer, a.tag); err != nil {
						errs = append(errs, fmt.Errorf("%s(peer %d, tag %d): %v", cl.op, a.peer, a.tag, err))
					}
				}
			}
		}
		try(sendCalls, sendArgs)
		try(recvCalls, recvArgs)
		return errors.Join(errs...)
	})
}

func TestNilComm(t *testing.T) {
	var c *mpi.Comm
	check := func(what string, err error) {
		t.Helper()
		if err := checkError(err, mpi.ErrComm, what, mpi.NoValue, mpi.NoValue, mpi.NoValue); err != nil {
			t.Errorf("%s on a nil communicator: %v", what, err)
		}
	}
	for _, cl := range slices.Concat(sendCalls, recvCalls) {
		check(cl.op, safely(func() error { return cl.do(c, 0, 0) }))
	}
	check("Dup", safely(func() error { return errOf(c.Dup()) }))
	check("Free", safely(c.Free))
	check("AttachBuffer", safely(func() error { return c.AttachBuffer(make([]byte, 100)) }))
	check("DetachBuffer", safely(func() error { return errOf(c.DetachBuffer()) }))
	check("Abort", safely(func() error { return c.Abort(3) }))
	check("Compare", safely(func() error { return errOf(mpi.Compare(c, c)) }))
	if s := c.String(); s != "Comm(nil)" {
		t.Errorf("String of a nil communicator: %q", s)
	}
}

func TestFreedComm(t *testing.T) {
	mustRun(t, 2, func(c *mpi.Comm) error {
		rank, peer := c.Rank(), 1-c.Rank()
		d, err := c.Dup()
		if err != nil {
			return err
		}
		p, err := mpi.RecvInit(d, []int{0}, peer, 0)
		if err != nil {
			return err
		}
		if err := d.Free(); err != nil {
			return fmt.Errorf("Free of a Dup: %v", err)
		}
		var errs []error
		check := func(what string, err error) {
			if err := checkError(err, mpi.ErrComm, what, rank, mpi.NoValue, mpi.NoValue); err != nil {
				errs = append(errs, fmt.Errorf("%s on a freed communicator: %v", what, err))
			}
		}
		for _, cl := range slices.Concat(sendCalls, recvCalls) {
			check(cl.op, safely(func() error { return cl.do(d, peer, 0) }))
		}
		check("Free", d.Free())
		check("Dup", errOf(d.Dup()))
		check("AttachBuffer", d.AttachBuffer(make([]byte, 100)))
		check("Compare", errOf(mpi.Compare(c, d)))
		check("Start", p.Start())
		// The world communicator cannot be freed.
		if err := checkError(c.Free(), mpi.ErrComm, "Free", rank, mpi.NoValue, mpi.NoValue); err != nil {
			errs = append(errs, fmt.Errorf("Free of the world communicator: %v", err))
		}
		// ... and still works.
		got := []int{0}
		if _, err := mpi.Sendrecv(c, []int{rank + 10}, peer, 0, got, peer, 0); err != nil || got[0] != peer+10 {
			errs = append(errs, fmt.Errorf("world Sendrecv after the failed Free: %v, %v", got, err))
		}
		return errors.Join(errs...)
	})
}

func TestDupOrder(t *testing.T) {
	// The k-th Dup of every rank returns the same communicator, whatever the timing.
	const n, dups = 3, 4
	mustRun(t, n, func(c *mpi.Comm) error {
		ds := make([]*mpi.Comm, dups)
		for i := range ds {
			base := c
			if i == dups-1 {
				base = ds[0] // a Dup of a Dup
			}
			var err error
			if ds[i], err = base.Dup(); err != nil {
				return err
			}
			if ds[i].Rank() != c.Rank() || ds[i].Size() != n {
				return fmt.Errorf("Dup %d: rank %d of %d, want %d of %d", i, ds[i].Rank(), ds[i].Size(), c.Rank(), n)
			}
		}
		for i := 1; i < dups; i++ {
			if cmp, err := mpi.Compare(ds[0], ds[i]); err != nil || cmp != mpi.Congruent {
				return fmt.Errorf("Compare(dup 0, dup %d) = %v, %v; want Congruent", i, cmp, err)
			}
		}
		if c.Rank() == 0 {
			for i := dups - 1; i >= 0; i-- {
				for dest := 1; dest < n; dest++ {
					if err := mpi.Send(ds[i], []int{i}, dest, 0); err != nil {
						return err
					}
				}
			}
			return nil
		}
		for i := range ds {
			got := []int{-1}
			if _, err := mpi.Recv(ds[i], got, mpi.AnySource, mpi.AnyTag); err != nil {
				return err
			}
			if got[0] != i {
				return fmt.Errorf("Recv on dup %d got the message sent on dup %d", i, got[0])
			}
		}
		return nil
	})
}
