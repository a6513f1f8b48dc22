package coll

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
)

// chunkBytes is the size of the pieces a reduction is cut into: every rank that has
// arrived claims pieces, so that several processors combine a long vector at once.
const chunkBytes = 16 << 10

// Piece is the bytes of the pieces a reduction of elements of elem bytes is cut
// into: the user's function sees whole pieces (and elements), which the
// collectives across procs keep (internal/xcoll).
func Piece(elem int) int { return max(chunkBytes/elem, 1) * elem }

// reduceEager is the largest Reduce whose ranks copy their contributions into the
// episode, so that every rank but the root leaves as soon as it has arrived:
// successive reductions then pipeline, as small broadcasts do (bcastEager), and
// as the C MPIs' shared-memory reductions do (reduceSmall). Measured (same root,
// 4 / 64 / 256 ranks): 8 to 256 bytes took 0.65-0.88 / 6.4-8.1 / 21-54 µs against
// 1.1-1.3 / 19-20 / 65-68 with every rank waiting; at 1 KiB the copies (ranks run
// ahead by up to the ring, each with a fresh copy) cost more than the wait saves.
// Since episodes keep their memory when reused (see own), a Reduce whose ranks'
// contributions fit reduceEagerAll in all goes so too. Against every rank waiting,
// medians of 3 interleaved rounds, µs: 2 ranks' Reduce of 1 KiB 0.956 -> 0.381
// (Open MPI 0.58), of 4 KiB 1.34 -> 0.855, of 8 KiB 1.98 -> 1.49; 4 ranks' of 1 KiB
// 1.79 -> 0.846 (of 4 KiB 1.90 and 2.15, within the rounds' spread); 16 ranks' of
// 1 KiB 10.1 -> 3.80. An episode's memory then holds up to 16 KiB, twice a Bcast's
// copy (bcastEager).
const (
	reduceEager    = 256
	reduceEagerAll = 16 << 10
)

// Op is a reduction's operation on whole elements, as bytes. Fold computes
// inout = in op inout. Fold3, which Sum, Prod, Min and Max have, computes out = a
// op (b op (c op d)) in one pass, the expression three Folds compute (out may be
// d): a long reduction's vectors are then read four at a time instead of copied,
// then folded in a pass each. 4 ranks' Reduce of 256 KiB of doubles spent nearly
// three quarters of its time in the folds, and took 69-78 µs against 56-64 with
// Fold3; their Allreduce 99-120 against 70-86. The small reductions (the slot, an
// episode's slab) fold with Fold alone: there the fused call cost more
// instructions than it saved. Builtin marks Weft's own operations, which cannot
// panic on pieces of one length: the small folds then skip the recover that guards
// a user's function (50 instructions a rank of 4 ranks' Scan of one double).
type Op struct {
	Fold    func(in, inout []byte)
	Fold3   func(a, b, c, d, out []byte)
	Builtin bool
}

// FoldAll sets acc to piece(0) op (piece(1) op (... op piece(n-1))), n >= 1, with
// Fold3 while four pieces are left (the first reads the last piece where it lies,
// and acc may be that piece) if they are at least fusedMin bytes long, else Fold;
// no other piece may be acc.
func (o Op) FoldAll(piece func(r int) []byte, n int, acc []byte) {
	r := n - 1
	if o.Fold3 != nil && r >= 3 && len(acc) >= fusedMin {
		o.Fold3(piece(r-3), piece(r-2), piece(r-1), piece(r), acc)
		r -= 3
		for ; r >= 3; r -= 3 {
			o.Fold3(piece(r-3), piece(r-2), piece(r-1), acc, acc)
		}
	} else {
		move(acc, piece(r))
	}
	for r--; r >= 0; r-- {
		o.Fold(piece(r), acc)
	}
}

// fusedMin is the shortest piece that FoldAll folds with Fold3: below it the
// fused call costs more than the folds it saves (cachegrind, 4 ranks' Allreduce
// on one processor, instructions a call with Fold3 and without: of one double
// 6,382 and 6,259, of 8 6,490 and 6,483, of 32 7,045 and 7,092, of 128 8,976
// and 9,447).
const fusedMin = 64

// scratch holds a piece of the root's contribution while an in-place reduction
// overwrites it.
var scratch = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

// Reduce combines the ranks' send buffers element by element into the root's recv:
// recv = send(0) op (send(1) op (... op send(n-1))), op's functions computing on
// whole elements of elem bytes. They may be called several times on pieces of the
// vectors, by any rank, and apply op in rank order, so that an associative but
// non-commutative op gets MPI's result. At the root, send and recv
// may be the same slice (in place: recv holds the root's contribution); recv must be
// at least as long as send there, and is ignored elsewhere. Send buffers are only
// read. Every rank returns once its send buffer is no longer needed (up to
// reduceEager bytes, or reduceEagerAll in all, every rank but the root at once,
// having copied it); every rank whose length differs from the root's, and every
// other rank still in the call, gets an ErrCount error.
func (c *Comm) Reduce(rank int, send, recv []byte, elem int, op Op, root int) error {
	if rank != root {
		recv = nil
	}
	return c.reduce(reduce, rank, root, send, recv, elem, op)
}

// Allreduce is Reduce with the result in every rank's recv. Each rank's send and
// recv may be the same slice (in place). Lengths are compared with rank 0's (in a
// small one on ranks that spin, with the first rank to arrive's: the fault names
// two ranks whose lengths differ).
func (c *Comm) Allreduce(rank int, send, recv []byte, elem int, op Op) error {
	return c.reduce(allreduce, rank, 0, send, recv, elem, op)
}

func (c *Comm) reduce(k kind, rank, root int, send, recv []byte, elem int, op Op) error {
	if c.n == 1 {
		if unsafe.SliceData(send) != unsafe.SliceData(recv) {
			copy(recv, send)
		}
		return nil
	}
	if (k == reduce || c.spin > 0) && c.slotFits(k, len(send), elem) { // see slotEveryone
		if ok, err := c.reduceInSlot(k, rank, root, send, recv, elem, op, nil); ok {
			return err
		}
	}
	width := -1
	if k == reduce && (len(send) <= reduceEager || c.n*len(send) <= reduceEagerAll) || k == allreduce && c.spin > 0 && c.n*len(send) <= nearBytes {
		width = len(send)
	}
	e := c.join(rank, k, root, elem, op, width)
	if e == nil {
		return ErrAborted
	}
	if v, held := c.slotHeld(e.seq); held { // the others went through the slot
		return c.slotAside(e, k, rank, root, len(send), elem, v)
	}
	c.check(e, rank, k, root, elem)
	if e.small && k == allreduce {
		return c.allreduceSmall(e, rank, send, recv)
	}
	if e.small {
		return c.reduceSmall(e, rank, root, send, recv)
	}
	// Publish this rank's buffers: the others read them only between this rank's
	// arrival and the end of the episode, and this rank has left every earlier one
	// (a small Reduce it left is read from the episode's copy, and from its root's
	// own buffers).
	st := &c.ranks[rank]
	st.src, st.dst, st.len = unsafe.Pointer(unsafe.SliceData(send)), unsafe.Pointer(unsafe.SliceData(recv)), len(send)
	if e.arrived.Add(1) == int64(c.n) {
		// The last to arrive checks the lengths, cuts the work, and starts it; with one
		// piece it does it all before it wakes anybody, so each rank wakes once.
		c.plan(e)
		if e.fault.Load() == nil {
			if e.chunks > 1 {
				e.start.release()
			}
			c.work(e)
		}
		ok := c.wait(&e.done)
		e.start.release()
		return c.outcome(e, rank, ok)
	}
	ok := c.wait(&e.start)
	if ok && !e.done.isOpen() && e.fault.Load() == nil {
		c.work(e)
		ok = c.wait(&e.done)
	}
	return c.outcome(e, rank, ok)
}

// plan compares every rank's length with the reference rank's (the root, or rank 0
// for Allreduce) and cuts the vectors into pieces.
func (c *Comm) plan(e *episode) {
	if !e.enter() {
		return
	}
	defer e.exit()
	ref, who := int(e.root), "the root"
	if e.kind == allreduce {
		ref, who = 0, "rank 0"
	}
	want := c.ranks[ref].len
	for r := range c.ranks {
		if got := c.ranks[r].len; got != want {
			e.fail(&errs.Error{Class: errs.Count, Op: e.kind.String(), Peer: r, Tag: errs.None,
				Detail: lengths(who, want, r, got, int(e.elem))})
			return
		}
	}
	e.target = int(e.root)
	if e.kind == allreduce {
		e.target = c.n - 1
	}
	e.chunk = Piece(int(e.elem))
	e.chunks = (want + e.chunk - 1) / e.chunk
	e.left.Store(int64(e.chunks))
	if e.chunks == 0 {
		e.done.release()
	}
}

// work claims and combines pieces until none is left.
func (c *Comm) work(e *episode) {
	for {
		if !e.enter() {
			return
		}
		i := int(e.next.Add(1) - 1)
		if i >= e.chunks {
			e.exit()
			return
		}
		err := c.combine(e, i)
		e.exit()
		if err != nil {
			e.fail(err)
			return
		}
		if e.left.Add(-1) == 0 {
			e.done.release()
		}
	}
}

// combine computes piece i of the result into the target's receive buffer, folding
// from the last rank down (acc = send(r) op acc), and for Allreduce copies it into
// every other rank's receive buffer.
func (c *Comm) combine(e *episode, i int) (err *errs.Error) {
	defer func() {
		if p := recover(); p != nil {
			err = opPanic(e.kind.String(), p)
		}
	}()
	n, t := c.n, &c.ranks[e.target]
	lo := i * e.chunk
	hi := min(lo+e.chunk, t.len)
	src := func(r int) []byte { return bytesAt(c.ranks[r].src, lo, hi) }
	acc := bytesAt(t.dst, lo, hi)
	if t.src == t.dst && e.target != n-1 { // in place: keep the target's own contribution aside
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		saved := (*bp)[:hi-lo]
		copy(saved, acc)
		src = func(r int) []byte {
			if r == e.target {
				return saved
			}
			return bytesAt(c.ranks[r].src, lo, hi)
		}
	}
	e.op.FoldAll(src, n, acc)
	if e.kind == allreduce {
		for r := range n {
			if r != e.target {
				copy(bytesAt(c.ranks[r].dst, lo, hi), acc)
			}
		}
	}
	return nil
}

// bytesAt is bytes lo to hi of the buffer that starts at p.
func bytesAt(p unsafe.Pointer, lo, hi int) []byte { return unsafe.Slice((*byte)(p), hi)[lo:hi] }

// reduceSmall is the part of a rank in a Reduce of up to reduceEager bytes (or
// reduceEagerAll in all). Every rank but the root copies its contribution into the
// episode, arrives and returns; the root waits until all have arrived and folds the
// copies into its recv, from the last rank down, itself included. No rank touches
// another's buffers, so nobody waits for anybody to leave.
func (c *Comm) reduceSmall(e *episode, rank, root int, send, recv []byte) error {
	if rank != root {
		c.leaveSlab(e, rank, send)
		return c.outcome(e, rank, true)
	}
	ok := c.awaitAll(e)
	if ok && e.fault.Load() == nil {
		if err := c.foldSmall(e, root, send, recv); err != nil {
			e.fail(err)
		}
	}
	return c.outcome(e, rank, ok)
}

// allreduceSmall is the part of a rank in an Allreduce whose slab fits the line of
// the arrivals (see slabOf), on a communicator whose ranks have a processor each
// (spin): every rank copies its contribution into its piece, arrives, waits for
// every other, and folds the pieces into its recv in rank order, as a small
// Reduce's root does. Every rank computes the same fold, from the one line that
// the arrivals moved, and nobody touches another's buffers or waits for another to
// leave: 2 ranks' Allreduce of one double took 386 against 504 ns (the last to
// arrive read both send buffers, wrote both receive buffers and opened a gate for
// the other, each a line to move between the cores). With more ranks than
// processors the n folds cost more than the lines save (4 ranks on 2: 656
// against 568 ns).
func (c *Comm) allreduceSmall(e *episode, rank int, send, recv []byte) error {
	if e.fault.Load() != nil { // a check failed: every gate is open
		return c.outcome(e, rank, true)
	}
	c.leaveSlab(e, rank, send)
	if ok := c.wait(&e.start); !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	if err := c.foldSmall(e, rank, send, recv); err != nil {
		e.fail(err)
	}
	return c.outcome(e, rank, true)
}

// leaveSlab puts a rank's piece into the slab of e and arrives: the last to arrive
// opens start.
func (c *Comm) leaveSlab(e *episode, rank int, piece []byte) {
	e.putSlab(rank, piece)
	c.arrive(e)
}

// putSlab copies a rank's piece into the slab of e, or records its length when it
// is not the maker's.
func (e *episode) putSlab(rank int, piece []byte) {
	if len(piece) == e.width {
		copy(e.slab[rank*e.width:], piece)
	} else {
		e.odd.CompareAndSwap(nil, &[2]int{rank, len(piece)})
	}
}

// arrive counts the calling rank in e: the last to arrive opens start.
func (c *Comm) arrive(e *episode) {
	if e.arrived.Add(1) == int64(c.n) {
		e.start.release()
	}
}

// awaitAll counts the calling rank in e and waits until every rank has arrived;
// it returns false if the job ended first.
func (c *Comm) awaitAll(e *episode) bool {
	if e.arrived.Add(1) == int64(c.n) {
		return true
	}
	return c.wait(&e.start)
}

// misfit returns a rank whose piece in the slab of e is not want bytes long, and
// the length of its piece, or -1: the maker, if its width is not want, else the
// rank recorded as odd.
func (e *episode) misfit(want int) (rank, got int) {
	if e.width != want {
		return e.maker, e.width
	}
	if odd := e.odd.Load(); odd != nil {
		return odd[0], odd[1]
	}
	return -1, 0
}

// foldSmall computes, once every rank arrived, a small Reduce's result at its root
// (rank), or a small Allreduce's at any rank, from every rank's piece in the slab.
func (c *Comm) foldSmall(e *episode, rank int, send, recv []byte) (err *errs.Error) {
	if e.kind == allreduce {
		// Every rank names the same two, and rather a rank that differs from rank 0.
		switch odd := e.odd.Load(); {
		case odd != nil && odd[0] == 0:
			return mismatchOf(e, 0, odd[1], e.maker, e.width)
		case odd != nil:
			return mismatchOf(e, e.maker, e.width, odd[0], odd[1])
		}
	} else if bad, got := e.misfit(len(send)); bad >= 0 {
		return mismatchOf(e, rank, len(send), bad, got)
	}
	w := e.width
	if e.kind == reduce {
		copy(e.slab[rank*w:], send) // the root's piece of the slab is free, and recv may be send
	}
	ps := slab(e.slab, c.n, w)
	return fold(e.kind, &ps, c.n, recv, e.op)
}

// pieces is where a small reduction's n contributions lie, rank after rank:
// piece j is the width bytes at j*stride+off of lo while j < first, of hi (from
// piece first on) after. A value with a method rather than a function, so that
// fold's look-ups inline: a closure's call cost 40 instructions a piece of 4 ranks'
// Scan of one double, a tenth of the call.
type pieces struct {
	lo, hi                    []byte
	first, stride, off, width int
}

// slab is the layout of n pieces of w bytes, one after another in b.
func slab(b []byte, n, w int) pieces { return pieces{lo: b, first: n, stride: w, width: w} }

// at is piece j.
func (p *pieces) at(j int) []byte {
	b := p.lo
	if j >= p.first {
		b, j = p.hi, j-p.first
	}
	at := j*p.stride + p.off
	return b[at : at+p.width]
}

// fold folds pieces 0 to n-1 of ps into recv in rank order: recv gets piece 0 op
// (piece 1 op (... op piece n-1)), as MPI requires of an operation that does not
// commute. A panic of a user's op is the fault. It keeps a loop of its own rather
// than Op.FoldAll, whose call cost the small folds' it serves (the slot, an
// episode's slab) 80 instructions a call of 4 ranks' Scan of one double, of 4,926,
// and whose fused folds they do not use.
func fold(k kind, ps *pieces, n int, recv []byte, op Op) *errs.Error {
	if !op.Builtin {
		return foldGuarded(k, ps, n, recv, op.Fold)
	}
	foldPieces(ps, n, recv, op.Fold)
	return nil
}

// foldGuarded is fold of a user's function, whose panic it returns as the fault.
func foldGuarded(k kind, ps *pieces, n int, recv []byte, fn func(in, inout []byte)) (err *errs.Error) {
	defer func() {
		if p := recover(); p != nil {
			err = opPanic(k.String(), p)
		}
	}()
	foldPieces(ps, n, recv, fn)
	return nil
}

// foldPieces is fold's loop.
func foldPieces(ps *pieces, n int, recv []byte, fn func(in, inout []byte)) {
	acc := recv[:ps.width]
	copy(acc, ps.at(n-1))
	for r := n - 2; r >= 0; r-- {
		fn(ps.at(r), acc)
	}
}

// mismatchOf is the fault of a small reduction whose rank bad has a piece of got
// bytes where rank has one of want (the root, for a Reduce).
func mismatchOf(e *episode, rank, want, bad, got int) *errs.Error {
	who := fmt.Sprintf("rank %d", rank)
	if e.kind == reduce {
		who = "the root"
	}
	return &errs.Error{Class: errs.Count, Op: e.kind.String(), Peer: bad, Tag: errs.None,
		Detail: lengths(who, want, bad, got, int(e.elem))}
}

// opPanic is the fault of a reduction whose function panicked.
func opPanic(op string, p any) *errs.Error {
	return &errs.Error{Class: errs.Op, Op: op, Peer: errs.None, Tag: errs.None,
		Detail: fmt.Sprint("the reduction function panicked: ", p)}
}
