package coll

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/weft-mpi/weft/internal/errs"
)

// A small Reduce, Scan, Exscan or Gather (at most slotRanks ranks, whose
// contributions fit the slot: see slotPiece), a Gatherv of at most slotRanks
// ranks (see gathervStride), and on ranks that spin a small
// Allreduce, Allgather(v), Alltoall, ReduceScatterBlock or a Barrier (see
// slotEveryone), needs no episode,
// as a small Bcast needs none (lit.go): every rank leaves its contribution (a
// Gather's or Allgather's block, an Alltoall's n blocks) in the ring slot, at its
// rank's place, and sets its bit in the slot's lit word, which also carries the
// episode's number and the call (kind, root, length, element size); a rank that
// needs the others' contributions (a Reduce's or Gather's root, a Scan's rank r:
// those of ranks 0 to r, every rank of the others) folds them or copies its blocks
// out once their bits are set, and a Barrier's ranks return once every bit is. The
// first rank to come claims the slot as a Bcast's root does (litLeave, with the
// claim flagged slotTag), so that no root of another collective writes a copy
// there meanwhile, and opens it. An episode's first line,
// written by its maker on one core and read by every rank on the others, and the
// six lines of the recycled episode that its maker clears, were most of a small
// reduction's time on two processors (4 ranks, 8 bytes: a Reduce to the same root
// 0.251 µs through an episode, 0.173 through the slot; Scan 0.386 and 0.331, Exscan
// 0.355 and 0.290).
//
// A rank that finds bits missing after its spin (or its yield) makes an episode of
// kind slotWait, or finds the one another waiting rank made, and waits on its start
// gate, which the rank whose bit completes the word opens: the waiting rank stores
// the episode and then loads the word, the other stores its bit and then loads the
// episode, so one of the two sees the other. A rank whose call differs from the
// slot's flags the word slotFault and fails the waiting ranks' episode, making it if
// need be; a rank that went through an episode instead (a contribution too long for
// the slot, another collective) finds the word (unlit, or reduce and exchange for a
// reduction) and fails its episode, or the slot's ranks find that episode when they
// set their bits and fail it: the waiting ranks find the fault there.

// slotEveryone: an Allreduce, Allgather, Alltoall, ReduceScatterBlock or Barrier,
// where every rank waits for every other, goes through the slot only on ranks that have a processor each
// (and spin): there 2 ranks' Allreduce of 8 bytes took 0.242 µs against 0.325
// through an episode, and their Barrier 0.200 against 0.256 (Open MPI 0.208 and
// 0.161), but with more ranks than processors nearly every call had a rank make the
// episode to park on, where a Barrier's ranks mostly find their counter complete
// after one yield: 4 ranks on 2 processors 0.393 against 0.365 µs, 16 ranks 3.34
// against 2.14, Allreduce 0.573 against 0.513.

// slotRanks is the most ranks whose reduction may go through the slot: one bit each.
const slotRanks = 16

// The lit word of a slot that holds a small reduction or Barrier: bits 0-15 the
// ranks that have left their contributions, then the call's root (4 bits), length
// (10 bits) and element size (6 bits), the episode's number modulo 2^16
// (slotSeqBits at slotSeqAt), its kind (4 bits at slotKindAt: its index in
// slotKinds), the rank that opened the slot (4 bits at slotOpenerAt), slotFault and
// slotTag, which no episode number has. The opener claims the slot first (its claim
// flagged slotTag), as a Bcast's root does.
const (
	slotTag      = 1 << 63
	slotFault    = 1 << 62 // in the word
	slotSeqAt    = 36
	slotSeqBits  = 16
	slotSeqMask  = 1<<slotSeqBits - 1
	slotKindAt   = slotSeqAt + slotSeqBits
	slotOpenerAt = slotKindAt + 4
	slotCall     = slotTag | 15<<slotKindAt | (1<<slotSeqAt - 1<<16) // all but the bits, the episode, the opener and the fault
)

// slotKinds are the collectives that may go through the slot, by their code in the word.
var slotKinds = [...]kind{reduce, scan, exscan, allreduce, barrier, gather, allgather, alltoall, reduceScatterBlock, gatherv, allgatherv}

// slotCode is k's code in the word (len(slotKinds) for a kind that never goes
// through the slot).
func slotCode(k kind) int { return int(slotCodes[k]) }

// slotCodes is slotCode's table: every call of a small collective asks it.
var slotCodes = func() (t [256]uint8) {
	for i := range t {
		t[i] = uint8(len(slotKinds))
	}
	for i, k := range slotKinds {
		t[k] = uint8(i)
	}
	return t
}()

// slotted reports whether k, with contributions short enough, goes through the slot:
// a rank that calls one through an episode looks at the slot itself (reduce,
// exchange), with its length.
func slotted(k kind) bool {
	switch k {
	case reduce, allreduce, scan, exscan, gather, gatherv, allgather, allgatherv, alltoall, reduceScatterBlock:
		return true
	}
	return false
}

// slotWord is the word that opener puts in the slot of episode s for a small
// reduction of kind k and root, with contributions of w bytes of elements of elem
// bytes.
func slotWord(s uint64, k kind, root, w, elem, opener int) uint64 {
	return slotTag | uint64(opener)<<slotOpenerAt | uint64(slotCode(k))<<slotKindAt | (s&slotSeqMask)<<slotSeqAt |
		uint64(elem)<<30 | uint64(w)<<20 | uint64(root)<<16
}

// slotStale reports whether v, a slot's word, is a small reduction's of another
// episode than s.
func slotStale(v, s uint64) bool { return v&slotTag != 0 && v>>slotSeqAt&slotSeqMask != s&slotSeqMask }

// slotKind is the kind of the collective whose word is v.
func slotKind(v uint64) kind { return slotKinds[min(int(v>>slotKindAt&15), len(slotKinds)-1)] }

// slotCallOf is the call whose word is v: its kind, root, length of a contribution,
// element size, and the rank that opened the slot.
func slotCallOf(v uint64) (k kind, root, w, elem, opener int) {
	return slotKind(v), int(v >> 16 & 15), int(v >> 20 & 1023), int(v >> 30 & 63), int(v >> slotOpenerAt & 15)
}

// slotHeld returns the word of episode s's slot if a small reduction holds it, and
// whether one does: the word says so itself, with the episode's number. Only the
// number's low bits fit, but no word lives long enough for them to come round: the
// next collective of the slot replaces it, through the slot or a root's copy, or
// clears it (take). Reading the claim's line instead, as the first version did,
// cost every rank a line (2 ranks' Barrier: 0.217 against 0.200 µs).
func (c *Comm) slotHeld(s uint64) (uint64, bool) {
	v := c.ring[s%ringSize].lit.Load()
	return v, v&slotTag != 0 && !slotStale(v, s)
}

// slotFits reports whether a collective of kind k with w-byte pieces of elem-byte
// elements goes through the slot: in its lines, or in its wide area; an
// Allgatherv only while a piece's first byte holds its block's length.
func (c *Comm) slotFits(k kind, w, elem int) bool {
	return c.n <= slotRanks && elem < 64 && (c.narrow(w) || c.n*w <= wideBytes) && (k != allgatherv || w <= pieceLenMax+1)
}

// narrow reports whether the n pieces of w bytes lie in the slot's lines (see
// slotPiece), not in its wide area.
func (c *Comm) narrow(w int) bool { return w <= c.narrowMax }

// narrowest is the longest piece of which n fit the slot's lines (0 if none):
// fewer fit as pieces grow. New works it out once, so that slotPiece, called for
// every piece, stays small enough to inline.
func narrowest(n int) int {
	w := litBytes
	for w > 0 && int(slotRoom[w].all) < n {
		w--
	}
	return w
}

// wideBytes is the room of a slot's wide area: the pieces of a small reduction too
// long for the slot's lines (2 ranks' of more than 32 bytes, 4 ranks' of more than
// 16) lie there, rank after rank, up to 1 KiB in all (2 ranks' of 512 bytes, 16
// ranks' of 64), so that it goes through the slot rather than an episode, whose
// making, gates and copies took 2 spinning ranks' Allgatherv of 64 bytes 1.12 µs
// against 0.58 through the wide area, Scan 0.53 against 0.25 (Open MPI 0.37 and
// 0.22; medians of 3 interleaved rounds, 2026-12-02).
const wideBytes = 1 << 10

// wideArea is the slots' wide areas, made when a call first needs one: 1 KiB a slot
// that a communicator of only smaller collectives, or of more than slotRanks ranks,
// does without.
func (c *Comm) wideArea() *[ringSize][wideBytes]byte {
	if a := c.wide.Load(); a != nil {
		return a
	}
	c.wide.CompareAndSwap(nil, new([ringSize][wideBytes]byte))
	return c.wide.Load()
}

// slotMore is the room for pieces in a claim's first line, after its word.
const slotMore = 56

// slotRoom is, by a piece's length w (1 to litBytes), how many pieces lie in the
// rest of a slot's line (first) and how many in all, counting those in the rest of
// its claim's first line (see slotPiece): worked out once, as slotPiece and
// slotFits ran their divisions at every call.
var slotRoom = func() (t [litBytes + 1]struct{ first, all uint8 }) {
	for w := 1; w <= litBytes; w++ {
		t[w].first, t[w].all = uint8(litSlot/w), uint8(litSlot/w+slotMore/w)
	}
	return t
}()

// slotPieces is the layout of the pieces of w bytes in episode s's slot: in the
// rest of the slot's line while whole pieces fit there, then in the rest of its
// claim's line (as a Bcast's copy continues there), so that no piece straddles the
// two and each can be folded where it lies; or, when the n pieces do not fit those,
// in the slot's wide area, which the caller's reduceInSlot made. With 4 ranks of two
// doubles each, a Reduce's, Scan's, Exscan's or Gather's pieces so fit the slot's
// lines, where they took an episode's six lines. It sets *ps, zero, field by
// field: a layout made whole, then copied, cost stalled loads (stores of 8 bytes
// read back 16 at a time), 5% of the samples of 4 ranks' Scan of one double.
func (c *Comm) slotPieces(ps *pieces, s uint64, w int) {
	ps.stride, ps.width = w, w
	if !c.narrow(w) {
		ps.lo, ps.first = c.wide.Load()[s%ringSize][:], c.n
		return
	}
	ps.lo, ps.hi, ps.first = c.ring[s%ringSize].data[:], c.claims[s%ringSize].more[:], int(slotRoom[w].first)
}

// slotPiece is rank's piece of w bytes in episode s's slot (see slotPieces).
func (c *Comm) slotPiece(s uint64, rank, w int) []byte {
	var ps pieces
	c.slotPieces(&ps, s, w)
	return ps.at(rank)
}

// widePiece is slotPiece in the wide area, which the caller's reduceInSlot made.
func (c *Comm) widePiece(s uint64, rank, w int) []byte {
	return c.wide.Load()[s%ringSize][rank*w : (rank+1)*w]
}

// reduceInSlot is a rank's part in a small Reduce, Scan, Exscan, Allreduce, Barrier,
// Gather, Allgather, Alltoall or ReduceScatterBlock (k) through its next episode's
// ring slot (the recv of a Gather's root and of an Allgather holds n blocks as long
// as the rank's send, an Alltoall's as long as its send, a ReduceScatterBlock's one
// block, and no more). It reports false, having done nothing, when a root of
// another collective left its copy there: the rank then goes through an episode,
// where it finds the fault.
func (c *Comm) reduceInSlot(k kind, rank, root int, send, recv []byte, elem int, op Op, p *Part) (bool, error) {
	s := c.ranks[rank].seq.Load()
	if c.job.aborted.Load() || !c.free(s) {
		return true, ErrAborted
	}
	r, claim := &c.ring[s%ringSize], &c.claims[s%ringSize].s
	w, mine, bit := c.pieceWidth(k, send, p), slotTag|(s+1), uint64(1)<<rank
	if !c.narrow(w) {
		c.wideArea() // for slotPieces
	}
	var ps pieces
	c.slotPieces(&ps, s, w)
	if k == gatherv && rank == root {
		send = nil // its block stays in its buffer (gathervOut)
	}
	if k == gatherv && len(send) > c.wideShare() && !c.setAside(rank, s, send) {
		return true, ErrAborted
	}
	if k == allgatherv && len(send) != p.recvCount(rank) {
		bit |= c.ownCountFault(rank, s, len(send), p.recvCount(rank), elem)
	}
	call := slotWord(s, k, root, w, elem, rank)
	v, held := c.slotHeld(s)
	for i := 1; !held; i++ {
		switch old := claim.Load(); {
		case old == mine: // another rank opens it: its word comes
			if i%64 == 0 {
				runtime.Gosched()
			}
		case old&^slotTag > s:
			return false, nil // a copy for s: see unlit
		case claim.CompareAndSwap(old, mine):
			// Opened with our contribution in: one line move fewer than setting our bit after.
			c.putPiece(k, s, rank, &ps, send)
			v = call | bit
			r.lit.Store(v)
			return true, c.slotDone(k, rank, root, s, v, recv, &ps, op, p)
		}
		v, held = c.slotHeld(s)
	}
	if v&slotCall != call&slotCall {
		return true, c.slotOdd(k, rank, root, s, w, elem, v)
	}
	c.putPiece(k, s, rank, &ps, send)
	for !r.lit.CompareAndSwap(v, v|bit) {
		v = r.lit.Load()
	}
	return true, c.slotDone(k, rank, root, s, v|bit, recv, &ps, op, p)
}

// slotDone is a rank's part in a small reduction (kind k) once its bit is in v, the
// word of episode s's slot: it wakes or fails whom it must (slotLeft), waits for and
// folds the contributions it needs (slotFold), and counts itself in.
func (c *Comm) slotDone(k kind, rank, root int, s, v uint64, recv []byte, ps *pieces, op Op, p *Part) error {
	c.slotLeft(k, rank, root, s, v, ps.width)
	err := c.slotFold(k, rank, root, s, recv, ps, op, p)
	c.count(rank, s)
	return err
}

// slotOdd ends the part of a rank whose call (kind k, root, w bytes of elem-byte
// elements) differs from the word v of episode s's slot: it flags the word and fails
// the waiting ranks' episode with the fault naming the rank, and returns the rank's
// own. A Gather's sender whose block differs in length alone leaves without an
// error, as through an episode, and its root judges the lengths by its blocks.
func (c *Comm) slotOdd(k kind, rank, root int, s uint64, w, elem int, v uint64) error {
	err := slotMisfit(s, k, rank, root, w, elem, v)
	c.slotFail(rank, s, forRoot(err, rank))
	c.count(rank, s)
	if theirs, theirRoot, _, theirElem, _ := slotCallOf(v); k == gather && rank != root &&
		theirs == k && theirRoot == root && theirElem == elem {
		return nil
	}
	return err
}

// slotLeft is what a rank does once its bit is in v, the word of episode s: it
// opens the waiting ranks' episode if its bit completed the word, and fails an
// episode of s that another path made, which a rank would otherwise wait in for
// ever, or find too late.
func (c *Comm) slotLeft(k kind, rank, root int, s, v uint64, w int) {
	e := c.ring[s%ringSize].p.Load()
	if e == nil || e.seq != s {
		return
	}
	if e.kind != slotWait {
		e.fail(slotCross(e, k, rank, root, w))
		return
	}
	if all := uint64(1)<<c.n - 1; v&all == all {
		e.start.release()
	}
}

// slotFold waits until the ranks whose contributions rank needs have left them in
// episode s's slot (a Reduce's or Gather's root, every rank of the joint ones: every
// rank; a Scan's rank r: ranks 0 to r; an Exscan's: 0 to r-1), or one has found its
// call different, and folds them into recv in rank order, or copies its blocks out
// (a Barrier: nothing).
func (c *Comm) slotFold(k kind, rank, root int, s uint64, recv []byte, ps *pieces, op Op, p *Part) error {
	w := ps.width
	r := &c.ring[s%ringSize]
	count := rank + 1 // a Scan's pieces
	switch {
	case (k == reduce || k == gather) && rank != root, k == exscan && rank == 0:
		return nil
	case k == gatherv && rank != root:
		return c.gathervLeft(s, rank, w, p.Send)
	case k == reduce, k == allreduce, k == barrier, k == gather, k == gatherv, k == allgather, k == allgatherv, k == alltoall, k == reduceScatterBlock:
		count = c.n
	case k == exscan:
		count = rank
	}
	need := uint64(1)<<count - 1
	over := func() bool { v := r.lit.Load(); return v&need == need || v&slotFault != 0 }
	if !over() && !c.poll(over) || r.lit.Load()&slotFault != 0 {
		e := c.take(rank, slotWait, root, 0, Op{}, -1)
		if e == nil {
			return ErrAborted
		}
		if e.kind != slotWait {
			e.fail(slotCross(e, k, rank, root, w))
			return c.outcome(e, rank, true)
		}
		ok := over() || c.wait(&e.start)
		if !ok || e.fault.Load() != nil {
			return c.outcome(e, rank, ok)
		}
	}
	switch k {
	case barrier:
		return nil
	case gatherv:
		return c.gathervOut(s, rank, root, w, p)
	case allgatherv:
		return c.allgathervOut(s, rank, w, p)
	case gather, allgather: // every rank's block has the length of ours, its RecvBlock
		for j := range c.n {
			copy(recv[j*w:(j+1)*w], ps.at(j))
		}
		return nil
	case alltoall: // block rank of every rank's n
		b := w / c.n
		for j := range c.n {
			copy(recv[j*b:(j+1)*b], ps.at(j)[rank*b:])
		}
		return nil
	case reduceScatterBlock: // block rank of every rank's n, folded
		b := w / c.n
		blocks := *ps
		blocks.off, blocks.width = rank*b, b
		ps = &blocks
	}
	if err := fold(k, ps, count, recv, op); err != nil {
		err.Rank = rank
		return err
	}
	return nil
}

// slotFail records err, the fault of a rank whose call differs from that of
// episode s's slot, in the episode where the ranks wait (made here if none has made
// it yet: they find it once they see the word flagged), and flags the word.
func (c *Comm) slotFail(rank int, s uint64, err *errs.Error) {
	if e := c.take(rank, slotWait, 0, 0, Op{}, -1); e != nil {
		e.fail(err)
	}
	r := &c.ring[s%ringSize]
	for v := r.lit.Load(); !r.lit.CompareAndSwap(v, v|slotFault); v = r.lit.Load() {
	}
}

// slotAside ends the part of a rank whose reduction (kind k, root, w bytes of
// elem-byte elements) went through episode e while the others' went through its
// slot, whose word is v: e's fault names the rank, for the others, and the rank's
// names the slot's opener or root.
func (c *Comm) slotAside(e *episode, k kind, rank, root, w, elem int, v uint64) error {
	err := slotMisfit(e.seq, k, rank, root, w, elem, v)
	e.fail(forRoot(err, rank))
	err.Rank = rank
	return err
}

// forRoot is err, a rank's fault, as the others see it: naming the rank.
func forRoot(err *errs.Error, rank int) *errs.Error {
	f := *err
	f.Peer = rank
	return &f
}

// slotOther is the fault of episode e, made or found by a rank whose call (kind k)
// is not a reduction that goes through the slot, where e's slot holds the word v.
func slotOther(e *episode, rank int, k kind, root, elem int, v uint64) *errs.Error {
	theirs, theirRoot, _, theirElem, _ := slotCallOf(v)
	return disagree(e.seq, rank, k, root, elem, theirs, theirRoot, theirElem)
}

// slotMisfit is the fault of rank's small reduction (kind k, root, w bytes of
// elem-byte elements) where episode s's slot holds the word v of another call.
func slotMisfit(s uint64, k kind, rank, root, w, elem int, v uint64) *errs.Error {
	theirs, theirRoot, theirW, theirElem, opener := slotCallOf(v)
	if err := disagree(s, rank, k, root, elem, theirs, theirRoot, theirElem); err != nil {
		return err
	}
	if k == gather { // the root's block is what every rank must send
		err := mismatch(gather, elem, rank, root, w, theirW)
		if rank == root {
			err = mismatch(gather, elem, opener, root, theirW, w)
		}
		err.Rank = rank
		return err
	}
	who := fmt.Sprintf("rank %d", opener)
	if k == reduce && opener == theirRoot {
		who = "the root"
	}
	return &errs.Error{Class: errs.Count, Op: k.String(), Rank: rank, Peer: opener, Tag: errs.None,
		Detail: lengths(who, theirW, rank, w, elem)}
}

// slotCross is the fault of an episode that a rank made for a call that did not go
// through the slot, where rank (kind k, root its root, w its length) went through
// it.
func slotCross(e *episode, k kind, rank, root, w int) *errs.Error {
	switch {
	case e.kind != k:
		return disagree(e.seq, rank, k, root, int(e.elem), e.kind, int(e.root), int(e.elem))
	case e.small && k == gather && e.maker == root: // the root's block is what every rank must send
		return mismatch(gather, int(e.elem), rank, root, w, e.width)
	case e.small && k == gather:
		return mismatch(gather, int(e.elem), e.maker, root, e.width, w)
	case e.small && k == reduce:
		return mismatchOf(e, root, w, e.maker, e.width)
	case e.small:
		return mismatchOf(e, rank, w, e.maker, e.width)
	}
	return &errs.Error{Class: errs.Count, Op: k.String(), Peer: e.maker, Tag: errs.None,
		Detail: fmt.Sprintf("rank %d has %d elements, rank %d has more", rank, w/max(int(e.elem), 1), e.maker)}
}

// A Gatherv goes through the slot as a small Gather does, but its ranks' blocks
// may differ in length, which no rank knows of the others: each piece is
// gathervStride bytes whatever the blocks, and starts with the length of the block
// that follows it. A block too long for its piece, up to wideBytes/n bytes (256 for
// 4 ranks), lies in the rank's share of the slot's wide area, its piece marked
// gathervWide and holding its length. A non-root whose block is longer still
// publishes it in the slot's episode (setAside) and marks its piece gathervAside:
// a block of up to asideEager bytes as a copy, and leaves at once as the others
// do; a longer one itself, and waits until the root has copied it straight from
// its buffer. So every Gatherv of at most slotRanks ranks goes through the slot, as
// every rank can tell alone. 2 ranks' Gatherv of 8 bytes took 0.230 µs through an
// episode (Open MPI 0.099), 4 ranks' 1.24 (Open MPI 1.03); 4 ranks' of 64 and 256
// bytes, set aside, 0.68-1.34 µs where a Gather's took 0.27-0.40.

// pieceLenMax is the longest block whose length a piece's first byte holds: an
// Allgatherv of longer blocks does not go through the slot.
const pieceLenMax = 255

// gathervWide and gathervAside mark the piece of a Gatherv's rank whose block lies
// in the wide area (its length in the piece's next two bytes) or is set aside.
const (
	gathervWide  = 254
	gathervAside = 255
)

// asideEager is the longest block a Gatherv's rank sets aside as a copy. Waiting
// for the root, such ranks made every Gatherv of 64-byte blocks on 4 ranks wait
// for its slowest rank: 1.54-1.68 µs a call on one processor, where a Gather's
// ranks, which leave copies, took 0.36-0.40.
const asideEager = exchangeEager

// gathervStride is the length of each piece of a Gatherv of n ranks through the
// slot: the longest, up to 63 bytes, whose n pieces fit the slot's lines
// (slotPiece); a longer block lies in the wide area (wideShare) or is set aside
// (setAside). New works it out once.
func gathervStride(n int) int {
	if n > slotRanks {
		return 0 // never through the slot
	}
	return min(63, narrowest(n))
}

// wideShare is the room of each rank's block of a Gatherv in the slot's wide area.
func (c *Comm) wideShare() int { return wideBytes / c.n }

// pieceWidth is the length of the pieces of a collective of kind k through the
// slot whose rank contributes send (its Part p, if any): an Allgatherv's are its
// longest block and the byte of its length before it (its first byte: see
// pieceLenMax).
func (c *Comm) pieceWidth(k kind, send []byte, p *Part) int {
	switch k {
	case gatherv:
		return c.stride
	case allgatherv:
		w := 0
		for j := range c.n {
			w = max(w, p.recvCount(j))
		}
		return w + 1
	}
	return len(send)
}

// putPiece writes rank's contribution send into its piece of episode s's slot,
// whose layout is ps: a Gatherv's with its length first, or its length alone when
// the block lies in the wide area, or marked set aside when too long for that.
func (c *Comm) putPiece(k kind, s uint64, rank int, ps *pieces, send []byte) {
	piece := ps.at(rank)
	switch {
	case k != gatherv && k != allgatherv:
		copy(piece, send)
	case len(send) < ps.width:
		piece[0] = byte(len(send))
		copy(piece[1:], send)
	case k == gatherv && len(send) <= c.wideShare():
		piece[0] = gathervWide
		binary.LittleEndian.PutUint16(piece[1:], uint16(len(send)))
		c.wideArea() // for widePiece
		copy(c.widePiece(s, rank, c.wideShare()), send)
	default:
		piece[0] = gathervAside
	}
}

// setAside publishes a Gatherv's block too long for its piece (or a copy of it, up
// to asideEager bytes) in the exchange of episode s's slotWait episode, made here if
// no rank has made it, before the rank sets its bit: the root, which sees the bit,
// finds the episode and the block. It reports false if the job ended meanwhile.
func (c *Comm) setAside(rank int, s uint64, send []byte) bool {
	e := c.take(rank, slotWait, 0, 0, Op{}, -1)
	if e == nil {
		return false
	}
	sh := &c.exchangeOf(e, true).shares[rank] // kept on reuse, as a small exchange's
	if len(send) <= asideEager {
		sh.copy = append(sh.copy[:0], send...)
		send = sh.copy
	}
	sh.Send = send
	return true
}

// gathervLeft is a Gatherv's non-root once its bit is set in episode s's slot: one
// that set its block itself aside waits until the root has copied it, and learns
// the root's fault if it found one.
func (c *Comm) gathervLeft(s uint64, rank, w int, send []byte) error {
	if len(send) <= asideEager {
		return nil
	}
	e := c.ring[s%ringSize].p.Load()
	return c.outcome(e, rank, c.wait(&e.done))
}

// gathervOut is a Gatherv's root once every rank has left its piece in episode s's
// slot (w bytes each): it checks every block's length against its count, as
// gathervSmall does, copies the blocks into place, and lets the ranks whose blocks
// it took from their buffers go, with its fault if it found one.
func (c *Comm) gathervOut(s uint64, rank, root, w int, p *Part) error {
	var (
		blocks [slotRanks][]byte
		aside  *episode // the episode where blocks were set aside, if any
	)
	for j := range c.n {
		switch piece := c.slotPiece(s, j, w); {
		case j == root:
			blocks[j] = p.Send
		case piece[0] == gathervWide:
			blocks[j] = c.widePiece(s, j, c.wideShare())[:binary.LittleEndian.Uint16(piece[1:])]
		case piece[0] != gathervAside:
			blocks[j] = piece[1 : 1+piece[0]]
		default:
			aside = c.ring[s%ringSize].p.Load()
			blocks[j] = aside.x.Load().shares[j].Send
		}
	}
	_, _, _, elem, _ := slotCallOf(c.ring[s%ringSize].lit.Load())
	var fault *errs.Error
	for j := 0; j < c.n && fault == nil; j++ {
		fault = mismatch(gatherv, elem, j, root, len(blocks[j]), p.recvCount(j))
	}
	if fault == nil && (aside == nil || aside.enter()) {
		for j := range c.n {
			move(p.recvBlock(j), blocks[j])
		}
		if aside != nil {
			aside.exit()
		}
	}
	switch {
	case aside == nil:
	case fault != nil:
		aside.fail(fault)
	default:
		aside.done.release()
	}
	if fault == nil {
		return nil
	}
	mine := *fault
	mine.Rank = rank
	return &mine
}

// On ranks that spin, an Allgatherv whose blocks fit the slot goes through it as
// an Allgather does: every rank knows every block's length (its counts), so every
// rank takes the same way alone. Its pieces are as long as the longest block, and
// the byte of the block's length before it. A rank whose own block is not the
// length its counts say flags the word's fault with its bit, so that every rank
// learns; one whose counts for another rank's block differ from that rank's
// length (counts that differ between ranks) learns it alone, where it reads the
// block.

// ownCountFault is the fault of an Allgatherv's rank whose block of sent bytes is
// not the room its counts give it: it fails the slot's waiting ranks' episode and
// returns the flag to set with the rank's bit.
func (c *Comm) ownCountFault(rank int, s uint64, sent, room, elem int) uint64 {
	err := mismatch(allgatherv, elem, rank, rank, sent, room)
	err.Detail = fmt.Sprintf("rank %d sends %d elements, which its counts give %d", rank, sent/max(elem, 1), room/max(elem, 1))
	c.slotFail(rank, s, err)
	return slotFault
}

// allgathervOut copies every rank's block out of its w-byte piece of episode s's
// slot into rank's receive buffer, once every bit is set and none flagged a fault.
func (c *Comm) allgathervOut(s uint64, rank, w int, p *Part) error {
	_, _, _, elem, _ := slotCallOf(c.ring[s%ringSize].lit.Load())
	for j := range c.n {
		if sent := int(c.slotPiece(s, j, w)[0]); sent != p.recvCount(j) {
			err := mismatch(allgatherv, elem, j, rank, sent, p.recvCount(j))
			err.Rank = rank
			return err
		}
	}
	for j := range c.n {
		piece := c.slotPiece(s, j, w)
		move(p.recvBlock(j), piece[1:1+piece[0]])
	}
	return nil
}
