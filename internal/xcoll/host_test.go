package xcoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/shmem"
)

// hostComms returns the communicators of a communicator whose rank r lives in
// proc procOf[r], the procs in host mode.
func hostComms(procOf []int, aborted chan struct{}) ([]*Net, []*Comm) {
	procs := slices.Max(procOf) + 1
	nets := hostMesh(procs, aborted)
	comms := make([]*Comm, procs)
	for p := range comms {
		comms[p] = New(nets[p], 5, procOf, coll.NewJob(), 0)
	}
	return nets, comms
}

// TestHostSlots: a segment of few procs holds more calls, so that a Bcast's root
// runs further ahead, as long as the entries fit 1 MiB; of many, 64 calls.
func TestHostSlots(t *testing.T) {
	for _, c := range []struct{ procs, slots int }{{2, 256}, {3, 256}, {4, 256}, {5, 128}, {8, 128}, {9, 64}, {16, 64}, {HostProcs, 64}} {
		if got := hostSlots(c.procs); got != c.slots {
			t.Errorf("hostSlots(%d) = %d, want %d", c.procs, got, c.slots)
		}
		if entries := hostSlots(c.procs) * c.procs * entryBytes; entries > 1<<20 && hostSlots(c.procs) > 64 {
			t.Errorf("%d procs: %d bytes of entries", c.procs, entries)
		}
	}
	for procs := 2; procs <= HostProcs; procs++ {
		if s := hostSlots(procs); s&(s-1) != 0 { // entry masks the call's number with it
			t.Errorf("hostSlots(%d) = %d, not a power of two", procs, s)
		}
	}
}

// TestHostRunAheadBounded: in host mode a Bcast's root waits for nobody but the
// entries' reuse, so it gets at most hostSlots calls ahead of a proc that makes
// none, and that proc then gets every Bcast's data.
func TestHostRunAheadBounded(t *testing.T) {
	procOf := []int{0, 0, 1, 2, 2}
	slots := hostSlots(3)
	calls := 5 * slots
	nets, comms := hostComms(procOf, make(chan struct{}))
	var rootDone atomic.Int64
	hold := make(chan struct{})
	results := make([]error, len(procOf))
	var wg sync.WaitGroup
	for r, p := range procOf {
		wg.Go(func() {
			bcast := func(i int) error {
				buf := make([]byte, 8)
				if r == 0 {
					binary.LittleEndian.PutUint64(buf, uint64(i))
				}
				if err := comms[p].Bcast(r, buf, 1, 0); err != nil {
					return err
				}
				if got := binary.LittleEndian.Uint64(buf); got != uint64(i) {
					return fmt.Errorf("rank %d: Bcast %d got %d", r, i, got)
				}
				return nil
			}
			if results[r] = bcast(0); results[r] != nil { // sets up host mode
				return
			}
			if p == 2 {
				<-hold // the last proc is slow to call
			}
			for i := 1; i < calls; i++ {
				if results[r] = bcast(i); results[r] != nil {
					return
				}
				if r == 0 {
					rootDone.Add(1)
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if got := rootDone.Load(); got < int64(slots)-2 || got > int64(slots) {
		t.Errorf("the root ran %d Bcasts ahead of a proc that made none, want %d", got, slots-1)
	}
	close(hold)
	wg.Wait()
	noErrors(t, results)
	for p, n := range nets {
		if k := n.pending(); k != 0 {
			t.Errorf("proc %d: %d messages left behind", p, k)
		}
	}
}

// TestHostWaitEnds: a leader waiting for another proc's entry is released with
// coll.ErrAborted when the job ends or a proc is lost, even if the other proc
// never comes.
func TestHostWaitEnds(t *testing.T) {
	for _, end := range []string{"abort", "lost proc"} {
		t.Run(end, func(t *testing.T) {
			aborted := make(chan struct{})
			nets, comms := hostComms([]int{0, 1}, aborted)
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Go(func() {
					if err := comms[r].Barrier(r); err != nil { // sets up host mode
						t.Errorf("rank %d: %v", r, err)
					}
				})
			}
			wg.Wait()
			done := make(chan error, 1)
			go func() { done <- comms[0].Barrier(0) }()
			time.Sleep(2 * hostPoll) // long enough to sleep on the bell
			released(t, end, aborted, nets[0], done, "the waiting Barrier")
		})
	}
}

// TestHostLargeParts: parts too long for an entry go on the channel, a Bcast's
// down the tree, a Reduce's and a Gather's to the root's proc, an Allgather or
// Allgatherv with such a part all on the channel, and an Allreduce's through
// the large areas, a chunk at a time (here up to three chunks and a piece, of
// elements of 2 bytes, which the chunks do not hold a whole number of); each
// gives the right result in rank order, and lengths that differ across the
// limit are an error, not a hang; a reduction function that panics at one
// proc's leader fails every rank.
func TestHostLargeParts(t *testing.T) {
	procOf := []int{0, 1, 1, 2}
	n := len(procOf)
	chunk := bigChunk(3)
	hosted = true
	defer func() { hosted = false }()
	noErrors(t, run(t, procOf, func(c *Comm, r int) error {
		for _, size := range []int{HostData, HostData + 2, 3 * HostData, chunk, 3*chunk + 14} {
			buf := make([]byte, size)
			if r == 2 {
				buf[0], buf[size-1] = 7, 9
			}
			if err := c.Bcast(r, buf, 1, 2); err != nil {
				return err
			}
			if buf[0] != 7 || buf[size-1] != 9 {
				return fmt.Errorf("Bcast of %d bytes: got %d...%d", size, buf[0], buf[size-1])
			}
			send := bytes.Repeat([]byte{byte(r), 1}, size/2)
			got := make([]byte, size)
			if err := c.Reduce(r, send, got, 2, firstFn, false, 1); err != nil {
				return err
			}
			want := bytes.Repeat([]byte{0, byte(n)}, size/2)
			if r == 1 && !bytes.Equal(got, want) {
				return fmt.Errorf("Reduce of %d bytes: got %v...%v", size, got[:2], got[size-2:])
			}
			clear(got)
			// Elements of 1 byte, which firstFn folds in pairs: every slice a
			// proc folds must be whole pieces (an even length), as in one proc.
			if err := c.Allreduce(r, send, got, 1, firstFn, false); err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				i := slices.IndexFunc(got, func(b byte) bool { return b != want[0] && b != want[1] })
				return fmt.Errorf("Allreduce of %d bytes: byte %d of %d differs", size, i, size)
			}
		}
		// Blocks of 600 bytes: proc index 1's two ranks' are too long for an
		// entry, the other procs' fit.
		block := make([]byte, 600)
		for i := range block {
			block[i] = byte(r + i)
		}
		all := make([]byte, n*len(block))
		check := func(what string) error {
			for j := range n {
				if got := all[j*len(block) : (j+1)*len(block)]; got[0] != byte(j) || got[599] != byte(j+599) {
					return fmt.Errorf("%s: block %d starts %d, ends %d", what, j, got[0], got[599])
				}
			}
			return nil
		}
		for _, root := range []int{0, 1} { // rank 1's proc's own blocks do not fit an entry
			clear(all)
			if err := c.Gather(r, block, all, 1, root); err != nil {
				return err
			}
			if r == root {
				if err := check(fmt.Sprint("Gather to ", root)); err != nil {
					return err
				}
			}
		}
		clear(all)
		if err := c.Allgather(r, block, all, 1); err != nil {
			return err
		}
		if err := check("Allgather"); err != nil {
			return err
		}
		clear(all)
		counts, displs := make([]int, n), make([]int, n)
		for j := range n {
			counts[j], displs[j] = len(block), j*len(block)
		}
		if err := c.Allgatherv(r, &coll.Part{Send: block, Recv: all, RecvCounts: counts, RecvDispls: displs}, 1); err != nil {
			return err
		}
		if err := check("Allgatherv"); err != nil {
			return err
		}
		// Scatter of 600-byte blocks from each proc's first rank: n of them are
		// too long for the root's entry, and go on the channel.
		for _, root := range []int{0, 1, 3} {
			p := coll.Part{Recv: make([]byte, len(block))}
			if r == root {
				p.Send, p.SendBlock = make([]byte, n*len(block)), len(block)
				for j := range n {
					for i := range block {
						p.Send[j*len(block)+i] = byte(root + j + i)
					}
				}
			}
			if err := c.Scatter(r, &p, 1, root); err != nil {
				return err
			}
			if p.Recv[0] != byte(root+r) || p.Recv[599] != byte(root+r+599) {
				return fmt.Errorf("Scatter from %d: block starts %d, ends %d", root, p.Recv[0], p.Recv[599])
			}
		}
		// Alltoall of 10-byte blocks, through the entries, and of 150-byte
		// blocks: proc index 1's two ranks' 1,200 bytes do not fit its entry, and
		// every proc goes through the logs (whose records of that size go on the
		// channel).
		for _, m := range []int{10, 150} {
			p := coll.Part{Send: make([]byte, n*m), Recv: make([]byte, n*m), SendBlock: m, RecvBlock: m}
			for j := range n {
				copy(p.Send[j*m:], patBlock(r, j, m))
			}
			if err := c.Alltoall(r, &p, 1); err != nil {
				return err
			}
			for j := range n {
				if got := p.Recv[j*m : (j+1)*m]; !bytes.Equal(got, patBlock(j, r, m)) {
					return fmt.Errorf("Alltoall of %d-byte blocks: block %d is %v", m, j, got[:4])
				}
			}
		}
		// The last rank's part alone is too long for an entry.
		size := HostData
		if r == n-1 {
			size += 2
		}
		err := c.Allreduce(r, make([]byte, size), make([]byte, size), 2, firstFn, false)
		var e *errs.Error
		if !errors.As(err, &e) || e.Class != errs.Count {
			return fmt.Errorf("Allreduce with rank %d's part 2 bytes longer: %v, want an ErrCount", n-1, err)
		}
		// A reduction that panics at one proc's leader, in the second chunk.
		boom := func(in, inout []byte) {
			for i := 0; i < len(in); i += 2 {
				if in[i] == 0xee {
					panic("boom")
				}
			}
			first(in, inout)
		}
		send := make([]byte, 2*chunk)
		if r == 0 {
			send[len(send)-2] = 0xee // in the last slice: proc index 2 folds it
		}
		err = c.Allreduce(r, send, make([]byte, len(send)), 2, coll.Op{Fold: boom}, false)
		if !errors.As(err, &e) || e.Class != errs.Op {
			return fmt.Errorf("Allreduce whose op panics: %v, want an ErrOp", err)
		}
		return c.Barrier(r)
	}))
}

// TestHostOffer: a proc maps only the segment an offer names, with the nonce it
// names; a short offer, a descriptor that is not there or one of another
// segment are refused.
func TestHostOffer(t *testing.T) {
	size := segmentBytes(2)
	seg, f, err := shmem.Create(size)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	defer seg.Unmap()
	copy(seg.Mem[offNonce:], "8 bytes!")
	offer := func(pid, fd int, nonce string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(pid))
		b = binary.LittleEndian.AppendUint64(b, uint64(fd))
		return append(b, nonce...)
	}
	good := offer(os.Getpid(), int(f.Fd()), "8 bytes!")
	m, err := openOffer(good, size)
	if err != nil {
		t.Fatalf("the segment's own offer was refused: %v", err)
	}
	m.Word64(offDone).Store(42)
	if got := seg.Word64(offDone).Load(); got != 42 {
		t.Fatalf("a word written through the offer's mapping reads %d in the creator's, want 42", got)
	}
	m.Unmap()
	for _, bad := range []struct {
		name, why string
		offer     []byte
		size      int
	}{
		{"short", "offered no shared segment", good[:23], size},
		{"no descriptor", "cannot open", offer(os.Getpid(), 1<<20, "8 bytes!"), size},
		{"other nonce", "do not share a pid namespace", offer(os.Getpid(), int(f.Fd()), "8 bytes?"), size},
		{"not a segment", "cannot map", offer(os.Getpid(), 0, "8 bytes!"), size},
		{"another size", "cannot map", good, size + lineBytes},
	} {
		m, err := openOffer(bad.offer, bad.size)
		if m != nil {
			m.Unmap()
			t.Errorf("%s: mapped", bad.name)
		} else if err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%s: refused with %v, want an error saying %q", bad.name, err, bad.why)
		}
	}
}

// TestUnhostedTellsOnce checks that a proc that cannot share a segment says so,
// with the reason, once however many communicators try.
func TestUnhostedTellsOnce(t *testing.T) {
	var lines []string
	n := NewNet(0, nil, nil)
	n.HostMode(func(int) int { return 0 }, false, func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
	})
	n.unhosted(errors.New("no /proc here"))
	n.unhosted(errors.New("again"))
	if len(lines) != 1 || !strings.Contains(lines[0], "no /proc here") || !strings.Contains(lines[0], "collective channel") {
		t.Fatalf("logged %q, want one line saying the collectives stay on the channel, and why", lines)
	}
}

// FuzzEntryHead: whatever another proc wrote in an entry, head returns a part
// within the entry or an error, and never panics.
func FuzzEntryHead(f *testing.F) {
	f.Add(make([]byte, entryHead))
	ok := make([]byte, entryHead)
	binary.LittleEndian.PutUint32(ok[16:], entData)
	binary.LittleEndian.PutUint32(ok[24:], 5)
	f.Add(ok)
	f.Fuzz(func(t *testing.T, head []byte) {
		e := entry{make([]byte, entryBytes)}
		copy(e.b, head)
		_, what, _, data, err := e.head()
		if err == nil && (len(data) > HostData || what < entNone || what > entLog) {
			t.Fatalf("holds %d, %d bytes of part, no error", what, len(data))
		}
	})
}

// TestHostUnpostedBcast: a Bcast's other proc that finds the root's data there
// posts no entry of its own, so a proc that made another call and waits for
// that entry must find the root's entry and its other signature instead of
// waiting for ever. The procs then go on together.
func TestHostUnpostedBcast(t *testing.T) {
	hosted = true
	defer func() { hosted = false }()
	results := runLeaving(t, []int{0, 1, 2}, true, func(c *Comm, r int) error {
		if err := c.Barrier(r); err != nil { // sets up host mode
			return err
		}
		var err error
		switch r {
		case 0:
			time.Sleep(20 * time.Millisecond) // the root's entry is there by now
			buf := make([]byte, 4)
			if err = c.Bcast(r, buf, 1, 1); err == nil && buf[3] != 7 {
				err = fmt.Errorf("Bcast got %v", buf)
			}
		case 1:
			err = c.Bcast(r, []byte{0, 0, 0, 7}, 1, 1)
		case 2:
			err = c.Barrier(r)
			var e *errs.Error
			if !errors.As(err, &e) || e.Class != errs.Arg {
				return fmt.Errorf("Barrier while the others Bcast: %v, want an ErrArg", err)
			}
			err = nil
		}
		if err != nil {
			return err
		}
		return c.Barrier(r)
	})
	noErrors(t, results)
}

// TestHostLogs: in host mode the collectives without an algorithm of their own
// on the segment run the channel's through the leaders' logs; messages too long
// for what is left of a log go on the channel, next to those that fit; a Scan
// whose sends do not fit an entry takes that way too.
func TestHostLogs(t *testing.T) {
	procOf := []int{0, 1, 1, 2}
	n := len(procOf)
	hosted = true
	defer func() { hosted = false }()
	noErrors(t, run(t, procOf, func(c *Comm, r int) error {
		// Blocks of 300 bytes: proc index 1's messages are 600, one fits its
		// log and one does not; of 2000, none fits an entry.
		for _, m := range []int{1, 300, 2000} {
			send, recv := make([]byte, m*n), make([]byte, m*n)
			for j := range n { // block j from rank r: r*16+j in every byte
				copy(send[j*m:], bytes.Repeat([]byte{byte(r*16 + j)}, m))
			}
			if err := c.Alltoall(r, &coll.Part{Send: send, Recv: recv, SendBlock: m, RecvBlock: m}, 1); err != nil {
				return err
			}
			for j := range n {
				if want := bytes.Repeat([]byte{byte(j*16 + r)}, m); !bytes.Equal(recv[j*m:(j+1)*m], want) {
					return fmt.Errorf("Alltoall of %d-byte blocks: block %d is %v..., want %d", m, j, recv[j*m], want[0])
				}
			}
		}
		// Scans of 1 and of 600 bytes a rank: proc index 1's sends of 600 do not
		// fit an entry, so every proc takes the channel's algorithm, in the logs.
		for _, m := range []int{2, 600} {
			got := make([]byte, m)
			if err := c.Scan(r, &coll.Part{Send: bytes.Repeat([]byte{byte(r), 1}, m/2), Recv: got}, 2, firstFn); err != nil {
				return err
			}
			if want := bytes.Repeat([]byte{0, byte(r + 1)}, m/2); !bytes.Equal(got, want) {
				return fmt.Errorf("Scan of %d bytes: rank %d got %v..., want %v...", m, r, got[:2], want[:2])
			}
		}
		if c.host == nil || c.net.pending() != 0 {
			return fmt.Errorf("proc of rank %d: host mode %v, %d messages left on the channel", r, c.host != nil, c.net.pending())
		}
		return nil
	}))
}

// TestHostLogAgainstEntry: procs that disagree on whether a reduction's op
// commutes, over procs whose ranks are not consecutive, go different ways
// through the call (a fold in the segment, the channel's algorithm through the
// logs) under one signature; each finds that the other's entry is not what it
// waits for, and nobody hangs.
func TestHostLogAgainstEntry(t *testing.T) {
	hosted = true
	defer func() { hosted = false }()
	procOf := []int{0, 1, 2, 0}
	results := runLeaving(t, procOf, true, func(c *Comm, r int) error {
		commutative := procOf[r] == 0
		err := c.Allreduce(r, []byte{byte(r), 1}, make([]byte, 2), 2, firstFn, commutative)
		var e *errs.Error
		if !errors.As(err, &e) || e.Class != errs.Arg {
			return fmt.Errorf("Allreduce whose procs disagree on the op: %v, want an ErrArg", err)
		}
		return c.Barrier(r)
	})
	noErrors(t, results)
}

// FuzzLogFind: whatever another proc wrote in a log, find returns a record
// within the log or an error, and never panics.
func FuzzLogFind(f *testing.F) {
	rec := make([]byte, recordHead+8)
	binary.LittleEndian.PutUint32(rec[4:], 3)
	binary.LittleEndian.PutUint32(rec[8:], entData)
	binary.LittleEndian.PutUint32(rec[12:], 5)
	f.Add(uint32(len(rec)), rec)
	f.Add(uint32(HostData+1), rec)
	f.Add(uint32(recordHead-1), rec)
	f.Fuzz(func(t *testing.T, used uint32, log []byte) {
		e := entry{make([]byte, entryBytes)}
		copy(e.b[entryHead:], log)
		e.used().Store(used)
		_, data, ok, err := e.find(0, 3)
		if ok && err == nil && (len(data) > int(used) || len(data) > HostData) {
			t.Fatalf("a record of %d bytes in a log of %d", len(data), used)
		}
	})
}
