package p2p

import (
	"slices"
	"sync"

	"github.com/weft-mpi/weft/internal/errs"
)

// BsendOverhead is what each buffered message costs in an attached buffer besides its
// data, as MPI_BSEND_OVERHEAD: size attached buffers as the sum of (message + BsendOverhead).
const BsendOverhead = 64

// bsendBuf is a buffer attached with AttachBuffer: Bsend copies messages into it,
// first fit, and each copy is freed when its receiver takes it.
type bsendBuf struct {
	mu    sync.Mutex
	mem   []byte
	spans []span // in use, sorted by offset
	idle  *waiter
}

// span is a used piece [off, end) of an attached buffer; end includes BsendOverhead.
type span struct{ off, end int }

// Attach makes mem the rank's Bsend buffer.
func (ep *Endpoint) Attach(mem []byte) error {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.bsend != nil {
		return errs.New(errs.Buffer, "AttachBuffer", errs.None, "a %d-byte buffer is already attached; DetachBuffer it first", len(ep.bsend.mem))
	}
	ep.bsend = &bsendBuf{mem: mem}
	return nil
}

// Detach waits until every message buffered in the attached buffer has been received,
// then detaches and returns it.
func (ep *Endpoint) Detach() ([]byte, error) {
	ep.mu.Lock()
	b := ep.bsend
	ep.mu.Unlock()
	if b == nil {
		return nil, errs.New(errs.Buffer, "DetachBuffer", errs.None, "no buffer is attached")
	}
	w := waiters.Get().(*waiter)
	defer waiters.Put(w)
	for {
		b.mu.Lock()
		if len(b.spans) == 0 {
			b.idle = nil
			b.mu.Unlock()
			break
		}
		b.idle = w
		b.mu.Unlock()
		select {
		case <-w.ch:
		case <-ep.World.abort:
			return nil, ErrAborted
		}
	}
	ep.mu.Lock()
	ep.bsend = nil
	ep.mu.Unlock()
	return b.mem, nil
}

// bufferedCopy copies data into the attached buffer of ep, as a message m with
// envelope k; it fails when no buffer is attached or none of it is free enough.
func (ep *Endpoint) bufferedCopy(data []byte, k key, dest int) (*Request, error) {
	ep.mu.Lock()
	b := ep.bsend
	ep.mu.Unlock()
	if b == nil {
		return nil, errs.NewMsg(errs.Buffer, "Bsend", int(k.src), dest, int(k.tag), "no buffer is attached (AttachBuffer)")
	}
	need := len(data) + BsendOverhead
	b.mu.Lock()
	off, ok := b.fit(need)
	if !ok {
		free := len(b.mem)
		for _, s := range b.spans {
			free -= s.end - s.off
		}
		b.mu.Unlock()
		return nil, errs.NewMsg(errs.Buffer, "Bsend", int(k.src), dest, int(k.tag),
			"a %d-byte message needs %d contiguous bytes (BsendOverhead included) but the %d-byte attached buffer has %d free",
			len(data), need, len(b.mem), free)
	}
	i, _ := slices.BinarySearchFunc(b.spans, off, func(s span, off int) int { return s.off - off })
	b.spans = slices.Insert(b.spans, i, span{off, off + need})
	b.mu.Unlock()
	m := &Request{kind: eagerKind, key: k, bseg: b, boff: off}
	m.setBuf(b.mem[off : off+len(data)])
	copy(b.mem[off:], data)
	return m, nil
}

// fit finds the first gap of at least n bytes. Caller holds b.mu.
func (b *bsendBuf) fit(n int) (int, bool) {
	at := 0
	for _, s := range b.spans {
		if s.off-at >= n {
			return at, true
		}
		at = s.end
	}
	return at, len(b.mem)-at >= n
}

// free releases the span that starts at off.
func (b *bsendBuf) free(off int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, found := slices.BinarySearchFunc(b.spans, off, func(s span, off int) int { return s.off - off })
	if found {
		b.spans = slices.Delete(b.spans, i, i+1)
	}
	if len(b.spans) == 0 && b.idle != nil {
		b.idle.ring()
	}
}
