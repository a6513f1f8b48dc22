package coll

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
)

// The data-movement collectives and the prefix reductions: Gather, Scatter,
// Allgather, Alltoall (and their v-variants), Scan, Exscan, ReduceScatterBlock and
// ReduceScatter.
//
// They share one protocol on the episode machinery. Each rank joins its episode,
// publishes its buffers (and, for the v-variants, its counts and displacements) in
// the episode's exchange, and arrives; the last to arrive checks that the ranks
// agree (lengths, counts) and opens the start gate. Then every rank does its own
// part, copying straight between the ranks' buffers: a rank pushes its block into
// the root's buffer (Gather) or pulls its blocks from the others' buffers (the
// others), and a reducing rank folds the others' contributions into its own
// receive buffer in rank order. Every rank leaves once all have finished, since
// the others may still read its buffers until then; in a small exchange a rank
// publishes a copy of its send buffer instead, and leaves once its own part is done
// (see exchangeEager).
//
// In place is the caller's business: a rank passes a send buffer that is the block
// of its own receive buffer (or the reverse) where the data already lies, and the
// copy of a block onto itself is skipped; where the others read a buffer that its
// owner overwrites (Alltoall, the reductions), the caller passes a copy.
//
// Counts and displacements are in bytes here; the caller has checked them (no
// negative count, every block inside its buffer, no overlapping receive blocks),
// and they are made for the call and never changed: the ranks of a small exchange
// read them after their owner has left.

// The kinds of this file, far from the others' so that new kinds there never collide.
const (
	gather kind = 64 + iota
	gatherv
	scatter
	scatterv
	allgather
	allgatherv
	alltoall
	alltoallv
	scan
	exscan
	reduceScatterBlock
	reduceScatter
)

var moreNames = map[kind]string{
	gather: "Gather", gatherv: "Gatherv", scatter: "Scatter", scatterv: "Scatterv",
	allgather: "Allgather", allgatherv: "Allgatherv", alltoall: "Alltoall", alltoallv: "Alltoallv",
	scan: "Scan", exscan: "Exscan", reduceScatterBlock: "ReduceScatterBlock", reduceScatter: "ReduceScatter",
}

func (k kind) more() string {
	if s, ok := moreNames[k]; ok {
		return s
	}
	return "collective"
}

// exchange is what the ranks of one episode publish: one share each, written by its
// rank before it arrives and read by the others after the start gate opens.
//
// A small exchange's is kept when its episode is reused, with the copies of the
// ranks' send buffers (each rank reuses its own): it then costs no allocation.
type exchange struct {
	shares   []share
	finished atomic.Int64 // ranks done with their share
	small    bool         // each rank publishes a copy of its send buffer
	column   atomic.Int64 // a Scan or Exscan that is not small: the next column to claim (see scanColumns)
}

// share is one rank's part in an exchange and, in a small one, its copy of its send
// buffer: lines of their own, which the rank writes while the others write theirs
// (packed, a Part of 160 bytes shared a line with the next rank's, and the copies'
// headers shared one: 2 ranks' Gatherv of 8 bytes 0.282 -> 0.230 µs).
type share struct {
	Part
	copy []byte
	ints []int // a small exchange's: its copy of the Part's counts and displacements (keep)
	_    [256 - 160 - 48]byte
}

// keep points the Part's counts and displacements at the share's own copy of them:
// in a small exchange the others read them after the rank may have returned, when
// its caller's are another call's (the mpi package keeps one set a rank).
func (sh *share) keep() {
	ps := [...]*[]int{&sh.SendCounts, &sh.SendDispls, &sh.RecvCounts, &sh.RecvDispls}
	n := 0
	for _, s := range ps {
		n += len(*s)
	}
	if cap(sh.ints) < n {
		sh.ints = make([]int, n)
	}
	rest := sh.ints[:n]
	for _, s := range ps {
		if *s != nil {
			k := copy(rest, *s)
			*s, rest = rest[:k:k], rest[k:]
		}
	}
}

// reset readies a small exchange for another episode, whose maker calls it before
// anybody else sees it (nobody touches the old one: see Comm.reuse).
func (x *exchange) reset() {
	for i := range x.shares {
		x.shares[i].Part = Part{} // no user buffer stays reachable from here
	}
	x.finished.Store(0)
	x.column.Store(0)
}

// Part is one rank's buffers in a collective of this file. Counts and displacements
// (bytes) describe the blocks of a buffer: block j is buf[Displs[j]:Displs[j]+Counts[j]].
// With nil Counts, the blocks are Block bytes each, one after the other.
type Part struct {
	Send, Recv []byte

	SendBlock, RecvBlock   int   // uniform blocks (when the counts are nil)
	SendCounts, SendDispls []int // v-variants
	RecvCounts, RecvDispls []int
}

func (p *Part) sendBlock(j int) []byte {
	if p.SendCounts == nil {
		return p.Send[j*p.SendBlock : (j+1)*p.SendBlock]
	}
	return p.Send[p.SendDispls[j] : p.SendDispls[j]+p.SendCounts[j]]
}

func (p *Part) recvBlock(j int) []byte {
	if p.RecvCounts == nil {
		return p.Recv[j*p.RecvBlock : (j+1)*p.RecvBlock]
	}
	return p.Recv[p.RecvDispls[j] : p.RecvDispls[j]+p.RecvCounts[j]]
}

func (p *Part) sendCount(j int) int {
	if p.SendCounts == nil {
		return p.SendBlock
	}
	return p.SendCounts[j]
}

func (p *Part) recvCount(j int) int {
	if p.RecvCounts == nil {
		return p.RecvBlock
	}
	return p.RecvCounts[j]
}

// Exchange runs the collective of kind k among those that take a Part (every one
// of this file): the mpi package's entry to them, but for the blocking Scatter(v),
// whose root it calls as Scatter(v) and the others through ScatterRecv, and a
// Gather's ranks other than the root (GatherSend). A method of a concrete type, so
// that the caller's Part stays on its stack (called through an interface, it
// escaped to the heap: 4 allocations a call).
func (c *Comm) Exchange(k Kind, rank, root, elem int, op Op, p *Part) error {
	switch k {
	case scatter:
		return c.Scatter(rank, p, elem, root)
	case scatterv:
		return c.Scatterv(rank, p, elem, root)
	}
	return c.exchange(k, rank, root, elem, op, p)
}

// Gather: every rank's Send goes to block rank of the root's receive buffer (the
// root's RecvBlock or RecvCounts/RecvDispls); Recv is ignored elsewhere. A rank
// sending more than the root's block for it gets ErrTruncate, fewer ErrCount.
func (c *Comm) Gather(rank int, p *Part, elem, root int) error {
	return c.exchange(gather, rank, root, elem, Op{}, p)
}

// GatherSend is a Gather's part of a rank other than the root, which is its send
// buffer alone: the mpi package calls it with no Part to fill, and the slot (see
// reduceInSlot) needs none (4 ranks' Gather of 8 bytes: 4,067 -> 3,662 instructions
// a call, of which the benchmark's own are 943; 0.285 -> 0.270 µs, medians of 8
// interleaved rounds).
func (c *Comm) GatherSend(rank int, send []byte, elem, root int) error {
	if c.slotFits(gather, len(send), elem) { // rank != root: more than one rank
		if ok, err := c.reduceInSlot(gather, rank, root, send, nil, elem, Op{}, nil); ok {
			return err
		}
	}
	p := Part{Send: send}
	return c.exchangeIn(gather, rank, root, elem, Op{}, &p)
}

// Gatherv is Gather with the root's RecvCounts and RecvDispls.
func (c *Comm) Gatherv(rank int, p *Part, elem, root int) error {
	return c.exchange(gatherv, rank, root, elem, Op{}, p)
}

// Scatter: block j of the root's Send goes to the start of rank j's Recv, which
// must be at least as long (ErrTruncate otherwise). Up to litMax of Send, the
// root leaves a copy in the ring slot and the others take their blocks from there
// (lit.go), as in a small Bcast.
func (c *Comm) Scatter(rank int, p *Part, elem, root int) error {
	switch {
	case c.n == 1:
	case rank == root:
		if done, err := c.scatterRoot(scatter, rank, p, elem, p.SendBlock); done {
			return err
		}
	default:
		return c.ScatterRecv(scatter, rank, p.Recv, elem, root)
	}
	return c.exchange(scatter, rank, root, elem, Op{}, p)
}

// ScatterRecv is a Scatter's or Scatterv's (k) part of a rank other than the root,
// which is its receive buffer alone: the mpi package calls it with no Part to fill,
// and the root's part through Scatter or Scatterv, not through Exchange's dispatch
// (4 ranks' Scatter of 8 bytes: 2,582 -> 2,169 instructions a call, of which the
// benchmark's own are 824; 0.147 -> 0.114 µs, medians of 8 interleaved rounds).
func (c *Comm) ScatterRecv(k Kind, rank int, recv []byte, elem, root int) error {
	if c.litCopy(rank, k, recv, elem, root) {
		return nil
	}
	p := Part{Recv: recv}
	return c.exchangeIn(k, rank, root, elem, Op{}, &p) // a Scatter never goes through the slot
}

// Scatterv is Scatter with the root's SendCounts and SendDispls. Blocks that are a
// Scatter's (equal, one after the other) go through the ring slot as a Scatter's do.
func (c *Comm) Scatterv(rank int, p *Part, elem, root int) error {
	switch {
	case c.n == 1:
	case rank == root:
		if done, err := c.scatterRoot(scatterv, rank, p, elem, evenBlocks(p)); done {
			return err
		}
	default:
		return c.ScatterRecv(scatterv, rank, p.Recv, elem, root)
	}
	return c.exchange(scatterv, rank, root, elem, Op{}, p)
}

// scatterRoot takes the root of a small Scatter(v) through the ring slot (lit.go)
// if it can, and reports whether it did, with the outcome. block is the length of
// its blocks, or -1 if they are not a Scatter's.
func (c *Comm) scatterRoot(k kind, rank int, p *Part, elem, block int) (bool, error) {
	if block < 0 || c.n*block > litMax {
		return false, nil
	}
	left, err := c.litRoot(rank, k, p.Send[:c.n*block], elem, block)
	if err != nil || !left {
		return left, err
	}
	if err := receiveBlock(k, rank, rank, elem, p.Recv, p.sendBlock(rank)); err != nil {
		return true, err
	}
	return true, nil
}

// evenBlocks returns the length of a Scatterv root's blocks if they are equal and
// lie one after the other from the start of its buffer, else -1.
func evenBlocks(p *Part) int {
	if len(p.SendCounts) == 0 {
		return -1
	}
	m := p.SendCounts[0]
	for j, n := range p.SendCounts {
		if n != m || p.SendDispls[j] != j*m {
			return -1
		}
	}
	return m
}

// Allgather: every rank's Send goes to block rank of every rank's Recv.
func (c *Comm) Allgather(rank int, p *Part, elem int) error {
	return c.exchange(allgather, rank, 0, elem, Op{}, p)
}

// Allgatherv is Allgather with every rank's RecvCounts and RecvDispls.
func (c *Comm) Allgatherv(rank int, p *Part, elem int) error {
	return c.exchange(allgatherv, rank, 0, elem, Op{}, p)
}

// Alltoall: block j of rank i's Send goes to block i of rank j's Recv.
func (c *Comm) Alltoall(rank int, p *Part, elem int) error {
	return c.exchange(alltoall, rank, 0, elem, Op{}, p)
}

// Alltoallv is Alltoall with every rank's send and receive counts and displacements.
func (c *Comm) Alltoallv(rank int, p *Part, elem int) error {
	return c.exchange(alltoallv, rank, 0, elem, Op{}, p)
}

// Scan: the first len(Send) bytes of rank r's Recv get send(0) op (send(1) op (...
// op send(r))). Every rank's Send must have rank 0's length.
func (c *Comm) Scan(rank int, p *Part, elem int, op Op) error {
	return c.exchange(scan, rank, 0, elem, op, p)
}

// Exscan is Scan without the rank's own contribution; rank 0's Recv is not written.
func (c *Comm) Exscan(rank int, p *Part, elem int, op Op) error {
	return c.exchange(exscan, rank, 0, elem, op, p)
}

// ReduceScatterBlock: rank r's Recv block 0 gets the reduction, in rank order, of
// block r of every rank's Send (SendBlock bytes each, the same on every rank).
func (c *Comm) ReduceScatterBlock(rank int, p *Part, elem int, op Op) error {
	return c.exchange(reduceScatterBlock, rank, 0, elem, op, p)
}

// ReduceScatter is ReduceScatterBlock with blocks of their own sizes: rank r's Recv
// gets the reduction of block r of every rank's Send (SendCounts, SendDispls), which
// every rank must give alike.
func (c *Comm) ReduceScatter(rank int, p *Part, elem int, op Op) error {
	return c.exchange(reduceScatter, rank, 0, elem, op, p)
}

// exchangeEager and exchangeEagerRanks bound a small exchange: one of at most that
// many ranks whose maker's buffers hold at most that many bytes. In a small exchange
// every rank publishes a copy of what the others read of it (its send buffer; Gather,
// Scatter(v), Scan and Exscan into the episode's own memory), so nobody waits for the
// others to finish: a rank that needs nothing from the others
// (a Gather's non-roots, a Scatter's root, rank 0 of Scan and Exscan) leaves as
// soon as it has published, and the others once they have done their part.
// Successive calls then pipeline through the ring, as small Bcasts and Reduces do,
// instead of each costing two waits of every rank.
const (
	exchangeEager      = 1 << 10
	exchangeEagerRanks = 16 // at most 63: a small Scan's ranks are bits of an int64 (scanSmall)
)

// exchange runs one collective of this file: publish, check, work, leave together
// (or, when small, as soon as nobody needs this rank's buffers). It and the small
// collectives' parts take the caller's Part by pointer and never change it: copied
// into each call, its 160 bytes were a tenth of a small Scan or Gather on one
// processor (4 ranks, 8 bytes, GOMAXPROCS=1: Scan 0.369 -> 0.33 µs, Gather
// 0.240 -> 0.214).
func (c *Comm) exchange(k kind, rank, root, elem int, op Op, p *Part) error {
	if c.n > 1 {
		if recv, ok := c.slotRecv(k, rank, root, p); ok && c.slotFits(k, c.pieceWidth(k, p.Send, p), elem) {
			if ok, err := c.reduceInSlot(k, rank, root, p.Send, recv, elem, op, p); ok {
				return err
			}
		}
	}
	return c.exchangeIn(k, rank, root, elem, op, p)
}

// exchangeIn is exchange through an episode, for a collective that did not go
// through its slot.
func (c *Comm) exchangeIn(k kind, rank, root, elem int, op Op, p *Part) error {
	if c.n == 1 {
		x := &exchange{shares: []share{{Part: *p}}}
		if f := c.agree(k, x, root, elem); f != nil {
			f.Rank = rank
			return f
		}
		if f := c.part(k, x, rank, root, op); f != nil {
			f.Rank = rank
			return f
		}
		return nil
	}
	width := -1 // a small exchange: see join
	if c.n <= exchangeEagerRanks && max(len(p.Send), len(p.Recv)) <= exchangeEager {
		width = 0
		switch k {
		case gather, scan, exscan, allgather, alltoall:
			width = len(p.Send) // the slab's pieces: see gatherSmall, scanSmall and allSmall
		}
	}
	e := c.take(rank, k, root, elem, op, width)
	if e == nil {
		return ErrAborted
	}
	if slotted(k) {
		if v, held := c.slotHeld(e.seq); held { // the others went through the slot
			c.count(rank, e.seq)
			return c.slotAside(e, k, rank, root, len(p.Send), elem, v)
		}
	}
	if c.unlit(e, rank, k, root, elem, p.Recv) { // a Scatter's root left its copy in the slot
		return nil
	}
	c.count(rank, e.seq)
	if !c.check(e, rank, k, root, elem) {
		return c.outcome(e, rank, true)
	}
	if e.small { // through the episode itself, where the kind allows
		switch k {
		case gather:
			return c.gatherSmall(e, rank, root, p)
		case scatter, scatterv:
			return c.scatterSmall(e, k, rank, root, elem, p)
		case scan, exscan:
			return c.scanSmall(e, k, rank, elem, p)
		case allgather, alltoall:
			return c.allSmall(e, k, rank, elem, p)
		}
	}
	x := c.exchangeOf(e, e.small)
	if e.small && k == gatherv {
		return c.gathervSmall(e, x, rank, root, p)
	}
	if e.small {
		return c.exchangeSmall(e, x, k, rank, root, elem, p)
	}
	x.shares[rank].Part = *p
	n := int64(c.n)
	ok := true
	if e.arrived.Add(1) == n {
		if e.fault.Load() == nil {
			if f := c.agree(k, x, root, elem); f != nil {
				e.fail(f)
			}
		}
		e.start.release()
	} else {
		ok = c.wait(&e.start)
	}
	switch {
	case !ok || e.fault.Load() != nil:
	case k == scan || k == exscan:
		c.scanColumns(e, x, k)
	case e.enter():
		f := c.part(k, x, rank, root, e.op)
		e.exit()
		if f != nil {
			e.fail(f)
		}
	}
	if x.finished.Add(1) == n {
		e.done.release()
	} else if ok {
		ok = c.wait(&e.done)
	}
	return c.outcome(e, rank, ok)
}

// exchangeOf returns e's exchange, making it if no rank has (small: see exchange).
func (c *Comm) exchangeOf(e *episode, small bool) *exchange {
	if x := e.x.Load(); x != nil {
		return x
	}
	fresh := &exchange{shares: make([]share, c.n), small: small}
	if e.x.CompareAndSwap(nil, fresh) {
		return fresh
	}
	return e.x.Load()
}

// slotRecv returns the receive buffer with which a Scan, Exscan or Gather (k) of
// ranks whose contributions are short enough goes through the slot (reduceInSlot),
// and whether it does: a Gather's root's n blocks, when it has room for them. So
// do an Allgather, Alltoall and ReduceScatterBlock on ranks that spin, as an
// Allreduce does (see slotEveryone), with room for their blocks.
func (c *Comm) slotRecv(k kind, rank, root int, p *Part) ([]byte, bool) {
	var want int
	switch {
	case k == scan, k == exscan:
		return p.Recv, true
	case (k == gather || k == gatherv) && rank != root:
		return nil, true
	case k == gatherv: // the root takes its blocks by its counts (gathervOut)
		return p.Recv, true
	case k == gather:
		want = c.n * p.RecvBlock
	case k == allgatherv && c.spin > 0: // its blocks by its counts (allgathervOut)
		return p.Recv, true
	case k == allgather && c.spin > 0:
		want = c.n * len(p.Send)
	case k == alltoall && c.spin > 0:
		want = len(p.Send)
	case k == reduceScatterBlock && c.spin > 0 && len(p.Send) == c.n*p.SendBlock:
		want = p.SendBlock
	default:
		return nil, false
	}
	if len(p.Recv) < want {
		return nil, false
	}
	return p.Recv[:want], true
}

// exchangeSmall is a rank's part in a small Allgatherv, Alltoallv, ReduceScatter
// or ReduceScatterBlock (the others move their data through the episode itself:
// gatherSmall, gathervSmall, scatterSmall, scanSmall, allSmall). Every rank
// publishes its part and a copy of its send buffer, and waits for every arrival;
// the last to arrive checks that the parts agree, as in a large exchange. Nobody
// waits for the others to finish: they read the copies, not its buffers.
func (c *Comm) exchangeSmall(e *episode, x *exchange, k kind, rank, root, elem int, p *Part) error {
	if e.fault.Load() != nil { // a check failed (another collective, root or element size): every gate is open
		return c.outcome(e, rank, true)
	}
	sh := &x.shares[rank]
	sh.copy = append(sh.copy[:0], p.Send...)
	sh.Part = *p
	sh.Send = sh.copy
	sh.keep()
	last := e.arrived.Add(1) == int64(c.n)
	if last {
		if f := c.agree(k, x, root, elem); f != nil {
			e.fail(f)
		}
		e.start.release()
	}
	ok := true
	if !last {
		ok = c.wait(&e.start)
	}
	if !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	if f := c.part(k, x, rank, root, e.op); f != nil {
		e.fail(f)
	}
	return c.outcome(e, rank, true)
}

// gatherSmall is a rank's part in a small Gather, which moves its blocks as a small
// Reduce moves its contributions (reduceSmall): every rank but the root copies its
// block into the episode's slab, arrives and returns; the root waits for all, checks
// their lengths against its blocks and copies theirs out. Without the exchange's
// parts (a line and a half of buffers each, written by every rank and read by the
// root) it costs about what a small Reduce does.
func (c *Comm) gatherSmall(e *episode, rank, root int, p *Part) error {
	if rank != root {
		c.leaveSlab(e, rank, p.Send)
		return c.outcome(e, rank, true)
	}
	if ok := c.awaitAll(e); !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	if bad, got := e.misfit(p.RecvBlock); bad >= 0 {
		e.fail(mismatch(gather, int(e.elem), bad, root, got, p.RecvBlock))
		return c.outcome(e, rank, true)
	}
	w := e.width
	for j := range c.n {
		if j != root {
			move(p.recvBlock(j), e.slab[j*w:(j+1)*w])
		}
	}
	move(p.recvBlock(root), p.Send)
	return c.outcome(e, rank, true)
}

// allSmall is a rank's part in a small Allgather or Alltoall: every rank copies
// its send buffer into its piece of the slab, arrives, and once every rank has,
// copies its blocks out of the others' pieces (an Allgather's rank each whole
// piece, an Alltoall's rank its block of each). A piece of another length than
// the rank's own, or a rank recorded as odd, fails the episode: the ranks' blocks
// must all be rank 0's, so every rank learns of it.
func (c *Comm) allSmall(e *episode, k kind, rank, elem int, p *Part) error {
	if e.fault.Load() != nil { // a check failed: every gate is open
		return c.outcome(e, rank, true)
	}
	c.leaveSlab(e, rank, p.Send)
	if ok := c.wait(&e.start); !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	if bad, got := e.misfit(len(p.Send)); bad >= 0 {
		per := max(elem, 1) // an Allgather's piece is a block, an Alltoall's one per rank
		if k == alltoall {
			per *= c.n
		}
		e.fail(&errs.Error{Class: errs.Count, Op: k.String(), Peer: bad, Tag: errs.None,
			Detail: fmt.Sprintf("blocks of %d elements on rank %d but of %d on rank %d", got/per, bad, len(p.Send)/per, rank)})
		return c.outcome(e, rank, true)
	}
	w, b := e.width, p.SendBlock
	for j := range c.n {
		switch {
		case j == rank: // its own block lies in its own buffer (maybe in place)
			if k == allgather {
				move(p.recvBlock(j), p.Send)
			} else {
				move(p.recvBlock(j), p.sendBlock(j))
			}
		case k == allgather:
			move(p.recvBlock(j), e.slab[j*w:(j+1)*w])
		default:
			move(p.recvBlock(j), e.slab[j*w+rank*b:j*w+(rank+1)*b])
		}
	}
	return c.outcome(e, rank, true)
}

// gathervSmall is a rank's part in a small Gatherv: every rank but the root copies
// its send buffer into its copy in the exchange, arrives and returns; the root
// waits for every arrival, checks each copy's length against its count and copies
// the blocks out. The ranks publish their copies alone, not their parts.
func (c *Comm) gathervSmall(e *episode, x *exchange, rank, root int, p *Part) error {
	if e.fault.Load() != nil { // a check failed: every gate is open
		return c.outcome(e, rank, true)
	}
	if rank != root {
		x.shares[rank].copy = append(x.shares[rank].copy[:0], p.Send...)
		c.arrive(e)
		return c.outcome(e, rank, true)
	}
	if ok := c.awaitAll(e); !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	block := func(j int) []byte { // the root's own lies where it is
		if j == root {
			return p.Send
		}
		return x.shares[j].copy
	}
	for j := range c.n {
		if f := mismatch(gatherv, int(e.elem), j, root, len(block(j)), p.recvCount(j)); f != nil {
			e.fail(f)
			return c.outcome(e, rank, true)
		}
	}
	for j := range c.n {
		move(p.recvBlock(j), block(j))
	}
	return c.outcome(e, rank, true)
}

// scatterSmall is a rank's part in a small Scatter or Scatterv, which moves its
// blocks as a small Bcast moves its buffer: the root copies its send buffer into
// the episode, publishes it with the blocks' bounds (its counts and displacements,
// or the block's length) and returns; every other rank waits for it, then copies
// its block out. Nobody but the root publishes anything.
func (c *Comm) scatterSmall(e *episode, k kind, rank, root, elem int, p *Part) error {
	if rank == root {
		own := e.rootCopy(len(p.Send))
		copy(own, p.Send)
		// The counts are copied, into memory the episode keeps: the others read them
		// after the root has returned (a Scatterv of 4 ranks allocated two slices a
		// call: 5,180 -> 4,588 instructions on one processor).
		e.buf, e.width = own, p.SendBlock
		if p.SendCounts == nil { // a Scatter's
			e.counts, e.displs = nil, nil
		} else {
			e.counts, e.displs = append(e.counts[:0], p.SendCounts...), append(e.displs[:0], p.SendDispls...)
		}
		e.start.release()
	} else if ok := c.wait(&e.start); !ok || e.fault.Load() != nil {
		return c.outcome(e, rank, ok)
	}
	from := p // the root copies its own block from its own buffer
	if rank != root {
		from = &Part{Send: e.buf, SendBlock: e.width, SendCounts: e.counts, SendDispls: e.displs}
	}
	if err := receiveBlock(k, rank, root, elem, p.Recv, from.sendBlock(rank)); err != nil {
		return err
	}
	return c.outcome(e, rank, true)
}

// receiveBlock moves a Scatter's block src from the root into the start of recv.
func receiveBlock(k kind, rank, root, elem int, recv, src []byte) *errs.Error {
	if len(src) > len(recv) {
		return scatterShort(k, rank, root, len(src), len(recv), elem)
	}
	move(recv[:len(src)], src)
	return nil
}

// scanSmall is a rank's part in a small Scan or Exscan. Every rank copies its
// contribution into the episode's slab and sets its bit in arrived; rank 0 then
// returns, and rank r folds the pieces it needs once ranks 0 to r-1 have set
// theirs: at once if they have, else when the last rank opens start (a gate per
// rank would cost every episode as many). A rank that finds a length other than
// its own, or one recorded as odd, fails the episode: the odd rank may be one it
// does not need, but then another it needs may have a piece missing, unrecorded.
func (c *Comm) scanSmall(e *episode, k kind, rank, elem int, p *Part) error {
	if e.fault.Load() != nil { // a check failed: every gate is open
		return c.outcome(e, rank, true)
	}
	e.putSlab(rank, p.Send)
	bit := int64(1) << rank
	bits := e.arrived.Or(bit) | bit
	if bits == int64(1)<<c.n-1 {
		e.start.release()
	}
	if rank == 0 {
		if k == scan {
			move(p.Recv[:len(p.Send)], p.Send)
		}
		return c.outcome(e, rank, true)
	}
	if before := bit - 1; bits&before != before {
		if ok := c.wait(&e.start); !ok {
			return c.outcome(e, rank, ok)
		}
	}
	if e.fault.Load() != nil {
		return c.outcome(e, rank, true)
	}
	if bad, got := e.misfit(len(p.Send)); bad >= 0 {
		e.fail(&errs.Error{Class: errs.Count, Op: k.String(), Peer: bad, Tag: errs.None,
			Detail: fmt.Sprintf("rank %d has %d elements, rank %d has %d", bad, got/max(elem, 1), rank, len(p.Send)/max(elem, 1))})
		return c.outcome(e, rank, true)
	}
	w, top := e.width, rank
	if k == exscan {
		top--
	}
	ps := slab(e.slab, top+1, w)
	if f := fold(k, &ps, top+1, p.Recv, e.op); f != nil {
		e.fail(f)
	}
	return c.outcome(e, rank, true)
}

// agree checks, once every rank has published its part, that the ranks' lengths
// and counts fit one another. It reads only the parts, not the buffers.
func (c *Comm) agree(k kind, x *exchange, root, elem int) *errs.Error {
	ps := x.shares
	fault := func(class errs.Class, peer int, format string, args ...any) *errs.Error {
		return &errs.Error{Class: class, Op: k.String(), Peer: peer, Tag: errs.None, Detail: fmt.Sprintf(format, args...)}
	}
	el := func(b int) int { return b / max(elem, 1) }
	mismatch := func(from, to, sent, room int) *errs.Error { return mismatch(k, elem, from, to, sent, room) }
	switch k {
	case gather, gatherv:
		for j := range ps {
			if f := mismatch(j, root, len(ps[j].Send), ps[root].recvCount(j)); f != nil {
				return f
			}
		}
	case scatter, scatterv:
		for j := range ps {
			if sent, room := ps[root].sendCount(j), len(ps[j].Recv); sent > room {
				return fault(errs.Truncate, j, "the root sends %d elements to rank %d, whose receive buffer holds %d", el(sent), j, el(room))
			}
		}
	case allgather, alltoall, reduceScatterBlock:
		for j := range ps {
			if a, b := ps[0].SendBlock, ps[j].SendBlock; a != b {
				return fault(errs.Count, j, "blocks of %d elements on rank 0 but of %d on rank %d", el(a), el(b), j)
			}
		}
	case allgatherv:
		for i := range ps {
			for j := range ps {
				if f := mismatch(j, i, len(ps[j].Send), ps[i].recvCount(j)); f != nil {
					return f
				}
			}
		}
	case alltoallv:
		for i := range ps {
			for j := range ps {
				if f := mismatch(j, i, ps[j].sendCount(i), ps[i].recvCount(j)); f != nil {
					return f
				}
			}
		}
	case scan, exscan:
		for j := range ps {
			if a, b := len(ps[0].Send), len(ps[j].Send); a != b {
				return fault(errs.Count, j, "rank 0 has %d elements, rank %d has %d", el(a), j, el(b))
			}
		}
	case reduceScatter:
		for j := range ps {
			for i := range ps[j].SendCounts {
				if a, b := ps[0].SendCounts[i], ps[j].SendCounts[i]; a != b {
					return fault(errs.Count, j, "block %d has %d elements on rank 0 but %d on rank %d", i, el(a), el(b), j)
				}
			}
		}
	}
	return nil
}

// mismatch compares what rank from sends with the room rank to has for it, in a
// collective of kind k on elements of elem bytes: nil if they are equal.
func mismatch(k kind, elem, from, to, sent, room int) *errs.Error {
	class := errs.Count
	switch {
	case sent == room:
		return nil
	case sent > room:
		class = errs.Truncate
	}
	return &errs.Error{Class: class, Op: k.String(), Peer: from, Tag: errs.None,
		Detail: fmt.Sprintf("rank %d sends %d elements to rank %d, which expects %d", from, sent/max(elem, 1), to, room/max(elem, 1))}
}

// part does the calling rank's share of the copies or of the reduction: a Gather's
// senders push their blocks into the root's buffer, the other data movers pull
// theirs.
func (c *Comm) part(k kind, x *exchange, rank, root int, op Op) (fault *errs.Error) {
	ps, me := x.shares, &x.shares[rank]
	switch k {
	case gather, gatherv:
		move(ps[root].recvBlock(rank), me.Send)
	case scatter, scatterv:
		src := ps[root].sendBlock(rank)
		move(me.Recv[:len(src)], src)
	case allgather, allgatherv:
		for j := range ps {
			move(me.recvBlock(j), ps[j].Send)
		}
	case alltoall, alltoallv:
		for j := range ps {
			move(me.recvBlock(j), ps[j].sendBlock(rank))
		}
	case scan, exscan: // a communicator of one rank (more cut theirs into columns)
		return column(k, ps, 0, len(me.Send), op)
	case reduceScatterBlock, reduceScatter:
		defer func() {
			if p := recover(); p != nil {
				fault = opPanic(k.String(), p)
			}
		}()
		op.FoldAll(func(j int) []byte { return ps[j].sendBlock(rank) }, len(ps), me.Recv[:me.sendCount(rank)])
	}
	return nil
}

// A Scan or Exscan that is not small (see exchangeEager) is cut into columns, one a
// piece of every rank's contribution, which the ranks claim once all have arrived:
// whoever claims a column computes its piece of every rank's result, rank after
// rank (each result is the previous one folded with one contribution: Scan rank
// r's, Exscan rank r-1's), while the piece just written is still in its cache. A
// Scan takes n-1 folds of each piece in all, shared by whichever ranks' processors
// are free, where rank r folding r+1 contributions alone took n(n-1)/2 folds in all,
// and nobody waits for another rank's piece, as along a chain of ranks, where 4 ranks
// on 2 processors took a wake-up a piece. Against the chain, 4 ranks' Scan of 1 MiB
// took 0.63 of the time, an Exscan 0.75; against each rank folding its own prefix,
// 4 ranks' Scan of 4 KiB 0.68, 16 ranks' 0.30, 2 ranks' Scan of 1 MiB 0.34.

// scanColumns claims and computes columns of a Scan or Exscan (k) until none is
// left, or a fault (a panic of the function) ends the episode.
func (c *Comm) scanColumns(e *episode, x *exchange, k kind) {
	size, length := Piece(max(int(e.elem), 1)), len(x.shares[0].Send)
	for {
		at := int(x.column.Add(1)-1) * size
		if at >= length || e.fault.Load() != nil || !e.enter() {
			return
		}
		f := column(k, x.shares, at, min(at+size, length), e.op)
		e.exit()
		if f != nil {
			e.fail(f)
			return
		}
	}
}

// column computes bytes [at, end) of every rank's result of a Scan or Exscan (k),
// in rank order. A panic of op is the fault.
func column(k kind, ps []share, at, end int, op Op) (err *errs.Error) {
	defer func() {
		if p := recover(); p != nil {
			err = opPanic(k.String(), p)
		}
	}()
	lag := 0 // how many ranks a result's last contribution is behind it
	if k == exscan {
		lag = 1
	}
	for r := lag; r < len(ps); r++ {
		acc := ps[r].Recv[at:end]
		copy(acc, ps[r-lag].Send[at:end])
		if r > lag { // the previous result, then the contribution (fold's rank order)
			op.Fold(ps[r-1].Recv[at:end], acc)
		}
	}
	return nil
}

// move copies src to dst, which have the same length, unless they are the same bytes
// (in place).
func move(dst, src []byte) {
	if len(src) == 0 || unsafe.SliceData(dst) == unsafe.SliceData(src) {
		return
	}
	copy(dst, src)
}

// SendBlockOf, RecvBlockOf, SendCountOf and RecvCountOf give internal/xcoll, whose
// leaders copy between the ranks of their proc and the network, the blocks of a
// part as this file's collectives see them.
func (p *Part) SendBlockOf(j int) []byte { return p.sendBlock(j) }

// RecvBlockOf returns block j of Recv; see SendBlockOf.
func (p *Part) RecvBlockOf(j int) []byte { return p.recvBlock(j) }

// SendCountOf returns the length in bytes of block j of Send; see SendBlockOf.
func (p *Part) SendCountOf(j int) int { return p.sendCount(j) }

// RecvCountOf returns the length in bytes of block j of Recv; see SendBlockOf.
func (p *Part) RecvCountOf(j int) int { return p.recvCount(j) }

// Move copies src to dst (the same length) unless they are the same bytes (in
// place), as this file's collectives do.
func Move(dst, src []byte) { move(dst, src) }
