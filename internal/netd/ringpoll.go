package netd

import (
	"slices"
	"sync"
	"sync/atomic"
)

// ringPoll lets one receive daemon at a time poll the proc's shared-memory
// rings (the leader) while the daemons of the others park on their nudge
// channels; the leader looks at their rings between its own polls and nudges
// the daemon of a ring that has data (or has ended). On a host with more procs
// than CPUs a proc's every turn on a CPU counts: each daemon used to poll its
// own ring and yield to the others, so a turn went through every daemon of the
// proc, each a goroutine switch, and the OS often took the CPU back before the
// daemon of the ring with the message had looked.
//
// While ranks poll the rings themselves (Device.Poll), no daemon leads: the
// rank that waits for a message handles it on its own goroutine, where a
// daemon would take a turn on the processor and then hand the message over
// with another goroutine switch. The last rank to stop polling hands the lead
// back to a parked daemon.
type ringPoll struct {
	mu     sync.Mutex
	leader *conn        // the daemon that polls the rings, or nil
	parked []*conn      // daemons waiting for their nudge
	count  atomic.Int32 // len(parked), for a scan that finds nobody parked without the lock
	inline atomic.Int32 // ranks polling the rings (PollBegin, PollEnd)
}

// leadOrPark makes c the leader if no rank polls and there is no leader (or
// it is c) and returns true; else it lists c as parked, and c's daemon must
// wait for its nudge (parked), which the leader sends when c's ring is ready
// or it resigns, and a polling rank when it leaves c's ring to the daemon.
func (rp *ringPoll) leadOrPark(c *conn) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.inline.Load() == 0 && (rp.leader == nil || rp.leader == c) {
		rp.leader = c
		return true
	}
	if rp.leader == c {
		rp.leader = nil // a rank polls: step aside
	}
	if !c.listed {
		c.listed = true
		rp.parked = append(rp.parked, c)
		rp.count.Store(int32(len(rp.parked)))
	}
	return false
}

// scan nudges the parked daemons whose rings are ready. The leader calls it
// between its polls.
func (rp *ringPoll) scan() {
	if rp.count.Load() == 0 {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	kept := rp.parked[:0]
	for _, c := range rp.parked {
		if c.shm.Ready() {
			c.listed = false
			c.nudgeNow()
			c.nudged.Add(1)
		} else {
			kept = append(kept, c)
		}
	}
	clear(rp.parked[len(kept):])
	rp.parked = kept
	rp.count.Store(int32(len(kept)))
}

// resign ends c's leadership, if it leads, and nudges every parked daemon: each
// looks at its ring and its budget again, and one takes over if polling is
// still wanted. Called by a leader's daemon before it does anything but poll
// and handle its own messages.
func (rp *ringPoll) resign(c *conn) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.leader != c {
		return
	}
	rp.leader = nil
	for _, p := range rp.parked {
		p.listed = false
		p.nudgeNow()
	}
	clear(rp.parked)
	rp.parked = rp.parked[:0]
	rp.count.Store(0)
}

// leave takes the ended daemon of c out of the rings' polling: it resigns if
// it leads, and is no longer listed as parked, where handBack could make it a
// leader that never polls.
func (rp *ringPoll) leave(c *conn) {
	rp.resign(c)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if c.listed {
		c.listed = false
		rp.parked = slices.DeleteFunc(rp.parked, func(x *conn) bool { return x == c })
		rp.count.Store(int32(len(rp.parked)))
	}
}

// handBack makes the first parked daemon the leader, with a new budget, when
// no rank polls and nobody leads. It takes the lock even when nobody seems
// parked: a daemon that saw a rank polling may be listing itself right now.
func (rp *ringPoll) handBack() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.leader != nil || len(rp.parked) == 0 || rp.inline.Load() > 0 {
		return
	}
	c := rp.parked[0]
	rp.parked = slices.Delete(rp.parked, 0, 1)
	rp.count.Store(int32(len(rp.parked)))
	c.listed = false
	rp.leader = c
	c.handed.Store(true)
	c.nudgeNow()
}

// Poller is a device whose messages a waiting rank may handle itself, as
// *Device's rings: it calls Poll between PollBegin and PollEnd.
type Poller interface {
	PollBegin()
	Poll() bool
	PollEnd()
	Polls() bool
}

// Polls reports whether Poll has rings to poll: a rank that waits only for
// messages of sockets has nothing to poll, their daemons deliver them.
func (d *Device) Polls() bool {
	rings := d.rings.Load()
	return rings != nil && len(*rings) > 0
}

// PollBegin counts a rank in as polling the rings (Poll) while it waits, and
// PollEnd counts it out: meanwhile the receive daemons of the rings stand
// aside, and when the last polling rank stops, one of them leads again.
func (d *Device) PollBegin() { d.inline.Add(1) }

func (d *Device) PollEnd() {
	if d.inline.Add(-1) == 0 {
		d.handBack()
	}
}

// Poll handles, on the calling goroutine, the messages that wait whole in the
// proc's shared-memory rings, and reports whether it handled any. A rank that
// waits for a message calls it between PollBegin and PollEnd. A message that
// is not whole yet, or that a daemon is reading, is left to the daemon.
func (d *Device) Poll() bool {
	rings := d.rings.Load()
	if rings == nil {
		return false
	}
	did := false
	for _, c := range *rings {
		c.shm.Wake() // a writer waiting for room, whose doorbell waits for the scheduler
		if !c.shm.Ready() {
			continue
		}
		if !c.rd.TryLock() {
			c.nudgeNow() // its daemon is in the middle of a message: it may be parked
			continue
		}
		if c.pump() {
			did = true
		}
		c.rd.Unlock()
	}
	return did
}

// nudgeNow ends c's daemon's wait in parked, or its next one.
func (c *conn) nudgeNow() {
	select {
	case c.nudge <- struct{}{}:
	default: // already nudged
	}
}

// parked waits until c's daemon is nudged, or c's ring is closed.
func (c *conn) parked() {
	select {
	case <-c.nudge:
	case <-c.shm.Closed():
	}
}
