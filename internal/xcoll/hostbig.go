package xcoll

import (
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
)

// An Allreduce whose parts do not fit an entry goes through the segment's large
// areas, a chunk at a time: every proc copies its chunk of its fold into its own
// area; each proc folds one slice of the chunk (whole pieces, coll.Piece, as the
// reductions in one proc cut them), across every proc's area in proc order, into
// the shared result area; every proc copies the whole result out.
// The steps meet on a word per proc that counts the steps it has done (three a
// chunk, counted over the communicator's life, the same on every proc), so each
// element is folded once, by one proc, and every proc gets the same bits. A
// proc's area is written again once every proc has folded the chunk before; the
// result area has two halves, by chunk parity.

// bigChunk is the bytes of a large Allreduce that a proc's area holds: about
// 1 MiB over all the procs' areas, and from 16 to 256 KiB.
func bigChunk(procs int) int { return min(max(1<<20/procs, 16<<10), 256<<10) &^ (lineBytes - 1) }

// big is the offset of the lines that count the procs' steps, after the entries.
func (h *host) big() int { return h.entries() + h.slots*h.procs*entryBytes }

// steps is proc p's count of its large Allreduce steps; the word after it holds
// the number (plus one) of the last call whose reduction function panicked there.
func (h *host) steps(p int) *atomic.Uint64 { return h.seg.Word64(h.big() + p*lineBytes) }

func (h *host) panicked(p int) *atomic.Uint64 { return h.seg.Word64(h.big() + p*lineBytes + 8) }

// area is proc p's area; result is half g%2 of the result area.
func (h *host) area(p int) []byte {
	off := h.big() + h.procs*lineBytes + p*h.chunk
	return h.seg.Mem[off : off+h.chunk : off+h.chunk]
}

func (h *host) result(g uint64) []byte {
	off := h.big() + h.procs*lineBytes + (h.procs+int(g%2))*h.chunk
	return h.seg.Mem[off : off+h.chunk : off+h.chunk]
}

// bigAllreduce returns the fold, in proc order, of every proc's acc (all of
// one length, checked) through the large areas.
func (o *call) bigAllreduce(acc []byte, fn coll.Op) ([]byte, error) {
	h := o.c.host
	piece := coll.Piece(max(o.elem, 1)) // the slices folded are whole pieces, as in one proc
	chunk := h.chunk - h.chunk%piece
	if chunk == 0 {
		return nil, o.fault(errs.Intern, errs.None, "elements of %d bytes do not fit the large areas", o.elem)
	}
	total := h.scratch(1, len(acc))
	var ferr error // our reduction function panicked
	for off := 0; off < len(acc); off += chunk {
		n := min(chunk, len(acc)-off)
		g := h.chunks
		h.chunks++
		if g > 0 {
			if err := o.allStepped(3*g - 1); err != nil { // everyone folded the chunk before
				return nil, err
			}
		}
		copy(h.area(h.me), acc[off:off+n])
		if err := o.step(3*g + 1); err != nil {
			return nil, err
		}
		pieces := (n + piece - 1) / piece
		lo, hi := min(h.me*pieces/h.procs*piece, n), min((h.me+1)*pieces/h.procs*piece, n)
		slice := h.result(g)[lo:hi]
		if ferr == nil {
			ferr = o.combineAll(fn, func(p int) []byte { return h.area(p)[lo:hi] }, h.procs, slice)
			if ferr != nil {
				h.panicked(h.me).Swap(o.seq + 1)
			}
		}
		if err := o.step(3*g + 2); err != nil {
			return nil, err
		}
		copy(total[off:off+n], h.result(g)[:n])
		h.steps(h.me).Swap(3*g + 3)
		h.ring()
	}
	for p := range h.procs {
		if h.panicked(p).Load() == o.seq+1 {
			if p == h.me {
				return nil, ferr
			}
			return nil, o.fault(errs.Op, o.c.members[p][0], "the reduction function panicked at the leader of proc %d (rank %d)", o.c.procs[p], o.c.members[p][0])
		}
	}
	return total, nil
}

// scratch returns buffer i (0: the leader's fold of its ranks in a large
// Allreduce, 1: the result of a Reduce or Allreduce in the segment), n bytes, kept from call to call: allocating
// a MiB for each call cost its pages' faults and clearing, half the time of a
// 1 MiB Allreduce of 4 procs. The buffers of a call are free at the next: its
// proc's ranks copied the result out before their next local step, which the
// leader waits for before it writes again.
func (h *host) scratch(i, n int) []byte {
	if cap(h.scratches[i]) < n {
		h.scratches[i] = make([]byte, n)
	}
	return h.scratches[i][:n]
}

// pack is pack of the n blocks block(0) to block(n-1) (packInto) in scratch 0,
// which keeps its memory for the next call: the blob of the leader's entry.
func (h *host) pack(n int, block func(j int) []byte) []byte {
	h.scratches[0] = packInto(h.scratches[0][:0], n, block)
	return h.scratches[0]
}

// step counts our proc's step k done, and waits until every proc has done it.
func (o *call) step(k uint64) error {
	h := o.c.host
	h.steps(h.me).Swap(k)
	h.ring()
	return o.allStepped(k)
}

// allStepped waits until every proc has done step k.
func (o *call) allStepped(k uint64) error {
	h := o.c.host
	return o.waitFor(func() bool {
		for p := range h.procs {
			if h.steps(p).Load() < k {
				return false
			}
		}
		return true
	})
}
