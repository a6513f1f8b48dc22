package coll

import (
	"sync"
	"sync/atomic"
)

// Queue keeps one rank's collectives on one communicator in the order the rank
// issued them, for nonblocking collectives. MPI matches a communicator's
// collectives, blocking and nonblocking, by the order in which each rank calls
// them, and the episodes above count a rank's calls as they start: so a
// nonblocking collective waits in its rank's queue until the ones issued before
// it are over, and a blocking one issued while the queue is not empty takes its
// turn there too. One goroutine, started when an operation is queued on an idle
// queue and ending when the queue is empty, runs them; so the collectives move
// on whether or not the rank calls into the library, and no goroutine outlives
// the rank's collectives.
//
// A rank issues its collectives on a communicator from one goroutine at a time
// (MPI requires it); the queue's own goroutine only runs them.
type Queue struct {
	pending atomic.Int64 // issued and not yet over
	mu      sync.Mutex
	ops     []func() // issued and not yet started, in order
	running bool     // a goroutine runs ops
}

// Idle reports whether every collective the rank issued through q is over, so
// that the next one may run on the caller's goroutine. A nil Queue is idle.
func (q *Queue) Idle() bool { return q == nil || q.pending.Load() == 0 }

// Go runs op after every operation queued before it, on the queue's goroutine.
func (q *Queue) Go(op func()) {
	q.pending.Add(1)
	q.mu.Lock()
	q.ops = append(q.ops, op)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// drain runs the queued operations in order until there are none left.
func (q *Queue) drain() {
	for {
		q.mu.Lock()
		if len(q.ops) == 0 {
			q.running = false
			q.ops = nil
			q.mu.Unlock()
			return
		}
		op := q.ops[0]
		q.ops[0] = nil
		q.ops = q.ops[1:]
		q.mu.Unlock()
		op()
		q.pending.Add(-1)
	}
}

// Queued returns the queue of rank's collectives on c, or nil if the rank never
// issued a nonblocking one there (cheap: a blocking collective asks every time).
func (c *Comm) Queued(rank int) *Queue { return c.queues[rank].Load() }

// Queue returns the queue of rank's collectives on c, made on first use.
func (c *Comm) Queue(rank int) *Queue {
	slot := &c.queues[rank]
	if q := slot.Load(); q != nil {
		return q
	}
	slot.CompareAndSwap(nil, new(Queue))
	return slot.Load()
}
