package netd

import (
	"sync/atomic"
	"time"
)

// Demand counts the ranks of a proc that wait for a message from another proc.
// While any does, a receive daemon that polls goes on past its budget, up to
// demandPoll, instead of blocking in the kernel. On a host with more procs than
// CPUs the budget is short (20 µs), the gap between two messages on one link of
// a collective is longer, and every step then cost a kernel wake-up of a proc
// queued for the CPU behind the pollers of the others: a 1x4 Barrier took about
// 300 µs, 26-70 with this. MPI's progress engines poll for as long as a rank
// waits; ours do too, and beyond that only for their budget after data, so a
// proc whose ranks compute leaves the CPU to them.
type Demand struct{ n atomic.Int32 }

// Add counts a wait in, Done out. A nil Demand counts nothing.
func (d *Demand) Add() {
	if d != nil {
		d.n.Add(1)
	}
}

func (d *Demand) Done() {
	if d != nil {
		d.n.Add(-1)
	}
}

// demanded says whether d's daemons should poll on past their budget: a rank
// waits, and every connection of d is a ring. A daemon that polls keeps the
// scheduler from the network poller; a ring asleep there is woken by the
// polling daemons (wakeRings), but a socket's daemon would wait for them to
// stop, up to demandPoll (at one P per proc, the crowded host's share; with
// more, an idle P blocks in the poller and would catch it at once).
func (d *Device) demanded() bool { return d.demand.n.Load() > 0 && d.sockets.Load() == 0 }

// demandPoll bounds how long a daemon polls for a waiting rank: a wait longer
// than that is for a proc that computes, and polling would take its CPU.
const demandPoll = 10 * time.Millisecond
