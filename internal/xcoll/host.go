package xcoll

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/shmem"
	"github.com/weft-mpi/weft/internal/spin"
)

// When every proc of a communicator runs on one host, its leaders meet in a
// segment of memory they all map instead of on the collective channel (host
// mode): a message between two procs costs a write into a ring, a turn of the
// reader's receive daemon and a hand-over to the waiting leader, where the
// segment costs a store and a load. Every call of the communicator has an entry
// per proc in the segment, which the proc's leader writes at the start of the
// call whatever the collective: the call's signature and, for Barrier, Bcast,
// Reduce, Allreduce, Gather, Allgather, Scatter, Scan and Exscan, its part (the
// root's data, a proc's fold, blocks or sends, a fault), or for the other
// collectives a log of the messages of the channel's algorithm (hostlog.go). The others read
// what their collective needs. So a proc that waits for another's entry is never
// left waiting by a proc that made another call: it finds the other signature
// there (or in the Bcast root's entry, when one of the Bcast's other procs found
// the root's data there and did not post). The segment holds the entries of
// hostSlots(procs) calls; a leader writes its entry of call s once every proc is
// done with call s-hostSlots, which also bounds how far a Bcast's root runs ahead.

// hostSlots is how many calls' entries the segment of procs procs holds: 64, or
// more while the entries fit 1 MiB, up to 256. On a host with more procs than
// CPUs a Bcast's root posts until it is that far ahead, then waits until its
// procs are half as far behind, and its procs take turns on the CPUs between:
// the further it runs, the fewer turns a call costs (1x4 Bcast of 8 bytes,
// same root, 11 rounds interleaved on 2026-12-01: median 0.36 µs with 256
// slots against 0.48 with 64, Open MPI 0.55; 4x4 unchanged, 1.14 against 1.12).
func hostSlots(procs int) int { // a power of two (see entry)
	n := 64
	for n < 256 && 2*n*procs*entryBytes <= 1<<20 {
		n *= 2
	}
	return n
}

const (
	entryBytes = 1024 // one proc's entry of one call
	entryHead  = 32   // its head: seq+1, signature, what it holds, length, fault class
	// HostData is the largest part (bytes) that an entry carries; a larger one
	// goes on the collective channel, and the entry says so.
	HostData = entryBytes - entryHead
	// HostProcs is the most procs a communicator may have in host mode.
	HostProcs = 64
	lineBytes = 64
	hostPoll  = time.Millisecond     // how long a wait polls the segment before it sleeps
	hostNap   = 5 * time.Millisecond // the longest sleep before it looks at the job's end
)

// The segment: a line of the creator's nonce, a line of the bell (the futex word
// sleepers wait on), a line counting the sleepers, a line per proc with the
// number (plus one) of the last call it is done with, then the entries, by call
// mod hostSlots, then proc, then the large areas (hostbig.go).
const (
	offNonce    = 0
	offBell     = lineBytes
	offSleepers = 2 * lineBytes
	offDone     = 3 * lineBytes
)

// What an entry holds.
const (
	entNone  = 1 + iota // no part: the proc's call sends nothing here
	entData             // the part, in the entry
	entNet              // the part, on the collective channel
	entFault            // the class of a fault the proc met, and its detail
	entBig              // the part's length: the part goes through the large areas
	entLog              // the messages of the channel's algorithm (hostlog.go)
)

// segmentBytes is the size of the segment of a communicator of procs procs.
func segmentBytes(procs int) int {
	return offDone + procs*lineBytes + hostSlots(procs)*procs*entryBytes + procs*lineBytes + (procs+2)*bigChunk(procs)
}

// host is a communicator's segment as this proc's leader sees it.
type host struct {
	seg       *shmem.Segment
	procs     int
	slots     int  // hostSlots(procs)
	me        int  // our proc's index
	crowded   bool // more procs on the host than CPUs: yield the CPU between looks
	bell      *atomic.Uint32
	sleepers  *atomic.Uint32
	free      uint64    // every proc was done with this many calls when we last looked
	chunk     int       // bytes of a proc's large area (hostbig.go)
	chunks    uint64    // chunks of large Allreduces so far, the same on every proc
	scratches [2][]byte // see scratch
	parts     [][]byte  // by proc index, for hostFold
	blocks    [][]byte  // unpacked blocks (hostScatterInto, hostScan)
	sends     [][]byte  // by rank, for hostScan
	lens      []int     // their lengths
}

func (h *host) done(p int) *atomic.Uint64 { return h.seg.Word64(offDone + p*lineBytes) }

// entries is the offset of the entries.
func (h *host) entries() int { return offDone + h.procs*lineBytes }

// entry is proc p's entry of call seq.
func (h *host) entry(seq uint64, p int) entry {
	off := h.entries() + (int(seq&uint64(h.slots-1))*h.procs+p)*entryBytes // slots is a power of two: no division
	return entry{h.seg.Mem[off : off+entryBytes : off+entryBytes]}
}

// entry is one proc's entry of one call: its head's words, then the part.
type entry struct{ b []byte }

func (e entry) seq() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&e.b[0])) }

// head reads what the entry holds; its length is checked, since another proc
// wrote it.
func (e entry) head() (sig uint64, what, class uint32, data []byte, err error) {
	h := (*[entryHead]byte)(e.b) // one bounds check for the fields' loads
	sig = binary.LittleEndian.Uint64(h[8:])
	what = binary.LittleEndian.Uint32(h[16:])
	class = binary.LittleEndian.Uint32(h[20:])
	n := binary.LittleEndian.Uint32(h[24:])
	if n > HostData || what < entNone || what > entLog {
		return 0, 0, 0, nil, corrupt(what, n)
	}
	return sig, what, class, e.b[entryHead : entryHead+int(n)], nil
}

// corrupt is head's error, out of its way: building it there spilled the
// fields on every call.
//
//go:noinline
func corrupt(what, n uint32) error {
	return fmt.Errorf("xcoll: corrupt entry in the host segment (holds %d, length %d)", what, n)
}

// waitFor polls cond until it holds; coll.ErrAborted if the job ends or a proc
// is lost first. On a crowded host it yields the CPU between looks, to the proc
// it waits for; after hostPoll it sleeps on the bell between looks.
func (o *call) waitFor(cond func() bool) error {
	h, n := o.c.host, o.c.net
	var start time.Time
	for i := 1; ; i++ {
		if cond() {
			return nil
		}
		if i%64 == 0 {
			if n.ended() {
				return coll.ErrAborted
			}
			switch {
			case start.IsZero():
				start = time.Now()
			case time.Since(start) > hostPoll:
				h.sleep(cond)
				continue
			}
			runtime.Gosched()
		}
		if h.crowded {
			runtime.Gosched()
			spin.Yield()
		}
	}
}

// sleep sleeps on the bell unless cond holds. It counts itself in the sleepers
// before its last look, and whoever changes what cond looks at then loads their
// number (ring): Go's atomics are sequentially consistent, so either that look
// sees the change or the ringer sees the sleeper.
func (h *host) sleep(cond func() bool) {
	b := h.bell.Load()
	h.sleepers.Add(1)
	if !cond() {
		shmem.Sleep(h.bell, b, hostNap)
	}
	h.sleepers.Add(^uint32(0))
}

// ring wakes the sleepers, if any, after a change to the segment.
func (h *host) ring() {
	if h.sleepers.Load() > 0 {
		h.bell.Add(1)
		shmem.Wake(h.bell)
	}
}

// post writes our proc's entry of the call: what it holds and data (the part,
// or a fault's detail), once every proc is done with the call that last used
// the entry. A proc that ran that far ahead (a Bcast's root) waits until every
// proc is half the slots behind, so that it then posts that many calls without
// reading the others' done lines again: else it read them at every call, and
// each proc's next write of its line waited for the line to come back. The
// sequence number goes last, with a Swap: under the race detector a Store
// outside Go's heap is a plain move, which ring's load could pass (see
// internal/transport/shm).
func (o *call) post(what uint32, class uint32, data []byte) error {
	h := o.c.host
	slots := uint64(h.slots)
	if need := o.seq + 1; need > h.free+slots {
		err := o.waitFor(func() bool {
			h.free = h.done(h.me).Load()
			for p := range h.procs {
				h.free = min(h.free, h.done(p).Load())
			}
			return need+slots/2 <= h.free+slots
		})
		if err != nil {
			return err
		}
	}
	e := h.entry(o.seq, h.me)
	data = data[:min(len(data), HostData)]
	binary.LittleEndian.PutUint64(e.b[8:], o.sig)
	binary.LittleEndian.PutUint32(e.b[16:], what)
	binary.LittleEndian.PutUint32(e.b[20:], class)
	binary.LittleEndian.PutUint32(e.b[24:], uint32(len(data)))
	copy(e.b[entryHead:], data)
	e.seq().Swap(o.seq + 1)
	h.ring()
	return nil
}

// postPart posts our proc's part: in the entry if it fits, else on the channel
// (the entry says so, and the caller sends it), or err's fault instead.
func (o *call) postPart(part []byte, err error) (onNet bool, perr error) {
	if f, ok := err.(*errs.Error); ok {
		return false, o.post(entFault, uint32(f.Class), []byte(f.Detail))
	}
	if len(part) > HostData {
		return true, o.post(entNet, 0, nil)
	}
	return false, o.post(entData, 0, part)
}

// finished tells the other procs that our proc is done with the call's entries.
func (o *call) finished() {
	h := o.c.host
	h.done(h.me).Swap(o.seq + 1)
	h.ring()
}

// read waits for proc index p's entry of the call and returns what it holds:
// its part, or the fault it carries, or the fault of a proc that made another
// call (after which the leader alarms the procs on the channel, which may wait
// for messages of ours). While it waits it also looks, now and then, at every
// proc's entry, since a Bcast's other procs post theirs only when they have to
// wait (hostBcastInto): a proc whose call differs from theirs finds the root's.
// The part stays valid until the call is finished.
func (o *call) read(p int) (what uint32, data []byte, err error) {
	if o.split != nil {
		return 0, nil, o.split
	}
	h := o.c.host
	e := h.entry(o.seq, p)
	if e.seq().Load() != o.seq+1 { // else no wait to set up
		looks := 0
		err = o.waitFor(func() bool {
			if e.seq().Load() == o.seq+1 {
				return true
			}
			if looks++; looks%64 == 0 {
				if q := o.odd(); q >= 0 {
					p, e = q, h.entry(o.seq, q)
					return true
				}
			}
			return false
		})
		if err != nil {
			return 0, nil, err
		}
	}
	sig, what, class, data, err := e.head()
	switch {
	case err != nil:
		return 0, nil, o.fault(errs.Intern, o.c.members[p][0], "%v", err)
	case sig != o.sig:
		o.alarm()
		return 0, nil, o.differs(o.c.members[p][0], sig)
	case what == entFault:
		return 0, nil, o.fault(errs.Class(class), errs.None, "%s", data)
	}
	return what, data, nil
}

// posted returns the part in e, a proc's entry of the call, if the entry is
// posted with our call's signature and its part in it: read's common case,
// without read's call and the wait it may set up, for the loops over every
// proc's entry (a 1x4 Barrier spent a third of its instructions in three reads).
// Anything else is for read to wait for or report.
func (o *call) posted(e entry) ([]byte, bool) {
	h := (*[entryHead]byte)(e.b)
	if e.seq().Load() != o.seq+1 || binary.LittleEndian.Uint64(h[8:]) != o.sig || binary.LittleEndian.Uint32(h[16:]) != entData {
		return nil, false
	}
	if n := binary.LittleEndian.Uint32(h[24:]); n <= HostData {
		return e.b[entryHead : entryHead+n], true
	}
	return nil, false
}

// odd returns the index of a proc whose entry of the call holds another
// signature than ours, or -1.
func (o *call) odd() int {
	h := o.c.host
	for q := range h.procs {
		e := h.entry(o.seq, q)
		if e.seq().Load() == o.seq+1 && binary.LittleEndian.Uint64(e.b[8:]) != o.sig {
			return q
		}
	}
	return -1
}

// misses is the fault of a proc whose entry lacks the part the call needs: it
// went another way through the call (the procs disagree on something the
// signature does not name, such as whether the op commutes).
func (o *call) misses(p int) error {
	o.alarm()
	peer := o.c.members[p][0]
	return o.fault(errs.Arg, peer, "the leader of proc %d (rank %d) gave no part to collective call %d on this communicator (%v)", o.c.procs[p], peer, o.seq+1, o.k)
}

// hostBarrier is Barrier's leaders' step in host mode: every proc posts its
// entry, then waits for every other's.
func (o *call) hostBarrier(err error) error {
	if err == coll.ErrAborted {
		return err
	}
	_, perr := o.postPart(nil, err)
	err = worse(err, perr)
	for p := range o.c.host.procs {
		if p == o.c.me || err != nil {
			continue
		}
		if _, ok := o.posted(o.c.host.entry(o.seq, p)); !ok || o.split != nil {
			_, _, err = o.read(p)
		}
	}
	o.finished()
	return err
}

// hostBcast is Bcast's leaders' step in host mode at the root's proc: it posts
// data (or sends it on the channel, down the tree, if it does not fit).
func (o *call) hostBcast(data []byte, err error) error {
	if err == coll.ErrAborted {
		return err
	}
	onNet, perr := o.postPart(data, err)
	o.finished()
	if perr != nil {
		return perr
	}
	if onNet {
		_, err = o.bcast(o.c.me, data, err)
	}
	return err
}

// hostBcastInto is Bcast's leaders' step in host mode at the other procs: it
// copies the root's data from proc index root's entry, or receives it down the
// tree, into buf, whose length must be the root's. It posts its own entry only
// if the root's is not there yet: in a stream of Bcasts the root is ahead, and
// P-1 posts a call were as many cache lines taken from the procs that read them
// last. A proc that makes another call then finds the root's entry (read); one
// that would wait for ours finds ours, since we wait only after posting it.
func (o *call) hostBcastInto(root int, buf []byte) error {
	if o.c.host.entry(o.seq, root).seq().Load() != o.seq+1 {
		if err := o.post(entNone, 0, nil); err != nil {
			return err
		}
	}
	defer o.finished()
	what, data, err := o.read(root)
	switch {
	case err != nil:
		return err
	case what == entNet:
		if data, err = o.bcast(root, nil, nil); err != nil {
			return err
		}
	case what != entData:
		return o.misses(root)
	}
	if len(data) != len(buf) {
		class := errs.Count
		if len(data) > len(buf) {
			class = errs.Truncate
		}
		return o.fault(class, o.root, "the root has %d elements, rank %d has %d", len(data)/max(o.elem, 1), o.rank, len(buf)/max(o.elem, 1))
	}
	copy(buf, data)
	return nil
}

// hostFold is the leaders' step of Reduce and Allreduce in host mode: every
// proc posts its fold acc, and the procs that need the result (every one for
// an Allreduce, the root's for a Reduce) fold the procs' folds in proc order,
// which keeps rank order since every proc's ranks are consecutive or the op
// commutes. Every proc of an Allreduce computes the same fold, so all get the
// same bits. A Reduce's part that does not fit an entry goes on the channel,
// to the root's proc; an Allreduce's goes through the segment's large areas
// (bigAllreduce), which every proc knows to use since it reads every entry.
func (o *call) hostFold(root int, acc []byte, fn coll.Op, err error) ([]byte, error) {
	if err == coll.ErrAborted {
		return nil, err
	}
	c, h := o.c, o.c.host
	all := o.k == coll.KindAllreduce
	if !all && c.me != root {
		return nil, o.give(root, acc, err)
	}
	big := all && len(acc) > HostData
	var perr error
	switch {
	case !all:
		perr = o.post(entNone, 0, nil)
	case big && err == nil:
		perr = o.post(entBig, 0, binary.LittleEndian.AppendUint64(nil, uint64(len(acc))))
	default:
		_, perr = o.postPart(acc, err)
	}
	if err = worse(err, perr); err != nil {
		o.finished()
		return nil, err
	}
	defer o.finished()
	parts, lens := h.parts, h.lens
	_, othersBig, err := o.readParts(acc, parts, lens)
	switch {
	case err != nil:
		return nil, err
	case big || othersBig:
		if err := o.sameLengths(lens); err != nil {
			return nil, err
		}
		return o.bigAllreduce(acc, fn)
	}
	if err := o.sameLengths(lens); err != nil {
		return nil, err
	}
	return o.foldParts(parts, fn)
}

// hostGather is the leaders' step of Gather and Allgather in host mode
// (hostBlobs): the procs that need the blocks put them in rank order, m bytes
// a rank.
func (o *call) hostGather(blob []byte, m int, err error) (full []byte, hosted bool, _ error) {
	hosted, err = o.hostBlobs(blob, err, func(blobs [][]byte) (err error) {
		full, err = o.assemble(blobs, m)
		return err
	})
	return full, hosted, err
}

// hostBlobs is the leaders' step of Gather, Allgather and Allgatherv in host
// mode: every proc posts its ranks' blocks (blob), and the procs that need
// them (every one, but for a Gather only the root's) give every proc's, by proc
// index, to use, while they are valid. A blob longer than an entry goes on the
// channel: a Gather's to the root's proc; the others with such a blob anywhere
// run on the channel on every proc (hosted false), since every proc sees every
// entry.
func (o *call) hostBlobs(blob []byte, err error, use func(blobs [][]byte) error) (hosted bool, _ error) {
	c := o.c
	all := o.k != coll.KindGather
	root := c.procOf[o.root]
	if !all && c.me != root {
		return true, o.give(root, blob, err)
	}
	onNet, perr := o.postPart(blob, err)
	defer o.finished()
	if err = worse(err, perr); err != nil {
		return true, err
	}
	blobs := c.host.parts // valid for the call, as hostFold's
	othersNet, _, err := o.readParts(blob, blobs, c.host.lens)
	switch {
	case err != nil:
		return true, err
	case othersNet || all && onNet: // a Gather's root does not send its own
		return false, nil
	}
	return true, use(blobs)
}

// give posts our proc's part for the root's proc (proc index root) and is done
// with the call: the part is in the entry, or sent to the root's proc on the
// channel when it does not fit.
func (o *call) give(root int, part []byte, err error) error {
	onNet, perr := o.postPart(part, err)
	o.finished()
	switch {
	case perr != nil:
		return perr
	case onNet:
		return o.sendNet(root, tagUp, part, err)
	}
	return err
}

// readParts waits for every other proc's entry of the call and puts its part
// in parts and its length in lens, by proc index (ours is own). An Allreduce's
// or Allgather's part on the channel is not received: every proc sees it and
// the call goes another way (onNet); a Reduce's or Gather's is, from the
// proc, by the root's. An Allreduce's part in the large areas gives its length
// alone (big). Every entry is read whatever the faults, unless the job ends.
func (o *call) readParts(own []byte, parts [][]byte, lens []int) (onNet, big bool, err error) {
	all := o.k != coll.KindReduce && o.k != coll.KindGather
	for p := range parts {
		if p == o.c.me {
			parts[p], lens[p] = own, len(own)
			continue
		}
		data, ok := o.posted(o.c.host.entry(o.seq, p))
		what, rerr := uint32(entData), error(nil)
		if !ok || o.split != nil {
			what, data, rerr = o.read(p)
		}
		lens[p] = len(data)
		switch {
		case rerr != nil:
			err = worse(err, rerr)
		case what == entBig && len(data) == 8:
			big = true
			lens[p], data = int(min(binary.LittleEndian.Uint64(data), 1<<62)), nil
		case what == entNet && all:
			onNet = true
		case what == entNet:
			data, rerr = o.recvNet(p, tagUp)
			lens[p] = len(data)
			err = worse(err, rerr)
		case what != entData:
			err = worse(err, o.misses(p))
		}
		if err == coll.ErrAborted {
			return false, false, err
		}
		parts[p] = data
	}
	return onNet, big, err
}

// scan is the leaders' share of Scan and Exscan: prefix, or in host mode, when
// every proc's sends fit an entry (judged by our length, the same everywhere
// when the ranks agree; a proc that judges otherwise finds the others' entries
// are not logs, and they that its entry is), hostScan.
func (o *call) scan(ps []coll.Part, err error) error {
	c := o.c
	if c.host == nil {
		return o.prefix(ps, err)
	}
	m := len(ps[0].Send)
	for _, ranks := range c.members {
		if 8*(1+len(ranks))+len(ranks)*m > HostData {
			o.logs()
			return o.prefix(ps, err)
		}
	}
	return o.hostScan(ps, err)
}

// hostScan is Scan's and Exscan's leaders' step in host mode: every proc posts
// its ranks' sends, and reads only the entries of the procs with ranks below
// its last, so that no proc waits for one above it and a stream of Scans
// pipelines. It folds in rank order, in the host's scratch memory: a Scan
// that allocated its blocks and prefixes took 1.5-1.9 µs at 1x4.
func (o *call) hostScan(ps []coll.Part, err error) error {
	c, h := o.c, o.c.host
	var blob []byte
	if err == nil {
		blob = h.pack(len(ps), func(j int) []byte { return ps[j].Send })
	}
	_, perr := o.postPart(blob, err)
	defer o.finished()
	if err = worse(err, perr); err != nil {
		return err
	}
	mine := c.members[c.me]
	last := mine[len(mine)-1]
	x := slices.Grow(h.sends[:0], last+1)[:last+1] // the sends of ranks 0 to last
	h.sends = x
	for p, ranks := range c.members {
		if ranks[0] > last {
			continue
		}
		if p == c.me {
			for j, r := range ranks {
				x[r] = ps[j].Send
			}
			continue
		}
		what, data, err := o.read(p)
		switch {
		case err != nil:
			return err
		case what != entData:
			return o.misses(p)
		}
		blocks, err := o.unpack(h.blocks, data, len(ranks), p)
		if err != nil {
			return err
		}
		h.blocks = blocks
		for j, r := range ranks {
			if r <= last {
				x[r] = blocks[j]
			}
		}
	}
	return o.prefixes(ps, x)
}

// prefixes folds the sends x of ranks 0 to our proc's last in rank order and
// stores each of our ranks' prefix (its own send included for a Scan, not for
// an Exscan) in its receive buffer, as store does.
func (o *call) prefixes(ps []coll.Part, x [][]byte) error {
	c, h := o.c, o.c.host
	m := len(x[0])
	for r := range x {
		if len(x[r]) != m {
			return o.fault(errs.Count, r, "rank 0 has %d elements, rank %d has %d", o.els(m), r, o.els(len(x[r])))
		}
	}
	mine := c.members[c.me]
	for i, r := range mine {
		if o.k == coll.KindExscan && r == 0 {
			continue
		}
		if m > len(ps[i].Recv) {
			return o.fault(errs.Count, errs.None, "the receive buffer of rank %d holds %d elements, fewer than the %d of its result", r, o.els(len(ps[i].Recv)), o.els(m))
		}
	}
	// acc[k%2] is x0 op ... op x(k), the prefix of rank k; our ranks ascend.
	mem := h.scratch(1, 2*m)
	acc := [2][]byte{mem[:m:m], mem[m:]}
	copy(acc[0], x[0])
	k := 0
	for i, r := range mine {
		if o.k == coll.KindExscan {
			r-- // the prefix of the rank before
		}
		if r < 0 {
			continue // an Exscan's rank 0: no result
		}
		for ; k < r; k++ {
			next := acc[(k+1)%2]
			copy(next, x[k+1])
			if err := o.combine(o.fn, acc[k%2], next); err != nil {
				return err
			}
		}
		coll.Move(ps[i].Recv[:m], acc[k%2])
	}
	return nil
}

// sameLengths checks that every proc's part is as long as ours.
func (o *call) sameLengths(lens []int) error {
	mine := lens[o.c.me]
	for p, n := range lens {
		if n != mine {
			return o.lengths(o.c.members[o.c.me][0], mine, o.c.members[p][0], n)
		}
	}
	return nil
}

// foldParts returns parts[0] op parts[1] op ... (all of one length) in a new
// buffer.
func (o *call) foldParts(parts [][]byte, fn coll.Op) ([]byte, error) {
	total := o.c.host.scratch(1, len(parts[len(parts)-1]))
	if err := o.combineAll(fn, func(p int) []byte { return parts[p] }, len(parts), total); err != nil {
		return nil, err
	}
	return total, nil
}

// hostSeq is the sequence number of the host-mode set-up's messages on the
// channel: no call has it, so the calls' alarms and signatures never touch them.
const hostSeq = 1<<64 - 1

// The set-up's steps, as tags.
const (
	tagOffer   int32 = 1 + iota // proc index 0 names its segment: pid, descriptor, nonce
	tagMapped                   // each other proc says whether it mapped it
	tagVerdict                  // proc index 0 says whether every proc did
)

// setUp makes the communicator's segment, at its first call, if every proc of
// it runs on this host: proc index 0 creates it and names it to the others
// (its pid, the descriptor, a random nonce written in the segment), each other
// proc opens it through /proc (so no file is ever left behind) and checks the
// nonce, and proc index 0 tells them all whether every proc mapped it. The
// answer is the same everywhere: host mode, or the channel as before.
func (c *Comm) setUp() {
	size := segmentBytes(len(c.procs))
	send := func(p int, tag int32, data []byte) error {
		return c.net.Send(c.procs[p], c.ctx, hostSeq, tag, Msg{Data: data})
	}
	recv := func(p int, tag int32) []byte {
		m, err := c.net.Recv(c.procs[p], c.ctx, hostSeq, tag, 0)
		if err != nil {
			return nil
		}
		return m.Data
	}
	var seg *shmem.Segment
	ok := true
	if c.me == 0 {
		var offer []byte
		s, f, err := shmem.Create(size)
		if err != nil {
			c.net.unhosted(fmt.Errorf("cannot make the shared segment: %w", err))
		} else {
			defer f.Close()
			seg = s
			offer = binary.LittleEndian.AppendUint64(nil, uint64(os.Getpid()))
			offer = binary.LittleEndian.AppendUint64(offer, uint64(f.Fd()))
			var nonce [8]byte
			rand.Read(nonce[:])
			copy(seg.Mem[offNonce:], nonce[:])
			offer = append(offer, nonce[:]...)
		}
		for p := 1; p < len(c.procs); p++ {
			send(p, tagOffer, offer)
		}
		for p := 1; p < len(c.procs); p++ {
			m := recv(p, tagMapped)
			ok = ok && len(m) == 1 && m[0] == 1 && seg != nil
		}
		verdict := []byte{0}
		if ok {
			verdict[0] = 1
		}
		for p := 1; p < len(c.procs); p++ {
			send(p, tagVerdict, verdict)
		}
	} else {
		var err error
		if seg, err = openOffer(recv(0, tagOffer), size); err != nil {
			c.net.unhosted(err)
		}
		mapped := []byte{0}
		if seg != nil {
			mapped[0] = 1
		}
		send(0, tagMapped, mapped)
		v := recv(0, tagVerdict)
		ok = len(v) == 1 && v[0] == 1
	}
	if !ok {
		if seg != nil {
			seg.Unmap()
		}
		return
	}
	h := &host{seg: seg, procs: len(c.procs), slots: hostSlots(len(c.procs)), me: c.me, crowded: c.net.crowded,
		bell: seg.Word32(offBell), sleepers: seg.Word32(offSleepers), chunk: bigChunk(len(c.procs)),
		parts: make([][]byte, len(c.procs)), lens: make([]int, len(c.procs))}
	runtime.AddCleanup(c, func(s *shmem.Segment) { s.Unmap() }, seg)
	c.host = h
}

// openOffer maps the segment that offer names, or says why it cannot.
func openOffer(offer []byte, size int) (*shmem.Segment, error) {
	if len(offer) != 24 {
		return nil, fmt.Errorf("proc index 0 offered no shared segment (%d bytes of offer)", len(offer))
	}
	pid, fd := binary.LittleEndian.Uint64(offer), binary.LittleEndian.Uint64(offer[8:])
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open proc index 0's shared segment: %w", err)
	}
	defer f.Close()
	seg, err := shmem.Map(f, size)
	if err != nil {
		return nil, fmt.Errorf("cannot map proc index 0's shared segment %s: %w", path, err)
	}
	if string(seg.Mem[offNonce:offNonce+8]) != string(offer[16:]) {
		seg.Unmap()
		return nil, fmt.Errorf("%s is not proc index 0's shared segment: the procs do not share a pid namespace", path)
	}
	return seg, nil
}
