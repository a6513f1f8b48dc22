package netd

import (
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
type ringPoll struct {
	mu     sync.Mutex
	leader *conn        // the daemon that polls the rings, or nil
	parked []*conn      // daemons waiting for their nudge
	count  atomic.Int32 // len(parked), for a scan that finds nobody parked without the lock
}

// leadOrPark makes c the leader if there is none (or it is c) and returns
// true; else it lists c as parked, and c's daemon must wait for its nudge
// (parked), which the leader sends when c's ring is ready or it resigns.
func (rp *ringPoll) leadOrPark(c *conn) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.leader == nil || rp.leader == c {
		rp.leader = c
		return true
	}
	rp.parked = append(rp.parked, c)
	rp.count.Store(int32(len(rp.parked)))
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
		p.nudgeNow()
	}
	clear(rp.parked)
	rp.parked = rp.parked[:0]
	rp.count.Store(0)
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
