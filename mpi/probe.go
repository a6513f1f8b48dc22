package mpi

import (
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
)

func probeStatus(st p2p.Status) Status {
	return Status{Source: st.Source, Tag: st.Tag, bytes: st.Len}
}

// Probe waits for a message matching source and tag (wildcards allowed) and returns
// its status without receiving it; GetCount tells its length.
func Probe(c *Comm, source, tag int) (Status, error) {
	if err := c.checkSource("Probe", source, tag); err != nil {
		return Status{}, err
	}
	if source == ProcNull {
		return nullStatus, nil
	}
	_, st, err := c.core.Probe(c.rank, source, tag, false)
	if err != nil {
		return Status{}, c.failed(err, "Probe", source, tag)
	}
	return probeStatus(st), nil
}

// Iprobe is Probe without waiting: ok says whether a message matched.
func Iprobe(c *Comm, source, tag int) (st Status, ok bool, err error) {
	if err := c.checkSource("Iprobe", source, tag); err != nil {
		return Status{}, false, err
	}
	if source == ProcNull {
		return nullStatus, true, nil
	}
	m, pst, err := c.core.Iprobe(c.rank, source, tag, false)
	if err != nil {
		return Status{}, false, c.failed(err, "Iprobe", source, tag)
	}
	return probeStatus(pst), m != nil, nil
}

// Message is a message taken off the queue by Mprobe or Improbe: only Mrecv can
// receive it, so another goroutine's receive cannot take it in between.
type Message struct {
	m    *p2p.Request // nil for a message from ProcNull
	c    *Comm
	done atomic.Bool
}

// Mprobe waits for a message matching source and tag and takes it for Mrecv.
func Mprobe(c *Comm, source, tag int) (*Message, Status, error) {
	if err := c.checkSource("Mprobe", source, tag); err != nil {
		return nil, Status{}, err
	}
	if source == ProcNull {
		return &Message{c: c}, nullStatus, nil
	}
	m, st, err := c.core.Probe(c.rank, source, tag, true)
	if err != nil {
		return nil, Status{}, c.failed(err, "Mprobe", source, tag)
	}
	return &Message{m: m, c: c}, probeStatus(st), nil
}

// Improbe is Mprobe without waiting: ok says whether a message matched.
func Improbe(c *Comm, source, tag int) (*Message, Status, bool, error) {
	if err := c.checkSource("Improbe", source, tag); err != nil {
		return nil, Status{}, false, err
	}
	if source == ProcNull {
		return &Message{c: c}, nullStatus, true, nil
	}
	m, st, err := c.core.Iprobe(c.rank, source, tag, true)
	if err != nil {
		return nil, Status{}, false, c.failed(err, "Improbe", source, tag)
	}
	if m == nil {
		return nil, Status{}, false, nil
	}
	return &Message{m: m, c: c}, probeStatus(st), true, nil
}

// Mrecv receives a message taken by Mprobe or Improbe into buf.
func Mrecv[T Elem](msg *Message, buf []T) (Status, error) {
	if msg == nil {
		return Status{}, errs.New(errs.Request, "Mrecv", NoValue, "the message is nil")
	}
	c := msg.c
	if msg.done.Swap(true) {
		return Status{}, errs.New(errs.Request, "Mrecv", c.rank, "the message was already received")
	}
	if msg.m == nil {
		return nullStatus, nil
	}
	st, err := p2p.Mrecv(msg.m, bytesOf(buf))
	return c.received(&st, err, "Mrecv", st.Source, st.Tag)
}

// AttachBuffer gives the calling rank a buffer for Bsend and Ibsend. Each buffered
// message takes its size plus BsendOverhead bytes until its receiver has it.
func (c *Comm) AttachBuffer(buf []byte) error {
	if err := c.check("AttachBuffer"); err != nil {
		return err
	}
	return c.named(c.self().Attach(buf))
}

// DetachBuffer waits until every buffered message has been received, then detaches
// the buffer and returns it.
func (c *Comm) DetachBuffer() ([]byte, error) {
	if err := c.check("DetachBuffer"); err != nil {
		return nil, err
	}
	b, err := c.self().Detach()
	if err != nil {
		return nil, c.named(c.failed(err, "DetachBuffer", NoValue, NoValue))
	}
	return b, nil
}

// named fills in the calling rank of an engine error that could not know it.
func (c *Comm) named(err error) error {
	if e, ok := err.(*Error); ok && e.Rank == NoValue {
		e.Rank = c.rank
	}
	return err
}
