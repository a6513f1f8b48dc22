package coll

import (
	"fmt"

	"github.com/weft-mpi/weft/internal/errs"
)

// A small Bcast or Scatter (a root buffer of up to litMax; a Scatterv whose
// blocks are a Scatter's too) needs no episode when its root comes first: the root
// leaves a copy of its buffer in the ring slot, in the rest of the line that holds
// the slot's episode pointer and, past litSlot bytes, in the lines of the slot's
// claim, or past litBytes in the slot's wide area (litLeave), and returns; the
// others take their part from there (litCopy), reading that one line, or those.
// An episode is made only by a rank that comes before the root: the root then goes
// through it, so that the ranks waiting there are released. A rank that makes (or
// finds) the episode looks for the copy after it (unlit), and the root looks for the
// episode after leaving its copy (litRoot): one of the two sees the other. A rank
// whose call differs from such a root's finds the fault in the slot (unlit) and
// records it in its episode, since that root never sees the episode.
//
// 4 ranks' Bcast of 8 bytes, same root: 0.206 -> 0.167 µs; 2 ranks 0.103 -> 0.079
// (the root's making of episodes, the zeroed lines and the swap of the slot, were a
// quarter of the samples, and every other rank read the episode's first line).
// 4 ranks' Scatter of 8 bytes each, same root: 0.382 -> 0.254 µs; Scatterv of the
// same blocks 0.366 -> 0.27.

// litBytes is the largest root buffer whose copy lies in its ring slot's lines: litSlot
// bytes in the slot's line, the rest in its claim's two lines, which only a copy
// longer than litSlot makes the others read (4 ranks' 8-byte Scatter (32 bytes)
// reads one line; a 16-byte Scatter or a 64-byte Bcast reads two, where the
// episode took 0.49 and 0.42 µs, twice as long as the single line's). The claim's
// second line took copies of up to 152 bytes off the episodes (4 KiB more a
// communicator), µs, 3 interleaved rounds: 2 ranks' Bcast of 128 bytes 0.24-0.32
// -> 0.17-0.41 (Open MPI 0.24-0.27; 0.17 in both rounds of the VM's fast phase),
// Scatter of 64-byte blocks 0.37-1.07 -> 0.22-0.41 (0.22-0.29); 4 ranks' Scatter
// of 32-byte blocks 0.70-1.12 -> 0.35-0.44 (0.68-1.07), Bcast of 128 bytes
// 0.36-0.51 -> 0.28-0.36 (1.56-1.77).
const (
	litSlot  = 32
	litMore  = 120
	litBytes = litSlot + litMore
)

// litMax is the largest root buffer a Bcast or Scatter leaves in its ring slot:
// past litBytes the whole copy lies in the slot's wide area (see wideArea), which
// the others read instead of an episode's copy, whose making and gates took 4
// ranks' Bcast of 256 bytes 0.21-0.25 µs against 0.12-0.14 for one of 152 in the
// slot's lines, and their Scatter of 64-byte blocks 0.34-0.40 against 0.17-0.32
// for 16-byte blocks.
const litMax = wideBytes

// litRoot takes the root of a small Bcast or Scatter (kind k; n is the buffer's
// length, or a Scatter's block) through episode s without making it, if no rank
// has made it: it leaves its copy in the slot and counts itself in, and reports
// true with the outcome. It reports false if a rank made the episode first (before
// the copy, or while the root left it), or if the slot holds another rank's copy
// (a rank that also calls itself the root): the root then goes through the episode.
func (c *Comm) litRoot(rank int, k kind, data []byte, elem, n int) (left bool, err error) {
	s := c.ranks[rank].seq.Load()
	if !c.free(s) {
		return true, ErrAborted
	}
	r := &c.ring[s%ringSize]
	made := func() bool { e := r.p.Load(); return e != nil && e.seq == s }
	if made() || !c.litLeave(s, k, data, elem, rank, n) || made() {
		return false, nil
	}
	c.count(rank, s)
	return true, nil
}

// litLeave leaves the root's copy of its buffer for episode s in its ring slot and
// reports whether it did: not if a copy for s was claimed already (by this root, in
// litRoot, which then found the episode made; or by another rank that also calls
// itself the root, which then finds the fault through the episode). The claim is a
// word of its own, on a line that only roots write (claiming the copy's stamp took
// the slot's line from a spinning reader, who then took it back before the copy
// was written: 2 ranks' Bcast 0.187 -> 0.233 µs). The root writes the copy before
// it counts itself in s, so nobody replaces the slot meanwhile.
func (c *Comm) litLeave(s uint64, k kind, data []byte, elem, root, n int) bool {
	claim := &c.claims[s%ringSize].s
	if old := claim.Load(); old&^slotTag > s || !claim.CompareAndSwap(old, s+1) {
		return false
	}
	r := &c.ring[s%ringSize]
	r.kind, r.root, r.elem, r.len = k, int32(root), int32(elem), int32(n)
	if len(data) > litBytes {
		copy(c.wideArea()[s%ringSize][:], data)
	} else if in := copy(r.data[:], data); in < len(data) {
		copy(c.claims[s%ringSize].more[:], data[in:])
	}
	r.lit.Store(s + 1)
	return true
}

// holds reports whether the slot holds the root's copy for episode s.
func (r *ringSlot) holds(s uint64) bool { return r.lit.Load() == s+1 }

// misfit describes how the calling rank's call s (kind k, root, element size and
// its buffer: a Bcast's, or a Scatter's receive buffer) differs from the root's
// whose copy r holds, or returns nil.
func (r *ringSlot) misfit(s uint64, rank int, k kind, root, elem int, buf []byte) *errs.Error {
	if err := disagree(s, rank, k, root, elem, r.kind, int(r.root), int(r.elem)); err != nil {
		return err
	}
	switch n := int(r.len); {
	case fits(k, len(buf), n):
		return nil
	case k.scatters():
		return scatterShort(k, rank, root, n, len(buf), elem)
	}
	return bcastLength(root, int(r.len), rank, len(buf), elem)
}

// litCopy takes the rank's part of the root's copy from its next ring slot, if the
// root has left it there (or leaves it while the rank polls: awaitLit) and the
// rank's call agrees with the root's (a rank whose differs finds the fault through
// its episode: see unlit), and counts the rank in: it reads the slot before it
// counts itself, so the root's next lap cannot have replaced it.
func (c *Comm) litCopy(rank int, k kind, buf []byte, elem, root int) bool {
	s := c.ranks[rank].seq.Load()
	r := &c.ring[s%ringSize]
	if !r.holds(s) && !c.awaitLit(r, s, k, len(buf)) {
		return false
	}
	if r.kind != k || r.root != int32(root) || r.elem != int32(elem) || !fits(k, len(buf), int(r.len)) {
		return false // as misfit finds, without describing it
	}
	c.copyLit(rank, s, r, buf)
	return true
}

// awaitLit polls for the root's copy of episode s in r, for a rank of a call of
// kind k whose buffer holds n bytes, and reports whether it came. A rank that spins
// polls within its spin; one of more ranks than processors yields once first, as a
// wait does: the root may be queued on its P, and an episode made for want of it
// takes the root off the slot too (4 ranks' Bcasts on 2 processors: 60,000 -> 7,500
// of 3 million copies through episodes). It polls while the copy may come: not
// when the rank's own receive buffer says the root's would not fit the slot (a
// Scatter of 4 ranks' 64-byte blocks, whose ranks came before the root, yielded at
// every call: 0.64-0.75 -> 1.2-1.5 µs), and no longer once the episode of s is made
// (by the root of a Scatter too long for the slot, or by another rank). It is a
// function of its own so that a rank that finds the copy there builds no closure.
func (c *Comm) awaitLit(r *ringSlot, s uint64, k kind, n int) bool {
	if k.scatters() && c.n*n > litMax {
		return false
	}
	settled := func() bool {
		if r.holds(s) {
			return true
		}
		e := r.p.Load()
		return e != nil && e.seq == s
	}
	return c.poll(settled) && r.holds(s)
}

// fits reports whether a rank's buffer of n bytes takes its part of a root's copy
// of kind k and length (or block) m.
func fits(k kind, n, m int) bool {
	if k.scatters() {
		return n >= m
	}
	return n == m
}

// scatters reports whether k is a Scatter or Scatterv, whose ranks each take a
// block of the root's copy.
func (k kind) scatters() bool { return k == scatter || k == scatterv }

// copyLit copies the rank's part of the copy that r holds into buf (a Bcast's
// whole buffer, a Scatter's block) and counts the rank in episode s.
func (c *Comm) copyLit(rank int, s uint64, r *ringSlot, buf []byte) {
	n, at, all := int(r.len), 0, int(r.len)
	if r.kind.scatters() {
		at, all = rank*n, c.n*n
	}
	switch {
	case all > litBytes: // the root made the wide area before it lit the slot
		copy(buf[:n], c.wide.Load()[s%ringSize][at:at+n])
	case at+n <= litSlot:
		copy(buf[:n], r.data[at:at+n])
	default:
		c.copyLong(s, r, buf[:n], at)
	}
	c.count(rank, s)
}

// copyLong copies bytes at to at+len(dst) of the root's copy for episode s into
// dst: from the slot r, then from the slot's claim.
func (c *Comm) copyLong(s uint64, r *ringSlot, dst []byte, at int) {
	if at < litSlot {
		dst = dst[copy(dst, r.data[at:]):]
		at = litSlot
	}
	copy(dst, c.claims[s%ringSize].more[at-litSlot:])
}

// unlit looks, for a rank that holds episode e but has not counted itself in, for
// the copy of a root that left it in the slot instead of going through e. If the
// rank's call (kind k, root, element size, buf) agrees with the root's and the rank
// is not the root, it takes its part, counts itself in and reports true; if the
// call differs, it records the fault in e, where the rank finds it.
func (c *Comm) unlit(e *episode, rank int, k kind, root, elem int, buf []byte) bool {
	r := &c.ring[e.seq%ringSize]
	if !slotted(k) { // reduce and exchange look at the slot for theirs
		if v, held := c.slotHeld(e.seq); held { // a small reduction went through the slot
			e.fail(slotOther(e, rank, k, root, elem, v))
			return false
		}
	}
	if !r.holds(e.seq) {
		return false
	}
	switch err := r.misfit(e.seq, rank, k, root, elem, buf); {
	case err != nil:
		e.fail(err)
	case rank != root:
		c.copyLit(rank, e.seq, r, buf)
		return true
	}
	return false
}

// bcastLength is the fault of a Bcast whose rank has n bytes where the root has
// rootLen.
func bcastLength(root, rootLen, rank, n, elem int) *errs.Error {
	class := errs.Count
	if rootLen > n {
		class = errs.Truncate
	}
	return &errs.Error{Class: class, Op: "Bcast", Peer: root, Tag: errs.None,
		Detail: lengths("the root", rootLen, rank, n, elem)}
}

// scatterShort is the fault of a Scatter(v) whose root sends a block of sent bytes
// to rank, whose receive buffer holds room.
func scatterShort(k kind, rank, root, sent, room, elem int) *errs.Error {
	who := fmt.Sprintf("rank %d", rank)
	if rank == root {
		who = "itself"
	}
	return &errs.Error{Class: errs.Truncate, Op: k.String(), Rank: rank, Peer: root, Tag: errs.None,
		Detail: fmt.Sprintf("the root sends %d elements to %s, whose receive buffer holds %d", sent/max(elem, 1), who, room/max(elem, 1))}
}
