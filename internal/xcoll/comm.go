package xcoll

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/spin"
)

// The collectives of a communicator spanning procs run on two levels. In each proc
// the communicator's ranks there (its local ranks, numbered in the order of their
// ranks in the communicator) meet in internal/coll's shared-memory collectives, on
// a coll.Comm of their own; the lowest-ranked of them is the proc's leader, and
// only the leaders use the collective channel. Procs are numbered in the order of
// their leaders' ranks (proc index 0 holds rank 0).
//
// Every collective has the same three steps in a proc: a local collective that
// gives the leader the proc's part (Reduce, Gather, Barrier, or for Bcast at the
// root's proc the whole Bcast); the leaders' step on the channel (Bcast and
// Reduce binomial trees rooted at the root's proc, or for a non-commutative
// Reduce at proc index 0 and then one message to the root's proc: each crosses
// the network procs-1 times; Barrier a dissemination and a small Allreduce a
// recursive doubling, log2 procs rounds each, a large Allreduce a reduction up
// the tree and a broadcast down it; Allgather and Gather a gather to proc index
// 0 and then a broadcast or one message to the root's proc); and a release,
// where the leader publishes the outcome (the error, and the result the others
// copy) and the proc's ranks meet in a local collective after which each reads
// it, except in a Reduce, whose root alone waits for it. Every rank of a proc
// runs the same local collectives whatever happened, so errors never leave the
// proc's ranks out of step, and an error found by a leader travels in the
// messages (a fault instead of data) to every leader that would otherwise wait
// for that message: nobody hangs, and an Allreduce or a gather makes every proc
// learn of a fault anywhere, a Reduce its root, while a broadcast's fault
// reaches the procs below it in the tree. When every proc is on one host, the
// leaders meet in a segment of memory they share instead (host mode, host.go).

// ring is how many calls' parts (see meet) a communicator keeps: a rank writes its
// part of a call only once every rank of its proc is done with the call ring
// calls before, since no rank leaves a call with parts before the others.
const ring = 8

// outcomes is how many calls' arrivals (see arrive) and outcomes (see publish) a
// communicator keeps: more than a rank can be ahead of another of its proc, which
// is at most coll.Lead calls, since every call has a local collective. (A Reduce's
// other ranks and a small Bcast's root leave without waiting.)
const outcomes = 2 * coll.Lead

// The steps of a collective on the channel: the message tags.
const (
	tagUp     int32 = 1 + iota // towards proc index 0 (reduction, gather)
	tagDown                    // away from the root (broadcast)
	tagRoot                    // proc index 0 to the root's proc
	tagDirect                  // one leader straight to another (more.go)
	tagAlarm                   // a leader found procs making different calls: see alarm
	tagRound                   // round r of a dissemination is tagRound+r
)

// tagPace is the tag of round 0 of a pacing dissemination (see pace), past those
// of a Barrier's.
const tagPace = tagRound + 64

// paceEvery is how many collectives a communicator's leaders may run between two
// dissemination barriers among them (pace). A leader that waits for nobody (a
// Bcast's root, a Reduce's or Gather's senders) would otherwise run ahead of the
// other procs without bound, and their receive daemons would keep every message
// it sent until their ranks make the calls (300,000 Bcasts of 64 bytes ahead of a
// slow proc held 110 MB there). So a proc holds the messages of at most about
// 2 paceEvery calls of a communicator, at the cost of a barrier every paceEvery.
const paceEvery = 64

// kind names a collective as internal/coll does.
type kind = coll.Kind

// Comm is the collective state of one communicator whose ranks live in several
// procs, as this proc sees it. Its methods take the calling rank's number in the
// communicator, which must be a rank of this proc.
type Comm struct {
	net         *Net
	ctx         uint32
	n           int
	local       *coll.Comm        // this proc's ranks of the communicator, by local rank
	procs       []int             // by proc index: the proc's number in the job
	index       map[int]int       // by proc number: its proc index
	members     [][]int           // by proc index: its ranks, ascending; the first is its leader
	procOf      []int             // by rank: its proc's index
	lrank       []int             // by rank: its place among its proc's ranks
	me          int               // our proc's index
	consecutive bool              // every proc's ranks are consecutive: folding by proc keeps rank order
	alone       bool              // our proc holds one rank of the communicator, its leader: no local steps to tell
	seqs        []seqLine         // by local rank: its collectives on the communicator
	spin        time.Duration     // how long a Reduce's root polls for its outcome before it parks
	out         [outcomes]outcome // written by the leader, read by its proc's ranks
	arrivals    []arrival         // by collective mod outcomes, then local rank: see arrive
	parts       []coll.Part       // by collective mod ring, then local rank: see meet
	hostable    bool              // every proc is on this host: the first call sets up host mode
	host        *host             // the leaders' segment in host mode (host.go), else nil
}

// seqLine is a rank's count of its collectives, on a line of its own: the ranks of
// a proc count at every call, from different processors.
type seqLine struct {
	n atomic.Uint64
	_ [56]byte
}

// arrival is what a rank tells its proc's leader of its call, through memory:
// which call it is.
type arrival struct{ seq, sig uint64 }

// outcome is what a leader tells its proc's ranks at the end of a collective.
type outcome struct {
	seq  atomic.Uint64 // the collective's number plus one, once published (0: none yet)
	err  error
	data []byte
	wake atomic.Pointer[chan struct{}] // closed at publication: a Reduce's root waits (await)
}

// New returns the state of the communicator of context ctx whose rank r runs in
// proc procOf[r]; this proc (net.Self()) must hold at least one rank. The local
// collectives belong to job j and spin as coll.New says.
func New(net *Net, ctx uint32, procOf []int, j *coll.Job, spin time.Duration) *Comm {
	c := &Comm{net: net, ctx: ctx, n: len(procOf), procOf: make([]int, len(procOf)), lrank: make([]int, len(procOf)), consecutive: true}
	index := map[int]int{}
	for r, p := range procOf {
		i, ok := index[p]
		if !ok {
			i = len(c.procs)
			index[p] = i
			c.procs = append(c.procs, p)
			c.members = append(c.members, nil)
		} else if last := c.members[i][len(c.members[i])-1]; last != r-1 {
			c.consecutive = false
		}
		c.procOf[r], c.lrank[r] = i, len(c.members[i])
		c.members[i] = append(c.members[i], r)
	}
	c.me, c.index = index[net.Self()], index
	c.hostable = net.hostOf != nil && len(c.procs) > 1 && len(c.procs) <= HostProcs
	for _, p := range c.procs {
		c.hostable = c.hostable && net.hostOf(p) == net.hostOf(net.Self())
	}
	mine := len(c.members[c.me])
	c.alone = mine == 1
	c.local = coll.New(j, mine, spin)
	if mine <= runtime.GOMAXPROCS(0) { // as coll.New: a spinner only delays the ranks it waits for
		c.spin = spin
	}
	c.seqs = make([]seqLine, mine)
	c.arrivals = make([]arrival, outcomes*mine)
	c.parts = make([]coll.Part, ring*mine)
	return c
}

// Enter and Leave bracket a rank's collective call on c. While a rank of this
// proc is in one, the device's receive daemons poll on (netd.Demand): the
// leader's local steps between two messages outlast a crowded host's poll
// budget, and a daemon that blocked in the kernel then cost a wake-up at the
// next message.
func (c *Comm) Enter() { c.net.demand.Add() }
func (c *Comm) Leave() { c.net.demand.Done() }

// Local returns the number of ranks in this proc.
func (c *Comm) Local() int { return len(c.members[c.me]) }

// Queued returns the queue of rank's nonblocking collectives on c (see
// coll.Queue), or nil if it has none; the local collectives' state keeps it.
func (c *Comm) Queued(rank int) *coll.Queue { return c.local.Queued(c.lrank[rank]) }

// Queue returns the queue of rank's nonblocking collectives on c, made on first use.
func (c *Comm) Queue(rank int) *coll.Queue { return c.local.Queue(c.lrank[rank]) }

// call is one rank's collective call.
type call struct {
	c          *Comm
	k          kind
	rank, lr   int // in the communicator, and among this proc's ranks
	root, elem int
	seq        uint64  // the collective's number on the communicator
	sig        uint64  // names the call to other procs: kind, root, element size
	fn         coll.Op // the reduction of Scan, Exscan, ReduceScatterBlock (more.go)
	alarmed    bool    // the leader sent its alarm
	logged     bool    // host mode: send and recv go through the call's entries (hostlog.go)
	split      error   // the proc's ranks made different calls: see sameCall
}

// start begins the calling rank's call in o, which is zero: filled in place, as
// a call returned by value was zeroed three times and copied twice (a tenth of the
// instructions of a 1x4 Bcast).
func (c *Comm) start(o *call, rank int, k kind, root, elem int) {
	lr := c.lrank[rank]
	seq := c.seqs[lr].n.Add(1) - 1
	o.c, o.k, o.rank, o.lr, o.root, o.elem, o.seq = c, k, rank, lr, root, elem, seq
	o.sig = uint64(k)<<56 | uint64(elem&0xffffff)<<32 | uint64(uint32(root))
	if !o.leader() {
		return
	}
	if seq == 0 && c.hostable {
		c.setUp()
	}
	switch {
	case c.host != nil && !onHost(k):
		o.logs()
	case c.host == nil && seq%paceEvery == paceEvery-1 && len(c.procs) > 1:
		o.pace()
	}
}

// pace is the leaders' barrier of every paceEvery-th call, before its own steps
// (every leader starts every call, whatever happens in it later). A fault there
// (the procs made different calls, or one is lost) ends the call as split does:
// the leader no longer waits for anything in it.
func (o *call) pace() {
	if err := o.disseminate(nil, tagPace); err != nil {
		o.split = err
	}
}

func (o *call) leader() bool { return o.lr == 0 }

// onHost says whether collective k has a leaders' step of its own on the
// segment in host mode: else its entry is a log (hostlog.go). A Reduce or
// Allreduce whose procs cannot fold in proc order, a Scan whose sends do not
// fit an entry, and an Alltoall whose blocks do not, turn to the log in reduce,
// scan and alltoall.
func onHost(k kind) bool {
	switch k {
	case coll.KindBarrier, coll.KindBcast, coll.KindReduce, coll.KindAllreduce, coll.KindGather, coll.KindAllgather,
		coll.KindAllgatherv, coll.KindScan, coll.KindExscan, coll.KindScatter, coll.KindScatterv, coll.KindAlltoall:
		return true
	}
	return false
}

// fault returns an error of the call about peer.
func (o *call) fault(class errs.Class, peer int, format string, args ...any) *errs.Error {
	return &errs.Error{Class: class, Op: o.k.String(), Rank: o.rank, Peer: peer, Tag: errs.None, Detail: fmt.Sprintf(format, args...)}
}

// arrive tells the leader of the calling rank's proc about its call, before the
// local collective that starts the call: the leader reads the arrivals once that
// collective has brought every rank of the proc to it (sameCall). An arrival is
// not overwritten before its leader has read it: a rank writes it again outcomes
// calls later, and it cannot get that far ahead of its leader.
func (o *call) arrive() {
	if !o.c.alone {
		o.c.arrivals[o.at(outcomes)] = arrival{seq: o.seq, sig: o.sig}
	}
}

// at is the index of the calling rank's entry for the call in a ring of k calls
// of the proc's ranks.
func (o *call) at(k uint64) int { return int(o.seq%k)*o.c.Local() + o.lr }

// sameCall is the leader's check, once the proc's ranks have arrived, that they
// all made its call: the local collectives compare only what they are given, and
// several calls start with the same one (a local Barrier, or a Gather or Reduce
// to the leader whatever the root). It returns err, or else the first fault.
// After a fault the leader still sends what its call sends (faults), but no
// longer waits for anything: its call may not be what the other procs run, so
// the messages it would wait for may never come; its alarm ends the waits of
// the other leaders that its call leaves without a message.
func (o *call) sameCall(err error) error {
	if !o.leader() || err != nil || o.c.alone {
		return err
	}
	mine := o.c.Local()
	first := int(o.seq%outcomes) * mine
	for i, sl := range o.c.arrivals[first : first+mine] {
		peer := o.c.members[o.c.me][i]
		switch {
		case sl.seq != o.seq:
			o.split = o.fault(errs.Arg, peer, "collective call %d on this communicator is %v here but another call on rank %d: every rank must call the same collectives in the same order", o.seq+1, o.k, peer)
		case sl.sig != o.sig:
			o.split = o.differs(peer, sl.sig)
		default:
			continue
		}
		o.alarm()
		return o.split
	}
	return nil
}

// worse returns the error a collective carries on with: an abort ends it whatever
// else happened, else the first fault stands.
func worse(a, b error) error {
	if a == nil || b == coll.ErrAborted {
		return b
	}
	return a
}

// fromLocal turns an error of a local collective, which counts this proc's ranks,
// into one of the caller's call: the ranks it names are renamed as ranks of the
// communicator (in Peer and in the detail's "rank N"), and a length mismatch of
// a reduction is ErrCount, as in one proc, whatever local step found it.
func (o *call) fromLocal(err error) error {
	f, ok := err.(*errs.Error)
	if !ok {
		return err
	}
	mine := o.c.members[o.c.me]
	g := *f
	g.Op, g.Rank = o.k.String(), o.rank
	if g.Peer >= 0 && g.Peer < len(mine) {
		g.Peer = mine[g.Peer]
	}
	g.Detail = localRank.ReplaceAllStringFunc(g.Detail, func(s string) string {
		if r, err := strconv.Atoi(s[len("rank "):]); err == nil && r < len(mine) {
			return "rank " + strconv.Itoa(mine[r])
		}
		return s
	})
	if g.Class == errs.Truncate && (o.k == coll.KindReduce || o.k == coll.KindAllreduce) {
		g.Class = errs.Count
	}
	return &g
}

// localRank finds the ranks that the local collectives' errors name.
var localRank = regexp.MustCompile(`\brank [0-9]+`)

// send sends data, or the fault that err is, to the leader of proc index to. It
// returns what the collective carries on with.
func (o *call) send(to int, tag int32, data []byte, err error) error {
	if err == coll.ErrAborted {
		return err
	}
	if o.logged {
		return o.append(to, tag, data, err)
	}
	return o.sendNet(to, tag, data, err)
}

// sendNet is send on the collective channel, in host mode too.
func (o *call) sendNet(to int, tag int32, data []byte, err error) error {
	m := Msg{Sig: o.sig, Data: data}
	if f, ok := err.(*errs.Error); ok {
		m.Fault, m.Data = uint64(f.Class), []byte(f.Detail)
	}
	serr := o.c.net.Send(o.c.procs[to], o.c.ctx, o.seq, tag, m)
	if serr != nil && serr != coll.ErrAborted {
		serr = o.fault(errs.ProcFailed, o.c.members[to][0], "sending to the leader of proc %d: %v", o.c.procs[to], serr)
	}
	return worse(err, serr)
}

// recv receives the message of step tag from the leader of proc index from: its
// data, or the fault it carries or that its signature shows (the procs made
// different calls), or coll.ErrAborted. A message of this call from any leader
// whose signature differs from ours also ends the wait, as that fault: the
// leaders then follow different steps, and the message awaited may never come.
func (o *call) recv(from int, tag int32) ([]byte, error) {
	if o.split != nil {
		return nil, o.split
	}
	if o.logged {
		return o.take(from, tag)
	}
	return o.recvNet(from, tag)
}

// recvNet is recv on the collective channel, in host mode too.
func (o *call) recvNet(from int, tag int32) ([]byte, error) {
	m, err := o.c.net.Recv(o.c.procs[from], o.c.ctx, o.seq, tag, o.sig)
	odd, isOdd := err.(*OddCall)
	switch {
	case isOdd:
		peer := errs.None
		if i, ok := o.c.index[odd.Proc]; ok {
			peer = o.c.members[i][0]
		}
		o.alarm()
		if odd.Sig == o.sig {
			return nil, o.fault(errs.Arg, peer, "the leader of proc %d (rank %d) found procs that made another call than collective call %d on this communicator (%v)", odd.Proc, peer, o.seq+1, o.k)
		}
		return nil, o.differs(peer, odd.Sig)
	case err != nil:
		return nil, err
	case m.Fault != 0:
		f := o.fault(errs.Class(m.Fault), errs.None, "%s", m.Data)
		return nil, f
	case m.Sig != o.sig:
		o.alarm()
		return nil, o.differs(o.c.members[from][0], m.Sig)
	}
	return m.Data, nil
}

// alarm tells every other proc's leader, once per call, that procs made different
// calls: the leaders follow the steps of different algorithms then, and a leader
// may wait for a message that none of the others will send (a leaf of the
// broadcast whose parent runs another collective), while no message of another
// call comes its way. The alarm ends its wait; it costs p-1 empty messages, and
// only on this error path.
func (o *call) alarm() {
	if o.alarmed {
		return
	}
	o.alarmed = true
	for i, p := range o.c.procs {
		if i != o.c.me {
			o.c.net.Send(p, o.c.ctx, o.seq, tagAlarm, Msg{Sig: o.sig}) // a failure means the job is ending anyway
		}
	}
}

// differs is the fault of a call whose signature differs from sig, peer's.
func (o *call) differs(peer int, sig uint64) *errs.Error {
	k, elem, root := kind(sig>>56), int(sig>>32&0xffffff), int(int32(uint32(sig)))
	switch {
	case k != o.k:
		return o.fault(errs.Arg, peer, "collective call %d on this communicator is %v here but %v on rank %d: every rank must call the same collectives in the same order", o.seq+1, o.k, k, peer)
	case root != o.root:
		return o.fault(errs.Root, peer, "root %d here but root %d on rank %d", o.root, root, peer)
	}
	return o.fault(errs.Count, peer, "elements of %d bytes here but of %d bytes on rank %d", o.elem, elem, peer)
}

// bcast is the leaders' binomial tree rooted at proc index root: a leader other
// than the root's receives data (or a fault) from its parent, then every leader
// sends it on to its children.
func (o *call) bcast(root int, data []byte, err error) ([]byte, error) {
	if err == coll.ErrAborted {
		return nil, err
	}
	p, me := len(o.c.procs), o.c.me
	rel, mask := (me-root+p)%p, 1
	for ; mask < p; mask <<= 1 {
		if rel&mask != 0 {
			if data, err = o.recv((me-mask+p)%p, tagDown); err == coll.ErrAborted {
				return nil, err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < p {
			if err = o.send((me+mask)%p, tagDown, data, err); err == coll.ErrAborted {
				return nil, err
			}
		}
	}
	return data, err
}

// reduce is the leaders' binomial tree towards proc index root, folding in the
// order of procs counted from root: a leader whose acc holds the fold of procs
// [me, me+mask) (relative to root) takes from its child the fold of
// [me+mask, me+2*mask) and computes acc op child. Rooted at 0 that is proc
// order, which a non-commutative fn needs. The root ends with the fold of every
// proc's acc; the others return nil data.
func (o *call) reduce(root int, acc []byte, fn coll.Op, err error) ([]byte, error) {
	if err == coll.ErrAborted {
		return nil, err
	}
	p := len(o.c.procs)
	rel := (o.c.me - root + p) % p
	abs := func(rel int) int { return (rel + root) % p }
	for mask := 1; mask < p; mask <<= 1 {
		if rel&mask != 0 {
			return nil, o.send(abs(rel-mask), tagUp, acc, err)
		}
		if rel+mask >= p {
			continue
		}
		child := abs(rel + mask)
		in, rerr := o.recv(child, tagUp)
		if err = worse(err, rerr); err == coll.ErrAborted {
			return nil, err
		}
		if err != nil {
			continue
		}
		if len(in) != len(acc) {
			err = o.lengths(o.c.members[o.c.me][0], len(acc), o.c.members[child][0], len(in))
			continue
		}
		if err = o.combine(fn, acc, in); err == nil {
			acc = in
		}
	}
	return acc, err
}

// disseminate is the leaders' dissemination barrier: in round r each leader
// sends to the one 2^r procs after it and waits for the one 2^r before it, so
// after ceil(log2 procs) rounds each has heard, through some chain, from every
// other, and a fault found anywhere has reached it. Its rounds are half the
// steps of a reduction and a broadcast (2 rounds against 4 message hops for 4
// procs, each hop a wait for another proc to run on a crowded host), for
// p*ceil(log2 p) messages instead of 2(p-1).
func (o *call) disseminate(err error, base int32) error {
	p, me := len(o.c.procs), o.c.me
	for r, d := int32(0), 1; d < p; r, d = r+1, d*2 {
		if err = o.send((me+d)%p, base+r, nil, err); err == coll.ErrAborted {
			return err
		}
		_, rerr := o.recv((me-d+p)%p, base+r)
		if err = worse(err, rerr); err == coll.ErrAborted {
			return err
		}
	}
	return err
}

// exchangeMax is the largest Allreduce (bytes per rank) whose leaders exchange
// by recursive doubling rather than reduce to proc index 0 and broadcast back:
// log2 P rounds against 2 log2 P hops, but every leader sends its whole vector
// each round, P log2 P vectors on the network against 2(P-1).
const exchangeMax = 64 << 10

// exchange is the leaders' Allreduce by recursive doubling, in proc order for a
// non-commutative fn (MPICH's scheme). With pof2 the largest power of two up to
// P and rem = P - pof2, the first 2 rem procs pair up: the even one hands its
// acc to the odd one, which folds it on its left, and sits out. The pof2 procs
// left, renumbered in order, then swap their folds with the one mask away for
// each mask < pof2, the lower one's fold on the left, so that each holds the
// fold of a block of procs twice as long after each round; at the end the odd
// ones hand the whole back. A fault travels in place of data, and reaches every
// leader, since every fold depends on every proc.
func (o *call) exchange(acc []byte, fn coll.Op, err error) ([]byte, error) {
	p, me := len(o.c.procs), o.c.me
	pof2 := 1
	for 2*pof2 <= p {
		pof2 *= 2
	}
	rem := p - pof2
	// fold sets acc to lo op hi, where one of them is acc and the other in,
	// from leader peer, unless either side already failed.
	fold := func(in []byte, rerr error, peer int, inLeft bool) {
		if err = worse(err, rerr); err != nil {
			return
		}
		if len(in) != len(acc) {
			err = o.lengths(o.c.members[me][0], len(acc), o.c.members[peer][0], len(in))
			return
		}
		if inLeft {
			err = o.combine(fn, in, acc)
			return
		}
		if err = o.combine(fn, acc, in); err == nil {
			acc = in
		}
	}
	newrank := me - rem
	if me < 2*rem {
		if me%2 == 0 {
			if err = o.send(me+1, tagUp, acc, err); err == coll.ErrAborted {
				return nil, err
			}
			newrank = -1
		} else {
			in, rerr := o.recv(me-1, tagUp)
			if rerr == coll.ErrAborted {
				return nil, rerr
			}
			fold(in, rerr, me-1, true)
			newrank = me / 2
		}
	}
	if newrank >= 0 {
		for r, mask := int32(0), 1; mask < pof2; r, mask = r+1, mask*2 {
			dst := newrank ^ mask
			if dst < rem {
				dst = 2*dst + 1
			} else {
				dst += rem
			}
			if err = o.send(dst, tagRound+r, acc, err); err == coll.ErrAborted {
				return nil, err
			}
			in, rerr := o.recv(dst, tagRound+r)
			if rerr == coll.ErrAborted {
				return nil, rerr
			}
			fold(in, rerr, dst, dst < me)
		}
	}
	if me < 2*rem {
		if me%2 == 1 {
			err = o.send(me-1, tagDown, acc, err)
		} else {
			var rerr error
			acc, rerr = o.recv(me+1, tagDown)
			err = worse(err, rerr)
		}
	}
	return acc, err
}

// lengths is the fault of two ranks whose buffers differ in length (in bytes).
func (o *call) lengths(a, la, b, lb int) *errs.Error {
	el := max(o.elem, 1)
	return o.fault(errs.Count, b, "rank %d has %d elements, rank %d has %d", a, la/el, b, lb/el)
}

// combine computes inout = in op inout, turning a panic of the user's function
// into an error.
func (o *call) combine(fn coll.Op, in, inout []byte) error {
	return o.guarded(func() { fn.Fold(in, inout) })
}

// combineAll sets acc to the fold of n pieces in order (coll.Op.FoldAll: four at a
// time where it can), turning a panic of the user's function into an error.
func (o *call) combineAll(fn coll.Op, piece func(p int) []byte, n int, acc []byte) error {
	return o.guarded(func() { fn.FoldAll(piece, n, acc) })
}

// guarded runs fold, a reduction's, and returns a panic of the user's function
// in it as an error.
func (o *call) guarded(fold func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = o.fault(errs.Op, errs.None, "the reduction function panicked: %v", p)
		}
	}()
	fold()
	return nil
}

// gather brings every leader's blob to proc index 0, one message from each:
// blobs[i] is proc index i's.
func (o *call) gather(blob []byte, err error) ([][]byte, error) {
	c := o.c
	if err == coll.ErrAborted {
		return nil, err
	}
	if c.me != 0 {
		return nil, o.send(0, tagUp, blob, err)
	}
	blobs := make([][]byte, len(c.procs))
	blobs[0] = blob
	for i := 1; i < len(c.procs); i++ {
		in, rerr := o.recv(i, tagUp)
		if err = worse(err, rerr); err == coll.ErrAborted {
			return nil, err
		}
		blobs[i] = in
	}
	return blobs, err
}

// toRoot takes the result at proc index 0 to the leader of the root's proc.
func (o *call) toRoot(data []byte, err error) ([]byte, error) {
	c := o.c
	switch ri := c.procOf[o.root]; {
	case err == coll.ErrAborted || ri == 0:
	case c.me == 0:
		err = o.send(ri, tagRoot, data, err)
	case c.me == ri:
		data, err = o.recv(0, tagRoot)
	}
	return data, err
}

// release ends a collective in this proc: the leader publishes the outcome, the
// proc's ranks meet in a local barrier, and each reads it.
func (o *call) release(err error, data []byte) (*outcome, error) {
	o.publish(err, data)
	if o.c.alone { // no rank to meet: the outcome is the leader's own
		return &o.c.out[o.seq%outcomes], nil
	}
	if berr := o.c.local.Barrier(o.lr); berr != nil {
		return nil, o.fromLocal(berr)
	}
	return o.outcome()
}

// publish stores the leader's outcome for its proc's ranks, which read it after a
// local collective that the leader joins after publishing, or wait for it (a
// Reduce's root: await). The slot is not reused before they have: the leader
// gets at most coll.Lead calls ahead of them (a small local Bcast's root returns
// at once, so a stream of Bcasts pipelines through every proc), and the
// communicator keeps twice as many.
func (o *call) publish(err error, data []byte) {
	if !o.leader() {
		return
	}
	out := &o.c.out[o.seq%outcomes]
	out.err, out.data = err, data
	if o.c.alone {
		return // the leader is the only rank: it reads it through release, nobody waits
	}
	// We store seq, then load wake; await stores wake, then loads seq.
	out.seq.Store(o.seq + 1)
	if ch := out.wake.Swap(nil); ch != nil {
		close(*ch)
	}
}

// await waits until the leader has published the outcome of the call, and
// returns it; coll.ErrAborted if the job ends or a proc is lost first.
func (o *call) await() (*outcome, error) {
	out := &o.c.out[o.seq%outcomes]
	published := func() bool { return out.seq.Load() == o.seq+1 }
	if published() || spin.Until(o.c.spin, published) { // published: a Reduce's root that leads its proc
		return out, nil
	}
	ch := make(chan struct{})
	out.wake.Store(&ch)
	if !published() {
		select {
		case <-ch:
		case <-o.c.net.aborted:
			return nil, coll.ErrAborted
		case <-o.c.net.lost:
			return nil, coll.ErrAborted
		}
	}
	return out, nil
}

func (o *call) outcome() (*outcome, error) {
	out := &o.c.out[o.seq%outcomes]
	if out.seq.Load() != o.seq+1 {
		return nil, o.fault(errs.Intern, errs.None, "the outcome of collective %d was not published", o.seq+1)
	}
	return out, nil
}

// finish returns the calling rank's error: err, else the outcome's, the ranks in
// it named from the caller's point of view.
func (o *call) finish(out *outcome, err error) error {
	if err == nil && out != nil {
		err = out.err
	}
	if f, ok := err.(*errs.Error); ok && f.Rank != o.rank {
		g := *f
		g.Rank = o.rank
		return &g
	}
	return err
}

// Barrier returns once every rank of c has called it: a local barrier, the
// leaders' dissemination, and the release.
func (c *Comm) Barrier(rank int) error {
	var o call
	c.start(&o, rank, coll.KindBarrier, 0, 0)
	o.arrive()
	err := o.sameCall(o.fromLocal(c.local.Barrier(o.lr)))
	switch {
	case o.leader() && c.host != nil:
		err = o.hostBarrier(err)
	case o.leader():
		err = o.disseminate(err, tagRound)
	}
	out, rerr := o.release(err, nil)
	return o.finish(out, worse(err, rerr))
}

// Bcast copies the root's buf into every other rank's. In the root's proc the
// ranks run a local Bcast from the root, then the leader sends the data down the
// leaders' tree; in the others the leader receives it, and the proc's ranks run
// a local Bcast from the leader. A rank whose buffer's length differs from the
// root's gets an error, and so do the ranks of its proc; the root is not told.
func (c *Comm) Bcast(rank int, buf []byte, elem, root int) error {
	var o call
	c.start(&o, rank, coll.KindBcast, root, elem)
	ri := c.procOf[root]
	if ri == c.me {
		err := o.fromLocal(c.local.Bcast(o.lr, buf, elem, c.lrank[root]))
		switch {
		case o.leader() && c.host != nil:
			err = o.hostBcast(buf, err)
		case o.leader():
			_, err = o.bcast(ri, buf, err)
		}
		return o.finish(nil, err)
	}
	var err error
	switch {
	case o.leader() && c.host != nil:
		err = o.hostBcastInto(ri, buf)
	case o.leader():
		var data []byte
		if data, err = o.bcast(ri, nil, nil); err == nil {
			if len(data) != len(buf) {
				class := errs.Count
				if len(data) > len(buf) {
					class = errs.Truncate
				}
				err = o.fault(class, root, "the root has %d elements, rank %d has %d", len(data)/max(elem, 1), rank, len(buf)/max(elem, 1))
			} else {
				copy(buf, data)
			}
		}
	}
	if c.alone { // no rank of ours to pass it on to
		return o.finish(nil, err)
	}
	o.publish(err, nil)
	lerr := o.fromLocal(c.local.Bcast(o.lr, buf, elem, 0))
	if lerr != nil {
		return o.finish(nil, lerr)
	}
	return o.finish(o.outcome())
}

// Reduce combines the ranks' send buffers in rank order into the root's recv, as
// coll.Comm.Reduce does. When every proc's ranks are consecutive, or the op is
// commutative, each proc folds its own ranks' contributions locally and the
// leaders fold the procs' partial results in proc order up a binomial tree;
// otherwise every proc's contributions go to proc index 0, which folds them all
// in rank order. Only the root waits for the result: the other ranks leave once
// their part is in, and learn only of the faults their own steps find.
func (c *Comm) Reduce(rank int, send, recv []byte, elem int, fn coll.Op, commutative bool, root int) error {
	return c.reduce(coll.KindReduce, rank, root, send, recv, elem, fn, commutative)
}

// Allreduce is Reduce with the result in every rank's recv: the leaders broadcast
// it from proc index 0.
func (c *Comm) Allreduce(rank int, send, recv []byte, elem int, fn coll.Op, commutative bool) error {
	return c.reduce(coll.KindAllreduce, rank, 0, send, recv, elem, fn, commutative)
}

func (c *Comm) reduce(k kind, rank, root int, send, recv []byte, elem int, fn coll.Op, commutative bool) error {
	var o call
	c.start(&o, rank, k, root, elem)
	o.arrive()
	folds := c.consecutive || commutative // the leaders can fold in proc order
	exchange := k == coll.KindAllreduce && folds && len(send) <= exchangeMax
	// A commutative Reduce folds up a tree rooted at the root's proc; in proc
	// order (rooted at proc index 0) the result takes one more hop to the root.
	top := 0
	if k == coll.KindReduce && commutative {
		top = c.procOf[root]
	}
	var total []byte
	var err error
	hosted := o.leader() && folds && c.host != nil // the leaders fold in the segment (only they may read c.host)
	if folds {
		var acc []byte
		switch {
		case hosted && (k == coll.KindAllreduce || len(send) <= HostData):
			// Free again at the next call: the leader folds its ranks into it and
			// copies it into the entry (a Reduce's larger part goes on the channel:
			// its own memory).
			acc = c.host.scratch(0, len(send))
		case o.leader():
			acc = make([]byte, len(send))
		}
		err = o.sameCall(o.fromLocal(c.local.Reduce(o.lr, send, acc, elem, fn, 0)))
		switch {
		case hosted:
			total, err = o.hostFold(c.procOf[root], acc, fn, err)
		case !o.leader() || err == coll.ErrAborted:
		case exchange:
			total, err = o.exchange(acc, fn, err)
		default:
			total, err = o.reduce(top, acc, fn, err)
		}
	} else {
		if o.leader() && c.host != nil {
			o.logs()
		}
		blobs, gerr := o.collect(send, elem)
		err = gerr
		if o.leader() && c.me == 0 && err == nil {
			total, err = o.fold(blobs, len(send), fn)
		}
	}
	if o.leader() && !exchange && !hosted {
		switch {
		case k == coll.KindAllreduce:
			total, err = o.bcast(0, total, err)
		case top == 0:
			total, err = o.toRoot(total, err)
		}
	}
	if o.logged {
		o.finished()
	}
	var out *outcome
	var rerr error
	switch {
	case k == coll.KindAllreduce || c.alone: // alone: the leader's own outcome, a Reduce's root's or not
		out, rerr = o.release(err, total)
	case rank != root:
		// The other ranks of a Reduce leave without the outcome, as in one proc
		// where they leave once their contribution is in: a stream of Reduces
		// then pipelines through every proc.
		o.publish(err, total)
		return o.finish(nil, err)
	default:
		o.publish(err, total)
		out, rerr = o.await()
	}
	if err = worse(err, rerr); err == nil && out.err == nil {
		copy(recv, out.data)
	}
	return o.finish(out, err)
}

// collect gathers the ranks' sends to the leader of each proc (a local Gather),
// then the procs' to proc index 0, whose leader returns them by proc index.
func (o *call) collect(send []byte, elem int) ([][]byte, error) {
	blob, err := o.gatherLocal(send, elem)
	if !o.leader() || err == coll.ErrAborted {
		return nil, err
	}
	return o.gather(blob, err)
}

// gatherLocal gathers the ranks' sends to the leader of each proc (a local
// Gather), which returns them in rank order.
func (o *call) gatherLocal(send []byte, elem int) ([]byte, error) {
	var blob []byte
	if o.leader() {
		blob = make([]byte, len(o.c.members[o.c.me])*len(send))
	}
	return blob, o.sameCall(o.fromLocal(o.c.local.Gather(o.lr, &coll.Part{Send: send, Recv: blob, RecvBlock: len(send)}, elem, 0)))
}

// blocks checks that proc index i's blob holds a block of m bytes for each of its
// ranks, and returns rank r's block.
func (o *call) blocks(blobs [][]byte, m int) (func(r int) []byte, error) {
	for i, b := range blobs {
		if want := len(o.c.members[i]) * m; len(b) != want {
			lead := o.c.members[i][0]
			return nil, o.lengths(o.rank, m, lead, len(b)/max(len(o.c.members[i]), 1))
		}
	}
	c := o.c // not o, which would then escape
	return func(r int) []byte {
		j := c.lrank[r]
		return blobs[c.procOf[r]][j*m : (j+1)*m]
	}, nil
}

// fold combines every rank's contribution (m bytes each), in rank order.
func (o *call) fold(blobs [][]byte, m int, fn coll.Op) ([]byte, error) {
	at, err := o.blocks(blobs, m)
	if err != nil {
		return nil, err
	}
	acc := make([]byte, m)
	if err := o.combineAll(fn, at, o.c.n, acc); err != nil {
		return nil, err
	}
	return acc, nil
}

// assemble puts every rank's block (m bytes) in rank order.
func (o *call) assemble(blobs [][]byte, m int) ([]byte, error) {
	at, err := o.blocks(blobs, m)
	if err != nil {
		return nil, err
	}
	full := make([]byte, 0, o.c.n*m)
	for r := range o.c.n {
		full = append(full, at(r)...)
	}
	return full, nil
}

// Gather puts every rank's send, in rank order, into the root's recv (blocks of
// len(send) bytes, which must be the same on every rank): a local Gather in each
// proc, the procs' blocks to proc index 0, and the whole to the root's proc.
func (c *Comm) Gather(rank int, send, recv []byte, elem, root int) error {
	return c.gather(coll.KindGather, rank, root, send, recv, elem)
}

// Allgather is Gather with the result in every rank's recv: the leaders broadcast
// it from proc index 0.
func (c *Comm) Allgather(rank int, send, recv []byte, elem int) error {
	return c.gather(coll.KindAllgather, rank, 0, send, recv, elem)
}

func (c *Comm) gather(k kind, rank, root int, send, recv []byte, elem int) error {
	var o call
	c.start(&o, rank, k, root, elem)
	o.arrive()
	var blobs [][]byte
	var full []byte
	var err error
	hosted := false // the leaders gathered in the segment
	if o.leader() && c.host != nil {
		var blob []byte
		if blob, err = o.gatherLocal(send, elem); err != coll.ErrAborted {
			if full, hosted, err = o.hostGather(blob, len(send), err); !hosted {
				blobs, err = o.gather(blob, err)
			}
		}
	} else {
		blobs, err = o.collect(send, elem)
	}
	if o.leader() && !hosted {
		if c.me == 0 && err == nil {
			full, err = o.assemble(blobs, len(send))
		}
		if k == coll.KindAllgather {
			full, err = o.bcast(0, full, err)
		} else {
			full, err = o.toRoot(full, err)
		}
		if got := len(full); err == nil && (k == coll.KindAllgather || c.procOf[root] == c.me) && got != c.n*len(send) {
			err = o.lengths(o.rank, len(send), 0, got/c.n)
		}
	}
	out, rerr := o.release(err, full)
	if err = worse(err, rerr); err == nil && out.err == nil && (k == coll.KindAllgather || rank == root) {
		copy(recv, out.data)
	}
	return o.finish(out, err)
}
