// Package coll is Weft's collectives among the ranks of one communicator that live
// in this process: barrier, broadcast, reduce and allreduce on shared memory, never
// through the point-to-point matching engine.
//
// Every collective call is an episode. Each rank counts the collectives it has
// started on a communicator; rank k's j-th collective meets every other rank's j-th
// (MPI requires all ranks to call collectives on a communicator in the same order)
// in the episode kept in slot j mod ringSize of the communicator's ring. The first
// rank to arrive makes the episode (a small Bcast's or Scatter's root that comes
// first leaves a copy in the slot instead: lit.go); a slot is reused only once every
// rank has joined the episode a lap before, so a rank that runs ahead waits, which
// a program that is correct when every collective synchronises never notices.
//
// Waiting spins briefly when the communicator has no more ranks than processors,
// else yields the processor once (by then the ranks waited for have often arrived),
// then parks the goroutine on a channel that is closed once per episode and phase
// (a plain receive: a select that also watched a job-wide abort channel would make
// every waiter of the job queue on, and contend for, that one channel's lock).
// Job.Abort instead releases every episode in flight in the job's communicators
// with ErrAborted.
//
// A rank's nonblocking collectives wait in its Queue (queue.go) until those it
// issued before are over, so that its episodes start in call order.
package coll

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/spin"
)

// ErrAborted is returned by a collective that the end of the job interrupted; the
// caller turns it into a full error naming the cause.
var ErrAborted = errors.New("coll: job aborted")

// ringSize is how many episodes of a communicator can be in flight at once. A rank
// whose small Bcasts or Reduces do not wait runs this far ahead before it parks, so
// the ranks sharing a processor take turns once per lap: 4 ranks' 8-byte Bcast took
// 0.36 µs with 8 slots, 0.27 with 64. With 128 (2026-12-02; 5 interleaved rounds,
// medians, µs, 64 -> 128 -> 256 slots) 4 ranks' Bcast took 0.150 -> 0.127 -> 0.105,
// Reduce 0.325 -> 0.230 -> 0.215, Scan 0.434 -> 0.341 -> 0.281, Gather 0.256 ->
// 0.213 -> 0.216. At 256 every large Reduce took 1.4-2 times as long, on one
// processor too (4 ranks of 16 KiB: 4.1-4.6 -> 5.1-6.2 µs), for reasons that
// cachegrind's model does not show; at 128 none did. A slot costs its line, its
// claim's two and two spare episode pointers, in pages touched only as used.
const ringSize = 128

// Lead is how many collectives of a communicator a rank can be ahead of another:
// it joins an episode only once every rank has joined the one a lap before.
const Lead = ringSize

// Job is what the communicators of one job share: whether it was aborted, and the
// communicators whose waits an abort must release.
type Job struct {
	aborted atomic.Bool
	mu      sync.Mutex
	comms   []weak.Pointer[Comm]
	live    int // len(comms) after the last pruning
}

// NewJob returns the collective state of a job.
func NewJob() *Job { return &Job{} }

// Abort ends every collective in flight, and every later one, with ErrAborted.
func (j *Job) Abort() {
	if j.aborted.Swap(true) {
		return
	}
	j.mu.Lock()
	comms := j.comms
	j.mu.Unlock()
	for _, w := range comms {
		c := w.Value()
		if c == nil {
			continue
		}
		// An episode that has left the ring was joined by every rank: it ends on its own.
		for i := range c.ring {
			if e := c.ring[i].p.Load(); e != nil {
				e.fail(abortFault)
			}
		}
		c.stall.wake()
	}
}

// abortFault marks an episode that the end of the job interrupted.
var abortFault = &errs.Error{Class: errs.Aborted}

func (j *Job) add(c *Comm) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.comms) >= 2*max(j.live, 8) { // forget the communicators collected since
		j.comms = slices.DeleteFunc(j.comms, func(w weak.Pointer[Comm]) bool { return w.Value() == nil })
		j.live = len(j.comms)
	}
	j.comms = append(j.comms, weak.Make(c))
}

// Comm is the collective state of one communicator whose n ranks all live in this
// process. All its methods take the calling rank's number in the communicator.
//
// Its lines are laid out for who writes them. The ring comes first, so that each
// slot's fields but the end of its data lie in one line (Go's allocator starts an
// object this large 8 bytes past a line). Then, each set a line apart from the
// others: what every rank reads at every call and nobody writes once made; the
// stall; floor and spare, which the makers of episodes write. The roots' claims
// are an allocation of their own.
type Comm struct {
	ring [ringSize]ringSlot
	_    [64]byte

	n         int
	spin      time.Duration // how long a wait polls before it parks (0 when ranks outnumber processors)
	groups    int           // Barrier: how many groups the ranks arrive in (0: one counter)
	leadSpin  time.Duration // Barrier: how long a group's leader polls before it parks
	chainMin  int           // Barrier: the fewest ranks of a group that wakes in a chain
	bells     []bell        // Barrier in chains: each rank's doorbell, made when it first parks there
	stride    int           // Gatherv: the length of each rank's piece of the slot (gathervStride)
	narrowMax int           // the longest piece of which n fit the slot's lines (narrowest)
	job       *Job
	ranks     []rankState
	// queues are the ranks' nonblocking collectives, once they issued one (queue.go):
	// apart from ranks, whose lines the makers of episodes read.
	queues []atomic.Pointer[Queue]
	// claims are, by slot, the episode whose root's copy the slot holds or is
	// getting, plus one (see litLeave), or flagged slotTag, whose small Reduce it
	// holds (slotreduce.go), and the end of a copy longer than the slot holds: two
	// lines each, written by roots and by the ranks that open a slot for a Reduce.
	// An allocation of their own, so that each starts a line (Go puts no header
	// before an object without pointers).
	claims *[ringSize]claim
	wide   atomic.Pointer[[ringSize][wideBytes]byte] // see wideArea
	_      [64]byte

	stall stall // ranks waiting for a slot of the ring to come free
	_     [64]byte

	floor atomic.Uint64                        // every rank has joined the episodes below it (a lower bound)
	spare [2][ringSize]atomic.Pointer[episode] // what left each slot in the last two laps (see reuse)
}

// claim is the two lines of a ring slot that only roots, and the openers of small
// reductions, write (see Comm.claims).
type claim struct {
	s    atomic.Uint64
	more [litMore]byte // a root's copy past the slot's litSlot bytes; a reduction's pieces in the first line
}

// ringSlot holds the episode of one slot of a communicator's ring, on a line of its
// own: with eight slots to a line, a root running ahead made episodes in the slots
// beside the one its followers were reading, and took the line from them at every
// call (2 ranks' 8-byte Bcast, same root: 0.52 against 0.63 µs; 4 KiB of ring per
// communicator instead of 512 bytes).
//
// The rest of the line is a small Bcast's or Scatter's copy of the root's buffer
// (lit.go), continued in the slot's claim when it is longer: a rank that finds it
// there reads this one line (or up to three) instead of the episode's.
type ringSlot struct {
	p    atomic.Pointer[episode]
	lit  atomic.Uint64 // the episode whose copy this is, plus one (0: none yet)
	kind kind
	root int32
	elem int32
	len  int32 // Bcast: the buffer's length; Scatter: a block's
	data [litSlot]byte
}

// stall is where ranks that ran a lap of the ring ahead wait for the others to
// join the episodes they would replace. A rank that joins wakes them only if one
// is waiting for the episode it joined, or one before: the common case costs one
// load of a line nobody writes.
type stall struct {
	waiting atomic.Int32
	at      atomic.Uint64 // the least episode a waiting rank waits for every rank to join
	mu      sync.Mutex
	ch      chan struct{} // closed to wake the waiting ranks; nil when nobody waits
}

// enter counts in a rank that waits for episode s, and returns the channel it parks on.
func (st *stall) enter(s uint64) chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.waiting.Add(1)
	if s < st.at.Load() {
		st.at.Store(s)
	}
	if st.ch == nil {
		st.ch = make(chan struct{})
	}
	return st.ch
}

// joined wakes the waiting ranks if one may wait for episode s, which a rank has
// just joined (after storing its count: a waiter enters, then loads the counts).
func (st *stall) joined(s uint64) {
	if st.waiting.Load() != 0 && st.at.Load() <= s {
		st.wake()
	}
}

// wake wakes every waiting rank: each checks again what it waits for.
func (st *stall) wake() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ch != nil {
		close(st.ch)
		st.ch = nil
	}
	st.at.Store(math.MaxUint64)
}

// rankState is what one rank of the communicator writes: its count of episodes and,
// during a large reduction, its buffers. Only the rank itself writes it; the others read
// its buffers between its arrival and the end of the reduction.
type rankState struct {
	seq atomic.Uint64  // episodes this rank has joined on the communicator
	src unsafe.Pointer // large reduction: its contribution
	dst unsafe.Pointer // large reduction: its receive buffer (root or every rank)
	len int            // large reduction: its contribution's length in bytes
	_   [64 - 32]byte  // a cache line each: ranks on other processors count their own
}

// New returns the collective state of a communicator of n ranks of job j. spin is
// how long a waiting rank polls before it parks, used only when n is at most
// GOMAXPROCS (with more ranks than processors, a spinner only delays the ranks it
// waits for), and by the leaders of a Barrier's groups, who are no more than the
// processors.
func New(j *Job, n int, spin time.Duration) *Comm {
	// Every call of every rank reads its queue's pointer: whole lines of them, which
	// no other object shares (in 32 bytes, a 4-rank Bcast missed the line each call).
	queues := make([]atomic.Pointer[Queue], n, (n+7)&^7)
	c := &Comm{n: n, job: j, ranks: make([]rankState, n), queues: queues, stride: gathervStride(n), narrowMax: narrowest(n), claims: new([ringSize]claim)}
	c.stall.at.Store(math.MaxUint64)
	procs := runtime.GOMAXPROCS(0)
	if n <= procs {
		c.spin = spin
	}
	if n > flatMax && procs > 1 {
		c.groups, c.leadSpin = min(procs, n/groupMin), spin
	}
	c.chainMin = chainMin
	if n > flatMax {
		c.bells = make([]bell, n)
	}
	j.add(c)
	return c
}

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.n }

type kind uint8

const (
	barrier kind = iota + 1
	bcast
	reduce
	allreduce
	slotWait // the ranks of a small reduction or Barrier through the ring slot wait here (slotreduce.go)
)

// Kind names a collective, for internal/xcoll: its calls across procs name
// collectives as this package does (in their messages' signatures and errors).
type Kind = kind

// The collectives, for internal/xcoll.
const (
	KindBarrier            = barrier
	KindBcast              = bcast
	KindReduce             = reduce
	KindAllreduce          = allreduce
	KindGather             = gather
	KindGatherv            = gatherv
	KindScatter            = scatter
	KindScatterv           = scatterv
	KindAllgather          = allgather
	KindAllgatherv         = allgatherv
	KindAlltoall           = alltoall
	KindAlltoallv          = alltoallv
	KindScan               = scan
	KindExscan             = exscan
	KindReduceScatterBlock = reduceScatterBlock
	KindReduceScatter      = reduceScatter
)

// joint reports whether no rank leaves a collective of kind k before every rank
// has arrived, so that the ranks arrive at each together.
func (k kind) joint() bool {
	switch k {
	case barrier, allreduce, allgather, allgatherv, alltoall, alltoallv, reduceScatter, reduceScatterBlock:
		return true
	}
	return false
}

func (k kind) String() string {
	switch k {
	case barrier:
		return "Barrier"
	case bcast:
		return "Bcast"
	case reduce, slotWait:
		return "Reduce"
	case allreduce:
		return "Allreduce"
	}
	return k.more()
}

// episode is one collective call of every rank of a communicator.
type episode struct {
	// The first two lines are what every rank reads, written by the maker before
	// it publishes the episode and then only once (start, fault, buf, slab): apart
	// from arrived, which every rank writes, so that no arrival takes them away.
	seq    uint64
	gone   uint64 // the episode that took its place in the slot, if not the next in it (see vacated)
	kind   kind
	small  bool  // see slab
	owned  bool  // Bcast: buf is the episode's copy, which no early exit gives back
	root   int32 // Bcast, Reduce
	elem   int32 // element size in bytes (Bcast, Reduce, Allreduce)
	op     Op
	fault  atomic.Pointer[errs.Error]
	start  gate    // Bcast: the root's buffer is published; reductions: every rank has arrived
	inline [8]byte // a small Bcast's or Scatter's copy of the root's buffer (see rootCopy)

	buf []byte // Bcast: the root's buffer; a small Scatter(v): its copy of its send buffer

	// A small Reduce (reduceSmall): every rank but the root copies its contribution
	// into its piece of slab, of the maker's length (width), before it arrives, so
	// that it can leave at once; a rank of another length records itself in odd.
	// Small Gathers, Scans, Exscans, Allgathers and Alltoalls use the slab alike
	// (gather.go); a small Scatter(v) keeps its block length in width; the other
	// small exchanges are marked small with an empty slab.
	slab  []byte
	width int
	x     atomic.Pointer[exchange] // gather.go's collectives: every rank's buffers

	arrived atomic.Int64    // ranks that have joined; every rank adds one exactly once
	near    [nearBytes]byte // a small slab, in the line its writers then arrive in (see slabOf)

	done  gate                   // the episode is over for every rank still waiting in it
	maker int                    // the rank that made it
	odd   atomic.Pointer[[2]int] // a rank whose length is not width, and its length
	mem   []byte                 // slab, or a small Bcast's or Scatter's copy (see own)

	counts, displs []int // a small Scatterv: the root's blocks in buf (see scatterSmall); memory kept on reuse

	// Reductions, set by the last rank to arrive before start opens.
	chunks int          // pieces of the vectors, combined by whoever claims them
	chunk  int          // bytes per piece
	target int          // the rank whose receive buffer accumulates
	next   atomic.Int64 // next piece to claim
	left   atomic.Int64 // pieces not combined yet

	// Early exits (abort, fault) wait until nobody touches another rank's buffer.
	busy   atomic.Int64
	closed atomic.Bool

	groups []node   // Barrier in groups: each group's arrivals and gate (memory kept on reuse)
	_      [56]byte // 448 bytes, a size class of whole lines: episodes start on a line
}

// gate is a one-shot event: a flag to poll and a channel to park on, made by the
// first rank that parks (a gate that nobody parks on costs no channel).
type gate struct {
	open atomic.Bool
	ch   atomic.Pointer[chan struct{}]
}

func (g *gate) isOpen() bool { return g.open.Load() }

// release opens g and wakes its parked ranks. The channel's maker loads open after
// storing ch, and release loads ch after storing open: one of the two sees the other.
func (g *gate) release() {
	if g.open.CompareAndSwap(false, true) {
		if ch := g.ch.Load(); ch != nil {
			close(*ch)
		}
	}
}

// park blocks until g is open.
func (g *gate) park() {
	ch := g.ch.Load()
	if ch == nil {
		fresh := make(chan struct{})
		if g.ch.CompareAndSwap(nil, &fresh) {
			ch = &fresh
		} else {
			ch = g.ch.Load()
		}
	}
	if g.open.Load() {
		return
	}
	<-*ch
}

// join returns the calling rank's next episode on c, making it if the rank is the
// first to arrive. It returns nil if the job ended while the rank waited for a slot.
// width, unless negative, asks for a small Reduce's episode whose ranks leave copies
// of their width-byte contributions in it: the maker's wish holds for every rank.
//
// A rank counts the episodes it has joined once it holds the pointer, and a slot's
// episode is replaced once every rank's count is past it: a rank's own line, where
// a shared counter of arrivals would make every rank of every episode contend for
// one (4 ranks' 8-byte Bcast: 0.17 µs instead of 0.22).
func (c *Comm) join(rank int, k kind, root, elem int, op Op, width int) *episode {
	e := c.take(rank, k, root, elem, op, width)
	if e != nil {
		c.unlit(e, rank, k, root, elem, nil)
		c.count(rank, e.seq)
	}
	return e
}

// count records that rank has joined episode s, its next: the slot's episode is
// replaced once every rank has, so a rank must be done with what it reads of the
// slot itself first (the episode stays for another lap: see reuse).
func (c *Comm) count(rank int, s uint64) {
	c.ranks[rank].seq.Store(s + 1)
	c.stall.joined(s)
}

// take is join without the counting: it returns the rank's next episode.
func (c *Comm) take(rank int, k kind, root, elem int, op Op, width int) *episode {
	s := c.ranks[rank].seq.Load()
	slot := &c.ring[s%ringSize].p
	var fresh *episode
	e := slot.Load()
	// e is this rank's episode, or an earlier one (or none) to replace once every
	// rank has joined the episode a lap before, whose copy the slot may hold (a
	// small Bcast's or Scatter's root makes no episode: see litRoot). (A later one
	// would need this rank to have joined s.)
	for e == nil || e.seq != s {
		if !c.free(s) {
			return nil
		}
		if fresh == nil && k.joint() && c.spin > 0 && s%uint64(c.n) != uint64(rank) {
			// Ranks that spin arrive at a joint collective together and each made
			// the episode, all but one in vain (the zeroed lines, the lost swap):
			// one rank in turn makes it, the others give it a quarter of the spin.
			ours := func() bool { e = slot.Load(); return e != nil && e.seq == s }
			if spin.Until(c.spin/4, ours) {
				break
			}
		}
		if fresh == nil {
			fresh = c.reuse(s)
			mem, x, groups, counts, displs := fresh.mem, fresh.x.Load(), fresh.groups, fresh.counts, fresh.displs
			// Cleared in place and then filled in: a literal was built on the stack and
			// copied, its loads waiting for the stores of its fields.
			*fresh = episode{}
			fresh.seq, fresh.kind, fresh.root, fresh.elem, fresh.op, fresh.mem, fresh.maker = s, k, int32(root), int32(elem), op, mem, rank
			// A Scatterv's counts' memory: scatterSmall sets them.
			fresh.counts, fresh.displs = counts, displs
			if x != nil && x.small { // a small exchange's, kept with its copies
				x.reset()
				fresh.x.Store(x)
			}
			fresh.groups = groups[:0]
			if k == barrier && c.groups > 0 {
				fresh.groups = c.arrange(groups)
			}
			if width >= 0 {
				fresh.small, fresh.slab, fresh.width = true, fresh.slabOf(c.n*width), width
			}
		}
		if slot.CompareAndSwap(e, fresh) {
			c.clearStale(s)
			if e != nil {
				if e.seq+ringSize != s { // else gone is implied: see vacated
					e.gone = s
				}
				c.spareOf(s).Store(e)
			}
			e = fresh
			break
		}
		e = slot.Load()
	}
	return e
}

// clearStale clears a small reduction's word that the slot of episode s holds from
// a lap before (see slotHeld): of the ways through the slot, the maker of an
// episode is the one that writes no word of its own there.
func (c *Comm) clearStale(s uint64) {
	r := &c.ring[s%ringSize]
	if v := r.lit.Load(); slotStale(v, s) {
		r.lit.CompareAndSwap(v, 0)
	}
}

// reuse returns an episode to make episode s with: the one that left its slot two
// laps before (or earlier), which every rank has left, or a new one. It saves an
// allocation, and the copies' memory, per collective. Two laps, not one: a rank
// loads the slot before it waits for the lap, so a rank at s may still read an
// episode that left the slot for s-ringSize (its slot may hold an episode many laps
// old, since a small Bcast's root makes none), but not one that left it before
// (the rank has joined an episode since, which some rank made or published after
// the lap). The spare may have left the slot for s itself (a rank that lost the
// race to make s came after the winner stored it): it goes back. Once the job is
// aborted it reuses none: Job.Abort may be failing an episode it found in the ring.
func (c *Comm) reuse(s uint64) *episode {
	spare := c.spareOf(s)
	if e := spare.Swap(nil); e != nil {
		if e.vacated()+2*ringSize <= s && !c.job.aborted.Load() {
			return e
		}
		spare.CompareAndSwap(nil, e)
	}
	return new(episode)
}

// vacated returns the episode that took e's place in its slot: the next episode of
// the slot, unless a small Bcast's or Scatter's root made none for it (see
// litRoot). The maker records it in e only then, so that it does not take e's first
// line from the cores that read it.
func (e *episode) vacated() uint64 {
	if e.gone != 0 {
		return e.gone
	}
	return e.seq + ringSize
}

// spareOf returns where the episode that leaves the slot for episode s is kept,
// and where reuse looks for one to make s with.
func (c *Comm) spareOf(s uint64) *atomic.Pointer[episode] {
	return &c.spare[s/ringSize%2][s%ringSize]
}

// rootCopy returns n bytes of the episode's own memory for a copy of the root's
// buffer (a small Bcast's or Scatter's), which only the root writes, before it
// publishes the episode: in the episode's first line when they fit, which every
// rank reads anyway (4 ranks' Bcast of one double: one line fewer to move from
// the root's core to each of the others'), else in mem.
func (e *episode) rootCopy(n int) []byte { return e.ownIn(e.inline[:], n) }

// nearBytes is the room for a slab in the line of the arrivals' count.
const nearBytes = 56

// slabOf returns n bytes of the episode's own memory for its slab: beside arrived
// when they fit, since every rank that writes its piece then arrives, and whoever
// reads the pieces has arrived first, so that the pieces move with that line.
func (e *episode) slabOf(n int) []byte { return e.ownIn(e.near[:], n) }

// ownIn returns n bytes of room, a field of the episode, when they fit; else of mem.
func (e *episode) ownIn(room []byte, n int) []byte {
	if n <= len(room) {
		return room[:n]
	}
	return e.own(n)
}

// own returns n bytes of the episode's own memory, kept when it is reused.
func (e *episode) own(n int) []byte {
	if cap(e.mem) < n {
		e.mem = make([]byte, n)
	}
	return e.mem[:n]
}

// free waits until the slot of episode s is the caller's: every rank has joined
// the episode a lap before. It returns false if the job ended first.
func (c *Comm) free(s uint64) bool {
	return s < ringSize || c.joinedAll(s-ringSize) || c.awaitJoins(s-ringSize)
}

// joinedAll reports whether every rank has joined episode s.
func (c *Comm) joinedAll(s uint64) bool {
	if c.floor.Load() > s {
		return true
	}
	low := uint64(math.MaxUint64)
	for i := range c.ranks {
		low = min(low, c.ranks[i].seq.Load())
	}
	for f := c.floor.Load(); low > f && !c.floor.CompareAndSwap(f, low); f = c.floor.Load() {
	}
	return low > s
}

// awaitJoins waits until every rank has joined episode s, so that its slot can be
// reused: the caller ran a lap of the ring ahead of another rank. It returns false
// if the job ended first. It waits until the others are half a lap behind, not one
// episode: it then runs half a lap before it waits again, instead of being woken
// for every episode a laggard joins, or, spinning, reading the laggard's line as
// soon as it counts itself in each (which then took the line back to count itself
// in the next: 2 ranks' Reduce to the same root 0.144 -> 0.105 µs, Scan 0.135 ->
// 0.119). Nothing that lets the others join those episodes waits for the caller:
// it has left every episode before the one it would make.
func (c *Comm) awaitJoins(s uint64) bool {
	if c.spin == 0 {
		runtime.Gosched()
	} else if spin.Until(c.spin, func() bool { return c.joinedAll(s + ringSize/2) }) {
		return true
	}
	if c.joinedAll(s) {
		return true
	}
	target := s + ringSize/2
	for !c.joinedAll(target) {
		ch := c.stall.enter(target)
		if c.job.aborted.Load() { // Abort sets aborted, then wakes
			c.stall.waiting.Add(-1)
			return false
		}
		if !c.joinedAll(target) {
			<-ch
		}
		c.stall.waiting.Add(-1)
	}
	return true
}

// check compares what the calling rank passed with what the episode's maker passed,
// records a fault on a mismatch, and reports whether they agree. A rank that does
// not agree leaves at once with the fault: it may call itself the root of an
// episode whose root is another rank, and must not act as one.
func (c *Comm) check(e *episode, rank int, k kind, root, elem int) bool {
	err := disagree(e.seq, rank, k, root, elem, e.kind, int(e.root), int(e.elem))
	if err != nil {
		e.fail(err)
	}
	return err == nil
}

// disagree describes how the calling rank's collective call s (kind k, root and
// element size) differs from another rank's (theirs), or returns nil.
func disagree(s uint64, rank int, k kind, root, elem int, theirs kind, theirRoot, theirElem int) *errs.Error {
	switch {
	case theirs != k:
		return errs.New(errs.Arg, k.String(), rank,
			"collective call %d on this communicator is %v here but %v on another rank: every rank must call the same collectives in the same order",
			s+1, k, theirs)
	case theirRoot != root:
		return errs.New(errs.Root, k.String(), rank, "root %d here but root %d on another rank", root, theirRoot)
	case theirElem != elem:
		return errs.New(errs.Count, k.String(), rank, "elements of %d bytes here but of %d bytes on another rank", elem, theirElem)
	}
	return nil
}

// fail records the first fault of e and releases every rank waiting in it. (A rank
// that makes the exchange loads fault after: one of the two sees the other.)
func (e *episode) fail(err *errs.Error) {
	e.fault.CompareAndSwap(nil, err)
	e.start.release()
	e.done.release()
	for i := range e.groups {
		e.groups[i].abandon()
	}
}

// enter announces that the caller is about to touch another rank's buffer; it fails
// once a rank has left the episode early, which may have returned that buffer to
// its owner.
func (e *episode) enter() bool {
	e.busy.Add(1)
	if e.closed.Load() {
		e.busy.Add(-1)
		return false
	}
	return true
}

func (e *episode) exit() { e.busy.Add(-1) }

// shut is called by a rank that leaves e before it is over (abort or fault): nobody
// touches any rank's buffer after it returns.
func (e *episode) shut() {
	e.closed.Store(true)
	for e.busy.Load() != 0 {
		runtime.Gosched()
	}
}

// outcome is the calling rank's result once its part of e is over: the episode's
// fault seen from this rank, ErrAborted, or nil.
func (c *Comm) outcome(e *episode, rank int, ok bool) error {
	if f := e.fault.Load(); f == abortFault {
		ok = false
	} else if f != nil {
		e.shut()
		err := *f
		err.Rank = rank
		return &err
	}
	if !ok {
		e.shut()
		return ErrAborted
	}
	return nil
}

// wait waits for g to open, then returns true; it returns false if the job ended
// first. With no more ranks than processors it polls within the spin budget; with
// more it yields its processor once: it runs again once the ranks queued before it
// have had their turn, and when those are the ranks it waits for, they have arrived
// by then, so it neither parks nor needs the releaser to wake it through the
// scheduler (one rank at a time, about 170 ns each). Then it parks, so a long wait
// (another rank computes) costs no processor time. Measured: 4-rank Barrier 0.51 µs
// instead of 0.81, 16 ranks 2.1 instead of 3.4, Allreduce of one double 0.73 and
// 3.0 µs instead of 1.09 and 4.2; two or three yields measure the same, four or more
// slower (16 ranks: 3.6 µs), each being a trip through the run queue that all
// processors share.
//
// The gate is in the ring when this is called (its episode has not been joined by
// every rank), so Job.Abort either sees it and opens it, or has set aborted before
// the load here.
func (c *Comm) wait(g *gate) bool { return c.await(g, true) }

// await is wait, yielding before it parks only if yield is set.
func (c *Comm) await(g *gate, yield bool) bool {
	if g.isOpen() {
		return true
	}
	if c.job.aborted.Load() {
		return false
	}
	if (c.spin > 0 || yield) && c.poll(g.isOpen) {
		return true
	}
	return c.parkOn(g)
}

// poll is wait's polling for any condition: it reports whether cond came true
// within the spin budget or, with more ranks than processors, after one yield.
func (c *Comm) poll(cond func() bool) bool {
	if c.spin > 0 {
		return spin.Until(c.spin, cond)
	}
	runtime.Gosched()
	return cond()
}

// parkOn is await without its spin or yield: for a wait that spun already.
func (c *Comm) parkOn(g *gate) bool {
	if g.isOpen() {
		return true
	}
	if c.job.aborted.Load() {
		return false
	}
	g.park()
	return true
}

// Barrier returns once every rank of c has called it.
//
// Up to flatMax ranks, or on one processor, the ranks share one counter: the last
// to arrive opens the episode's done gate, and the others, having yielded once
// (see wait), mostly find it open. More ranks on several processors arrive in
// groups of consecutive ranks, one group per processor: a rank that is not the last
// of its group parks at once; the last (the group's leader) counts its group in,
// then polls for the others' leaders within the spin budget, and opens its group's
// gate. Whoever wakes a group queues its ranks on the processor it runs on, so the
// groups run on their leaders' processors side by side, each opened by a leader who
// was already running there, instead of every rank being woken from one processor
// while the others sleep, or every rank's yield going through the run queue that
// all processors share (256 ranks on 2 processors: 26-28 µs against 41-44 for one
// counter, with or without the yield, and 45 for a combining tree of 16-way nodes).
//
// A group of chainMin ranks or more wakes in a chain instead: the leader wakes the
// group's first rank, and each rank woken wakes the next before it leaves. Woken
// all at once, thousands of ranks overflow the processor's run queue, and each
// rank's descriptor, touched by its wake-up, has left the cache by the time the rank
// runs; in a chain a rank runs right after its wake-up. Smaller groups keep the
// gate, whose woken ranks idle processors can take over (see chainMin).
func (c *Comm) Barrier(rank int) error {
	if c.n == 1 {
		return nil
	}
	if c.n <= slotRanks && c.spin > 0 { // see slotEveryone
		if ok, err := c.reduceInSlot(barrier, rank, 0, nil, nil, 0, Op{}, nil); ok {
			return err
		}
	}
	e := c.join(rank, barrier, 0, 0, Op{}, -1)
	if e == nil {
		return ErrAborted
	}
	c.check(e, rank, barrier, 0, 0)
	if c.groups > 0 {
		return c.outcome(e, rank, c.lead(e, rank))
	}
	n := int64(c.n)
	ok := true
	switch {
	case e.arrived.Add(1) == n:
		e.done.release()
	case c.spin == 0:
		ok = c.wait(&e.done)
	case !spin.Until(c.spin, func() bool { return e.arrived.Load() == n }):
		ok = c.parkOn(&e.done) // one spin in all, as any wait
	}
	return c.outcome(e, rank, ok)
}

const (
	flatMax  = 64 // the most ranks whose Barrier counts them on one counter
	groupMin = 16 // the fewest ranks in a group of a Barrier
)

// chainMin is the fewest ranks of a Barrier's group that wakes in a chain. 2 processors,
// `weft bench-worker coll -op barrier`, 3 rounds each, ms, a gate against a chain:
// 8,192 ranks 3.6-4.5 against 3.2-3.5, 16,384 11.3-13.2 against 6.9-7.5, 32,768
// 26.6-26.8 against 14.7-17.4; but 1,024 ranks 0.20-0.21 against 0.28-0.32 and 256
// 0.033-0.039 against 0.050-0.070, where a chain, which leaves one rank at a time
// on the run queue, keeps an idle processor from taking half of the woken ranks.
const chainMin = 4096

// node is one group of a Barrier's ranks: ranks lo to hi-1 of the communicator.
type node struct {
	arrived atomic.Int32
	lo, hi  int32
	leader  atomic.Int32 // the last of the group to arrive, which opens it: stored before the gate opens
	gate    gate
	bells   []bell // a chain's doorbells: the communicator's bells[lo:hi]; nil for a group that keeps its gate
	_       [64 - 56]byte
}

// bell is a rank's doorbell in a Barrier's chain, made by the rank the first time it
// parks there. A ring may be stale (left by a fault's rings, or by a wake-up of a
// rank that had not parked yet), so every wait checks its group again when it wakes.
type bell struct{ ch atomic.Pointer[chan struct{}] }

// ring wakes the bell's rank if it is parked, or makes its next park return at once.
func (b *bell) ring() {
	if ch := b.ch.Load(); ch != nil {
		select {
		case *ch <- struct{}{}:
		default:
		}
	}
}

// abandon opens g's gate for a fault, and rings every rank of a chain: ranks that
// never arrive (a rank that failed) would break it.
func (g *node) abandon() {
	g.gate.release()
	for i := range g.bells {
		g.bells[i].ring()
	}
}

// arrange returns the groups of a new Barrier episode, in the memory of groups if it
// has room.
func (c *Comm) arrange(groups []node) []node {
	if cap(groups) < c.groups {
		groups = make([]node, c.groups)
	}
	groups = groups[:c.groups]
	first := func(g int) int { return (g*c.n + c.groups - 1) / c.groups } // its least rank r: r*groups/n = g
	for g := range groups {
		lo, hi := first(g), first(g+1)
		groups[g] = node{lo: int32(lo), hi: int32(hi)}
		if hi-lo >= c.chainMin {
			groups[g].bells = c.bells[lo:hi]
		}
		groups[g].leader.Store(-1)
	}
	return groups
}

// lead takes rank through a Barrier in groups: it parks until its group opens, or,
// last of its group, waits for every group and opens its own. In a chain it then
// wakes the next rank. It returns false if the job ended.
func (c *Comm) lead(e *episode, rank int) bool {
	g := &e.groups[rank*c.groups/c.n]
	if g.arrived.Add(1) < g.hi-g.lo {
		if g.bells == nil {
			return c.await(&g.gate, false)
		}
		ok := c.follow(g, rank)
		g.wakeAfter(int32(rank))
		return ok
	}
	ok := true
	if e.arrived.Add(1) == int64(c.groups) {
		e.done.release()
	} else if !spin.Until(c.leadSpin, e.done.isOpen) {
		ok = c.await(&e.done, false)
	}
	g.leader.Store(int32(rank))
	g.gate.release()
	if g.bells != nil {
		g.wakeAfter(g.lo - 1)
	}
	return ok
}

// follow parks rank, one of chained group g's, until g opens. It returns false if
// the job ended first. The rank stores its bell before it looks at the gate, and
// the ranks that ring it look at the bell after the gate opened: one of the two
// sees the other.
func (c *Comm) follow(g *node, rank int) bool {
	if g.gate.isOpen() {
		return true
	}
	b := &c.bells[rank]
	ch := b.ch.Load()
	if ch == nil {
		fresh := make(chan struct{}, 1)
		b.ch.Store(&fresh)
		ch = &fresh
	}
	for !g.gate.isOpen() {
		if c.job.aborted.Load() {
			return false
		}
		<-*ch
	}
	return true
}

// wakeAfter rings the rank of chained group g that follows rank: the leader, which
// wakes the first, is not rung.
func (g *node) wakeAfter(rank int32) {
	next := rank + 1
	if next == g.leader.Load() {
		next++
	}
	if next < g.hi {
		g.bells[next-g.lo].ring()
	}
}

// bcastEager is the largest Bcast whose root copies its buffer into the episode
// and returns at once, as the C MPIs' shared-memory broadcasts do: successive
// broadcasts then pipeline through the ring instead of each waiting for the
// slowest rank. Above it the extra copy costs more than the wait saves.
const bcastEager = 8 << 10

// Bcast copies the root's buf into every other rank's buf. elem is the element size
// in bytes. Every rank copies once, straight from the root's buffer, and the root
// returns when all have copied; up to bcastEager bytes the root's buffer is copied
// into the episode first and the root returns at once. A rank whose buffer's length
// differs from the root's gets an ErrTruncate (longer root) or ErrCount (shorter)
// error, and so does the root if it has not returned yet.
func (c *Comm) Bcast(rank int, buf []byte, elem, root int) error {
	return c.bcast(rank, buf, elem, root, len(buf) <= bcastEager)
}

func (c *Comm) bcast(rank int, buf []byte, elem, root int, eager bool) error {
	if c.n == 1 {
		return nil
	}
	lit := eager && len(buf) <= litMax
	switch {
	case lit && rank == root:
		if left, err := c.litRoot(rank, bcast, buf, elem, len(buf)); left {
			return err
		}
	case lit && c.litCopy(rank, bcast, buf, elem, root):
		return nil
	}
	e := c.take(rank, bcast, root, elem, Op{}, -1)
	if e == nil {
		return ErrAborted
	}
	if c.unlit(e, rank, bcast, root, elem, buf) {
		return nil
	}
	if !c.check(e, rank, bcast, root, elem) {
		c.count(rank, e.seq)
		return c.outcome(e, rank, true)
	}
	if lit && rank == root && e.fault.Load() == nil {
		c.litLeave(e.seq, bcast, buf, elem, root, len(buf))
	}
	c.count(rank, e.seq)
	n := int64(c.n)
	if rank == root {
		if eager {
			own := e.rootCopy(len(buf))
			copy(own, buf)
			buf = own
		}
		e.buf, e.owned = buf, eager
		e.start.release()
		if eager { // nobody waits for the others' copies: their arrivals go uncounted
			return c.outcome(e, rank, true)
		}
		ok := true
		if e.arrived.Add(1) == n {
			e.done.release()
		} else {
			ok = c.wait(&e.done)
		}
		return c.outcome(e, rank, ok)
	}
	ok := c.wait(&e.start)
	published := ok && e.fault.Load() == nil // start was opened by the root, not by a fault
	if published {
		if len(e.buf) != len(buf) {
			e.fail(bcastLength(root, len(e.buf), rank, len(buf), elem))
		} else if e.owned {
			copy(buf, e.buf)
		} else if e.enter() {
			copy(buf, e.buf)
			e.exit()
		}
	}
	if published && e.owned {
		return c.outcome(e, rank, ok)
	}
	if e.arrived.Add(1) == n {
		e.done.release()
	}
	return c.outcome(e, rank, ok)
}

// lengths describes two buffers of different lengths, in elements.
func lengths(who string, a, rank, b, elem int) string {
	if elem <= 0 {
		elem = 1
	}
	return fmt.Sprintf("%s has %d elements, rank %d has %d", who, a/elem, rank, b/elem)
}
