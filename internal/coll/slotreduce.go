package coll

import (
	"fmt"
	"runtime"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/spin"
)

// A small Reduce (at most slotRanks ranks, whose contributions fit litSlot bytes
// together) needs no episode, as a small Bcast needs none (lit.go): every
// rank leaves its contribution in the ring slot, at its rank's place, and sets its
// bit in the slot's lit word, which also carries the episode's number and the call
// (root, length, element size); the root folds the contributions once every bit is
// set. The first rank to come claims the slot as a Bcast's root does (litLeave,
// with the claim flagged slotTag), so that no root of another collective writes a
// copy there meanwhile, and opens it. An episode's first line, written by its maker
// on one core and read by every rank on the others, and the six lines of the
// recycled episode that its maker clears, were most of a small Reduce's time on two
// processors (4 ranks, 8 bytes, same root: 0.259 µs through an episode, 0.166 through
// the slot; rotating root 0.325 and 0.313).
//
// A root that finds bits missing after its spin (or its yield) makes an episode of
// kind slotWait and waits on its start gate, which the rank whose bit completes the
// word opens: the root stores the episode and then loads the word, the rank stores
// its bit and then loads the episode, so one of the two sees the other. A rank whose
// call differs from the slot's flags the word slotFault and fails the root's
// episode, making it if need be; a rank that went through an episode instead (a
// length too long for the slot, another collective) finds the word when it looks
// for a root's copy (unlit) and fails its episode, or the slot's ranks find that
// episode when they set their bits and fail it: the root finds the fault there.

// slotRanks is the most ranks whose Reduce may go through the slot: one bit each.
const slotRanks = 16

// The lit word of a slot that holds a small Reduce: bits 0-15 the ranks that have
// left their contributions, then the call's root (4 bits), length and element size
// (6 bits each), the episode's number modulo 2^26 (a rank is never a lap behind
// the slot it looks at), the rank that opened the slot (4 bits), slotFault and
// slotTag, which no episode number has. A claim flagged slotTag holds the slot for
// a small Reduce.
const (
	slotTag     = 1 << 63
	slotFault   = 1 << 62
	slotSeqMask = 1<<26 - 1
	slotCall    = slotTag | slotSeqMask<<32 | (1<<32 - 1<<16) // everything but the bits and the fault
)

// slotWord is the word that opener puts in episode s's slot for a small Reduce of
// root, with contributions of w bytes of elements of elem bytes.
func slotWord(s uint64, root, w, elem, opener int) uint64 {
	return slotTag | uint64(opener)<<58 | (s&slotSeqMask)<<32 | uint64(elem)<<26 | uint64(w)<<20 | uint64(root)<<16
}

// slotOpen reports whether v is the word of episode s's small Reduce.
func slotOpen(v, s uint64) bool { return v&(slotTag|slotSeqMask<<32) == slotTag|(s&slotSeqMask)<<32 }

// slotFits reports whether a Reduce of w-byte contributions of elem-byte elements
// goes through the slot.
func (c *Comm) slotFits(w, elem int) bool {
	return c.n <= slotRanks && c.n*w <= litSlot && elem < 64
}

// reduceInSlot is a rank's part in a small Reduce through episode s's ring slot.
// It reports false, having done nothing, when a root of another collective left
// its copy there: the rank then goes through an episode, where it finds the fault.
func (c *Comm) reduceInSlot(rank, root int, send, recv []byte, elem int, fn func(in, inout []byte)) (bool, error) {
	s := c.ranks[rank].seq.Load()
	if !c.free(s) {
		return true, ErrAborted
	}
	r, claim := &c.ring[s%ringSize], &c.claims[s%ringSize].s
	w, mine := len(send), slotTag|(s+1)
	call := slotWord(s, root, w, elem, rank)
	v := r.lit.Load()
	for !slotOpen(v, s) {
		switch old := claim.Load(); {
		case old == mine: // another rank is opening it
			runtime.Gosched()
		case old&^slotTag > s:
			return false, nil // a copy for s: see unlit
		case claim.CompareAndSwap(old, mine):
			r.lit.Store(call)
		}
		v = r.lit.Load()
	}
	if v&slotCall != call&slotCall {
		err := slotMisfit(s, rank, root, w, elem, v)
		c.slotFail(rank, s, forRoot(err, rank))
		c.count(rank, s)
		return true, err
	}
	if rank != root {
		copy(r.data[rank*w:], send)
	}
	bit := uint64(1) << rank
	for !r.lit.CompareAndSwap(v, v|bit) {
		v = r.lit.Load()
	}
	v |= bit
	if rank != root {
		c.slotLeft(rank, root, s, v, w)
		c.count(rank, s)
		return true, nil
	}
	err := c.slotRoot(rank, root, s, send, recv, elem, fn)
	c.count(rank, s)
	return true, err
}

// slotLeft is what a rank other than the root does once its bit is in v, the word
// of episode s: it opens the root's episode if its bit completed the word, and
// fails an episode of s that another path made, which the root would otherwise
// wait in for ever, or find too late.
func (c *Comm) slotLeft(rank, root int, s, v uint64, w int) {
	e := c.ring[s%ringSize].p.Load()
	if e == nil || e.seq != s {
		return
	}
	if e.kind != slotWait {
		e.fail(slotCross(e, rank, root, w))
		return
	}
	if all := uint64(1)<<c.n - 1; v&all == all {
		e.start.release()
	}
}

// slotRoot waits until every rank has left its contribution in episode s's slot,
// or one has found its call different, and folds the contributions into recv in
// rank order, the root's own (send) at its place.
func (c *Comm) slotRoot(rank, root int, s uint64, send, recv []byte, elem int, fn func(in, inout []byte)) error {
	r := &c.ring[s%ringSize]
	all := uint64(1)<<c.n - 1
	over := func() bool { v := r.lit.Load(); return v&all == all || v&slotFault != 0 }
	if !over() {
		if c.spin > 0 {
			spin.Until(c.spin, over)
		} else {
			runtime.Gosched()
		}
	}
	if !over() || r.lit.Load()&slotFault != 0 {
		e := c.take(rank, slotWait, root, elem, nil, -1)
		if e == nil {
			return ErrAborted
		}
		if e.kind != slotWait {
			e.fail(slotCross(e, rank, root, len(send)))
			return c.outcome(e, rank, true)
		}
		ok := over() || c.wait(&e.start)
		if !ok || e.fault.Load() != nil {
			return c.outcome(e, rank, ok)
		}
	}

	w := len(send)
	copy(r.data[root*w:], send) // the root's place is free, and recv may be send
	if err := fold(reduce, r.data[:], c.n, w, recv, fn); err != nil {
		err.Rank = rank
		return err
	}
	return nil
}

// slotFail records err, the fault of a rank whose call differs from that of
// episode s's slot, in the episode the root waits in (made here if the root has not
// made it yet: the root finds it once it sees the word flagged), and flags the word.
func (c *Comm) slotFail(rank int, s uint64, err *errs.Error) {
	if e := c.take(rank, slotWait, 0, 0, nil, -1); e != nil {
		e.fail(err)
	}
	r := &c.ring[s%ringSize]
	for v := r.lit.Load(); !r.lit.CompareAndSwap(v, v|slotFault); v = r.lit.Load() {
	}
}

// slotAside ends the part of a rank whose Reduce (root, w bytes of elem-byte
// elements) went through episode e while the others' went through its slot, whose
// word is v: e's fault names the rank, for the root, and the rank's names the root.
func (c *Comm) slotAside(e *episode, rank, root, w, elem int, v uint64) error {
	err := slotMisfit(e.seq, rank, root, w, elem, v)
	e.fail(forRoot(err, rank))
	err.Rank = rank
	return err
}

// forRoot is err, a rank's fault, as its root sees it: naming the rank.
func forRoot(err *errs.Error, rank int) *errs.Error {
	f := *err
	f.Peer = rank
	return &f
}

// slotOther is the fault of episode e, made or found by a rank whose call (kind k)
// is not a Reduce, where e's slot holds a small Reduce's word v.
func slotOther(e *episode, rank int, k kind, root, elem int, v uint64) *errs.Error {
	return disagree(e.seq, rank, k, root, elem, reduce, int(v>>16&15), int(v>>26&63))
}

// slotMisfit is the fault of rank's small Reduce (root, w bytes of elem-byte
// elements) where episode s's slot holds the word v of another call.
func slotMisfit(s uint64, rank, root, w, elem int, v uint64) *errs.Error {
	theirRoot, theirW, theirElem, opener := int(v>>16&15), int(v>>20&63), int(v>>26&63), int(v>>58&15)
	if err := disagree(s, rank, reduce, root, elem, reduce, theirRoot, theirElem); err != nil {
		return err
	}
	who := fmt.Sprintf("rank %d", opener)
	if opener == theirRoot {
		who = "the root"
	}
	return &errs.Error{Class: errs.Count, Op: "Reduce", Rank: rank, Peer: opener, Tag: errs.None,
		Detail: lengths(who, theirW, rank, w, elem)}
}

// slotCross is the fault of an episode that a rank made for a call that did not go
// through the slot, where rank (root its root, w its length) went through it.
func slotCross(e *episode, rank, root, w int) *errs.Error {
	if e.kind == reduce && e.small {
		return mismatchOf(e, root, w, e.maker, e.width)
	}
	return disagree(e.seq, rank, reduce, root, int(e.elem), e.kind, int(e.root), int(e.elem))
}
