package mpi

import (
	"slices"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
)

// Status describes a completed receive (or a send, for Cancelled).
type Status struct {
	Source    int   // the sender's rank in the communicator
	Tag       int   // the message's tag
	Cancelled bool  // the operation was cancelled
	Err       error // the operation's own error, in the statuses of Waitall and friends
	bytes     int   // bytes received
}

var nullStatus = Status{Source: ProcNull, Tag: AnyTag}

// GetCount returns how many elements of T the receive placed in its buffer, or
// Undefined when that is not a whole number.
func GetCount[T Elem](s Status) int {
	size := sizeOf[T]()
	if s.bytes%size != 0 {
		return Undefined
	}
	return s.bytes / size
}

// BsendOverhead is what each buffered message costs in the attached buffer besides
// its data: attach at least the sum of (message bytes + BsendOverhead).
const BsendOverhead = p2p.BsendOverhead

func (c *Comm) checkDest(op string, dest, tag int) error {
	if c.usable() && uint(dest) < uint(len(c.core.Peers)) && uint(tag) <= TagUB {
		return nil
	}
	if err := c.check(op); err != nil {
		return err
	}
	if dest != ProcNull && (dest < 0 || dest >= c.Size()) {
		return errs.NewMsg(errs.Rank, op, c.rank, dest, tag, "destination %d is not a rank of this %d-rank communicator (want 0..%d or ProcNull)", dest, c.Size(), c.Size()-1)
	}
	if tag < 0 || tag > TagUB {
		return errs.NewMsg(errs.Tag, op, c.rank, dest, tag, "send tags run from 0 to TagUB (%d)", TagUB)
	}
	return nil
}

func (c *Comm) checkSource(op string, src, tag int) error {
	if c.usable() && uint(src) < uint(len(c.core.Peers)) && uint(tag) <= TagUB {
		return nil
	}
	if err := c.check(op); err != nil {
		return err
	}
	if src != ProcNull && src != AnySource && (src < 0 || src >= c.Size()) {
		return errs.NewMsg(errs.Rank, op, c.rank, src, tag, "source %d is not a rank of this %d-rank communicator (want 0..%d, AnySource or ProcNull)", src, c.Size(), c.Size()-1)
	}
	if tag != AnyTag && (tag < 0 || tag > TagUB) {
		return errs.NewMsg(errs.Tag, op, c.rank, src, tag, "receive tags run from 0 to TagUB (%d), or AnyTag", TagUB)
	}
	return nil
}

// received turns the engine's status of a receive into the user's, with ErrTruncate
// when the message did not fit.
func (c *Comm) received(st *p2p.Status, err error, op string, peer, tag int) (Status, error) {
	var s Status
	err = c.receivedInto(&s, st, err, op, peer, tag)
	return s, err
}

// receivedInto is received storing the user's status in s.
func (c *Comm) receivedInto(s *Status, st *p2p.Status, err error, op string, peer, tag int) error {
	*s = statusOf(st)
	switch {
	case err != nil:
		err = c.failed(err, op, peer, tag)
	case st.Len > st.Bytes:
		err = errs.NewMsg(errs.Truncate, op, c.rank, st.Source, st.Tag,
			"a %d-byte message does not fit the %d-byte receive buffer", st.Len, st.Bytes)
	}
	s.Err = err
	return err
}

// statusOf is the user's status of a receive that went well.
func statusOf(st *p2p.Status) Status {
	return Status{Source: st.Source, Tag: st.Tag, Cancelled: st.Cancelled, bytes: st.Bytes}
}

func send(c *Comm, op string, b []byte, dest, tag int, mode p2p.Mode) error {
	if err := c.checkDest(op, dest, tag); err != nil {
		return err
	}
	if err := c.core.Send(c.rank, b, dest, tag, mode); err != nil {
		return c.failed(err, op, dest, tag)
	}
	return nil
}

// Send sends buf to rank dest with tag and returns when buf may be reused: at once
// for messages up to the eager limit (copied into the pool) or when the receive is
// already posted (copied straight into it), else once the receiver has copied it.
func Send[T Elem](c *Comm, buf []T, dest, tag int) error {
	return send(c, "Send", bytesOf(buf), dest, tag, p2p.Standard)
}

// Bsend sends buf through the buffer attached with AttachBuffer and returns at once.
// ErrBuffer says when none is attached or it has too little room.
func Bsend[T Elem](c *Comm, buf []T, dest, tag int) error {
	return send(c, "Bsend", bytesOf(buf), dest, tag, p2p.Buffered)
}

// Ssend sends buf and returns only once a receive has matched it.
func Ssend[T Elem](c *Comm, buf []T, dest, tag int) error {
	return send(c, "Ssend", bytesOf(buf), dest, tag, p2p.Synchronous)
}

// Rsend is a ready send: MPI lets the caller promise the receive is posted. Weft
// needs no promise and treats it as Send, as MPICH and Open MPI do.
func Rsend[T Elem](c *Comm, buf []T, dest, tag int) error {
	return send(c, "Rsend", bytesOf(buf), dest, tag, p2p.Ready)
}

// Recv receives a message from source (or AnySource) with tag (or AnyTag) into buf.
// A longer message than buf is ErrTruncate; GetCount tells how much arrived.
func Recv[T Elem](c *Comm, buf []T, source, tag int) (Status, error) {
	if err := c.checkSource("Recv", source, tag); err != nil {
		return Status{}, err
	}
	var st p2p.Status
	err := c.core.Recv(c.rank, bytesOf(buf), source, tag, &st)
	if err == nil && st.Len <= st.Bytes {
		// Built here rather than by received: a status that a call returns is
		// copied through the stack (a send and its receive by one goroutine: 95
		// against 105 ns).
		return statusOf(&st), nil
	}
	return c.received(&st, err, "Recv", source, tag)
}

// Sendrecv sends send to dest and receives into recv from source, at once, so that
// exchanges in a ring cannot deadlock.
func Sendrecv[T, U Elem](c *Comm, send []T, dest, sendtag int, recv []U, source, recvtag int) (Status, error) {
	return sendrecv(c, "Sendrecv", bytesOf(send), dest, sendtag, bytesOf(recv), source, recvtag)
}

// SendrecvReplace sends buf to dest and replaces its contents with the message
// received from source.
func SendrecvReplace[T Elem](c *Comm, buf []T, dest, sendtag, source, recvtag int) (Status, error) {
	b := bytesOf(buf)
	return sendrecv(c, "SendrecvReplace", slices.Clone(b), dest, sendtag, b, source, recvtag)
}

func sendrecv(c *Comm, op string, sb []byte, dest, sendtag int, rb []byte, source, recvtag int) (Status, error) {
	if err := c.checkDest(op, dest, sendtag); err != nil {
		return Status{}, err
	}
	if err := c.checkSource(op, source, recvtag); err != nil {
		return Status{}, err
	}
	var r p2p.Request
	c.core.Irecv(c.rank, rb, source, recvtag, &r)
	if err := c.core.Send(c.rank, sb, dest, sendtag, p2p.Standard); err != nil {
		p2p.Cancel(&r)
		c.self().Wait(&r)
		return Status{}, c.failed(err, op, dest, sendtag)
	}
	err := c.self().Wait(&r)
	var st p2p.Status
	r.Result(&st)
	return c.received(&st, err, op, source, recvtag)
}
