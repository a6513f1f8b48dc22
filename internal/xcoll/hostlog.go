package xcoll

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/weft-mpi/weft/internal/errs"
)

// In host mode, the collectives that have no algorithm of their own on the
// segment (Gatherv, Alltoallv, ReduceScatter(Block), a Scan, Exscan or Alltoall
// whose parts do not fit an entry, and a reduction whose procs cannot fold in
// proc order)
// run the channel's algorithms with the call's entries as the channel: a
// leader's entry is a log of the messages it sends in the call, each a record of
// its receiver, tag, what it holds and length, then its bytes, and the entry's
// length says how much of the log is written. A message that does not fit what
// is left of the entry goes on the channel, and its record says so. A receiver
// waits for the record addressed to it, checking the sender's signature first.

const recordHead = 16 // receiver, tag, what (and a fault's class), length (0 on the channel)

// used is the word of an entry that counts the log's bytes (its length field).
func (e entry) used() *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&e.b[24])) }

// logs posts our proc's entry of the call as an empty log, and has the call's
// send and recv use the logs (the leader says finished at the end of its step).
func (o *call) logs() {
	if err := o.post(entLog, 0, nil); err != nil {
		o.split = err
		return
	}
	o.logged = true
}

// append sends data, or the fault that err is, to the leader of proc index to
// through our log, or on the channel if it does not fit.
func (o *call) append(to int, tag int32, data []byte, err error) error {
	h := o.c.host
	e := h.entry(o.seq, h.me)
	at := int(e.used().Load())
	what := uint32(entData)
	if f, ok := err.(*errs.Error); ok {
		what, data = entFault|uint32(f.Class)<<8, []byte(f.Detail)
	}
	length, n := len(data), (len(data)+7)&^7
	if at+recordHead+n > HostData {
		what, length, n = entNet, 0, 0
	}
	r := e.b[entryHead+at : entryHead+at+recordHead]
	binary.LittleEndian.PutUint32(r, uint32(to))
	binary.LittleEndian.PutUint32(r[4:], uint32(tag))
	binary.LittleEndian.PutUint32(r[8:], what)
	binary.LittleEndian.PutUint32(r[12:], uint32(length))
	if what != entNet {
		copy(e.b[entryHead+at+recordHead:], data)
	}
	e.used().Swap(uint32(at + recordHead + n)) // after the record: see post
	h.ring()
	if what != entNet {
		return err
	}
	return o.sendNet(to, tag, data, err)
}

// take receives the message of step tag from the leader of proc index from,
// as recv does: from its log, or from the channel if its record says so.
func (o *call) take(from int, tag int32) ([]byte, error) {
	h := o.c.host
	e := h.entry(o.seq, from)
	odd, looks := -1, 0
	var what uint32
	var data []byte
	var ferr error
	notLog := false // from's call has the same signature but another way through it
	err := o.waitFor(func() bool {
		if e.seq().Load() == o.seq+1 {
			if binary.LittleEndian.Uint64(e.b[8:]) != o.sig {
				odd = from
				return true
			}
			if binary.LittleEndian.Uint32(e.b[16:]) != entLog {
				notLog = true
				return true
			}
			var ok bool
			if what, data, ok, ferr = e.find(h.me, tag); ok || ferr != nil {
				return true
			}
		}
		if looks++; looks%64 == 0 {
			odd = o.odd()
		}
		return odd >= 0
	})
	switch {
	case err != nil:
		return nil, err
	case odd >= 0:
		sig := binary.LittleEndian.Uint64(h.entry(o.seq, odd).b[8:])
		o.alarm()
		return nil, o.differs(o.c.members[odd][0], sig)
	case notLog:
		return nil, o.misses(from)
	case ferr != nil:
		return nil, o.fault(errs.Intern, o.c.members[from][0], "%v", ferr)
	case what&0xff == entFault:
		return nil, o.fault(errs.Class(what>>8), errs.None, "%s", data)
	case what == entNet:
		return o.recvNet(from, tag)
	}
	return data, nil
}

// find returns the record of the log e addressed to proc index to with tag
// tag, if it is written yet; the log is checked, since another proc wrote it.
func (e entry) find(to int, tag int32) (what uint32, data []byte, ok bool, err error) {
	used := int(e.used().Load())
	if used > HostData {
		return 0, nil, false, fmt.Errorf("xcoll: corrupt log in the host segment (%d bytes)", used)
	}
	log := e.b[entryHead : entryHead+used]
	for at := 0; at < used; {
		if used-at < recordHead {
			return 0, nil, false, fmt.Errorf("xcoll: corrupt log in the host segment (a record at %d of %d bytes)", at, used)
		}
		r := log[at:]
		n := int(binary.LittleEndian.Uint32(r[12:])) // 0 for a message on the channel
		what = binary.LittleEndian.Uint32(r[8:])
		room := (n + 7) &^ 7
		if n > used || room > used-at-recordHead {
			return 0, nil, false, fmt.Errorf("xcoll: corrupt log in the host segment (a record of %d bytes at %d of %d)", n, at, used)
		}
		if int(binary.LittleEndian.Uint32(r)) == to && int32(binary.LittleEndian.Uint32(r[4:])) == tag {
			return what, r[recordHead : recordHead+n], true, nil
		}
		at += recordHead + room
	}
	return 0, nil, false, nil
}
