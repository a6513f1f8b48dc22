package mpi_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

func TestThreadLevel(t *testing.T) {
	levelOf := func(t *testing.T, opts ...mpi.Option) mpi.ThreadLevel {
		t.Helper()
		var levels [2]mpi.ThreadLevel
		mustRun(t, 2, func(c *mpi.Comm) error {
			levels[c.Rank()] = c.ThreadLevel()
			return nil
		}, opts...)
		if levels[0] != levels[1] {
			t.Fatalf("the ranks see thread levels %v and %v", levels[0], levels[1])
		}
		return levels[0]
	}
	unsetenv(t, "WEFT_THREAD_LEVEL")
	if l := levelOf(t); l != mpi.ThreadMultiple {
		t.Errorf("default thread level %v, want multiple", l)
	}
	names := map[mpi.ThreadLevel]string{mpi.ThreadSingle: "single", mpi.ThreadFunneled: "funneled",
		mpi.ThreadSerialized: "serialized", mpi.ThreadMultiple: "multiple"}
	for l, name := range names {
		if l.String() != name {
			t.Errorf("ThreadLevel(%d).String() = %q, want %q", int(l), l.String(), name)
		}
		if got := levelOf(t, mpi.WithThreadLevel(l)); got != l {
			t.Errorf("WithThreadLevel(%v): ThreadLevel() = %v", l, got)
		}
	}
	if !(mpi.ThreadSingle < mpi.ThreadFunneled && mpi.ThreadFunneled < mpi.ThreadSerialized && mpi.ThreadSerialized < mpi.ThreadMultiple) {
		t.Error("the thread levels are not in increasing order")
	}
	t.Setenv("WEFT_THREAD_LEVEL", "funneled")
	if l := levelOf(t); l != mpi.ThreadFunneled {
		t.Errorf("WEFT_THREAD_LEVEL=funneled: ThreadLevel() = %v", l)
	}
	if l := levelOf(t, mpi.WithThreadLevel(mpi.ThreadSerialized)); l != mpi.ThreadSerialized {
		t.Errorf("WithThreadLevel(serialized) with WEFT_THREAD_LEVEL=funneled: ThreadLevel() = %v; the option wins", l)
	}
}

// crossedExchange is the scenario of Thakur and Gropp's Fig. 1: each of two ranks
// runs a goroutine that receives from the other rank and one that sends to it.
// An implementation that holds a lock while blocked in Recv deadlocks here.
func crossedExchange(c *mpi.Comm, iter, size int) error {
	peer := 1 - c.Rank()
	var wg sync.WaitGroup
	var recvErr, sendErr error
	wg.Go(func() {
		buf := make([]int64, size)
		st, err := mpi.Recv(c, buf, peer, iter)
		if err == nil && (buf[0] != int64(iter*10+peer) || buf[size-1] != int64(peer) || st.Source != peer || st.Tag != iter) {
			err = fmt.Errorf("iteration %d: received %d...%d from %d tag %d, want %d...%d from %d tag %d",
				iter, buf[0], buf[size-1], st.Source, st.Tag, iter*10+peer, peer, peer, iter)
		}
		recvErr = err
	})
	wg.Go(func() {
		buf := make([]int64, size)
		buf[size-1] = int64(c.Rank())
		buf[0] = int64(iter*10 + c.Rank())
		sendErr = mpi.Send(c, buf, peer, iter)
	})
	wg.Wait()
	return errors.Join(recvErr, sendErr)
}

func TestThakurGroppFig1(t *testing.T) {
	tests := []struct {
		name string
		size int // int64s, at least 2
		opts []mpi.Option
	}{
		{"eager", 2, nil},
		{"rendezvous", 4096, nil},
		{"pool cap 0", 2, []mpi.Option{mpi.WithPoolCap(0)}},
		{"no spin", 2, []mpi.Option{mpi.WithSpin(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const iters = 2000
			mustRun(t, 2, func(c *mpi.Comm) error {
				for i := range iters {
					if err := crossedExchange(c, i, tt.size); err != nil {
						return err
					}
				}
				return nil
			}, tt.opts...)
			for range 20 {
				mustRun(t, 2, func(c *mpi.Comm) error {
					for i := range iters / 20 {
						if err := crossedExchange(c, i, tt.size); err != nil {
							return err
						}
					}
					return nil
				}, tt.opts...)
			}
		})
	}
}

// TestManyGoroutinesPerRank has 8 goroutines per rank send to every rank and 8 more
// receive with AnySource and AnyTag, and checks that every message arrives exactly once.
func TestManyGoroutinesPerRank(t *testing.T) {
	const ranks, workers, perWorker = 4, 8, 40
	type msgID struct{ src, worker, seq int }
	destOf := func(id msgID) int { return (id.src + id.worker + id.seq) % ranks }
	lenOf := func(id msgID) int { // in int64s; every 7th is above the eager limit
		if id.seq%7 == 3 {
			return mpi.DefaultEagerLimit/8 + 100
		}
		return 3 + id.seq%5
	}
	tagOf := func(id msgID) int { return id.worker*1000 + id.seq }
	expected := make([]int, ranks) // messages each rank receives
	for src := range ranks {
		for w := range workers {
			for seq := range perWorker {
				expected[destOf(msgID{src, w, seq})]++
			}
		}
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, ranks, func(c *mpi.Comm) error {
				var mu sync.Mutex
				seen := map[msgID]bool{}
				var left atomic.Int64 // receives this rank still has to make
				left.Store(int64(expected[c.Rank()]))
				errs := make([]error, 2*workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() { // sender w
						for seq := range perWorker {
							id := msgID{c.Rank(), w, seq}
							buf := make([]int64, lenOf(id))
							buf[0], buf[1], buf[2] = int64(id.src), int64(id.worker), int64(id.seq)
							var err error
							switch seq % 3 {
							case 0:
								err = mpi.Send(c, buf, destOf(id), tagOf(id))
							case 1:
								err = mpi.Ssend(c, buf, destOf(id), tagOf(id))
							default:
								err = waited(mpi.Isend[byte])(c, raw(buf), destOf(id), tagOf(id))
							}
							if err != nil {
								errs[w] = err
								return
							}
						}
					})
					wg.Go(func() { // receiver w
						buf := make([]int64, mpi.DefaultEagerLimit/8+100)
						for left.Add(-1) >= 0 {
							st, err := mpi.Recv(c, buf, mpi.AnySource, mpi.AnyTag)
							if err != nil {
								errs[workers+w] = err
								return
							}
							id := msgID{int(buf[0]), int(buf[1]), int(buf[2])}
							if st.Source != id.src || st.Tag != tagOf(id) || mpi.GetCount[int64](st) != lenOf(id) || destOf(id) != c.Rank() {
								errs[workers+w] = fmt.Errorf("message %+v arrived with source %d, tag %d, %d elements", id, st.Source, st.Tag, mpi.GetCount[int64](st))
								return
							}
							mu.Lock()
							dup := seen[id]
							seen[id] = true
							mu.Unlock()
							if dup {
								errs[workers+w] = fmt.Errorf("message %+v received twice", id)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return err
				}
				if len(seen) != expected[c.Rank()] {
					return fmt.Errorf("received %d distinct messages, want %d", len(seen), expected[c.Rank()])
				}
				if _, ok, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); ok || err != nil {
					return fmt.Errorf("a message is left over (Iprobe ok %v, err %v)", ok, err)
				}
				return nil
			}, cfg.opts...)
		})
	}
}

// TestOrderPerGoroutine has 4 goroutines of rank 0 each send a stream on its own tag,
// through every send mode and both protocols, while 4 goroutines of rank 1 each
// receive one stream: each stream must arrive in order.
func TestOrderPerGoroutine(t *testing.T) {
	const streams, n = 4, 120
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, 2, func(c *mpi.Comm) error {
				errs := make([]error, streams)
				var wg sync.WaitGroup
				for s := range streams {
					wg.Go(func() {
						if c.Rank() == 0 {
							errs[s] = sendStreamed(c, s, n)
							return
						}
						buf := make([]byte, maxStamped)
						for seq := range n {
							st, err := mpi.Recv(c, buf, 0, s)
							if err == nil {
								err = checkMessage(buf, st, 0, s, stamped(s, seq))
							}
							if err != nil {
								errs[s] = fmt.Errorf("stream %d: %v", s, err)
								return
							}
						}
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			}, cfg.opts...)
		})
	}
}

// sendStreamed sends stream s (messages stamped with s as their source) to rank 1
// with tag s, cycling through the send modes.
func sendStreamed(c *mpi.Comm, s, n int) error {
	var reqs []*mpi.Request
	for seq := range n {
		msg := stamped(s, seq)
		var r *mpi.Request
		var err error
		switch seq % 4 {
		case 0:
			err = mpi.Send(c, msg, 1, s)
		case 1:
			r, err = mpi.Isend(c, msg, 1, s)
		case 2:
			err = mpi.Ssend(c, msg, 1, s)
		case 3:
			r, err = mpi.Irsend(c, msg, 1, s)
		}
		if err != nil {
			return err
		}
		if r != nil {
			reqs = append(reqs, r)
		}
	}
	_, err := mpi.Waitall(reqs...)
	return err
}

// TestMprobeConcurrent has 6 goroutines of rank 0 each take messages with
// Mprobe(AnySource, AnyTag) and receive them with Mrecv, while ranks 1..3 send: each
// Mrecv must get the very message its Mprobe described, and each message must be
// received once.
func TestMprobeConcurrent(t *testing.T) {
	const senders, perSender, takers = 3, 100, 6
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, senders+1, func(c *mpi.Comm) error {
				if c.Rank() != 0 {
					return sendStamped(c, 0, perSender, func(seq int) int { return seq % 4 })
				}
				var left atomic.Int64
				left.Store(senders * perSender)
				var mu sync.Mutex
				seen := map[[2]int]bool{}
				errs := make([]error, takers)
				var wg sync.WaitGroup
				for k := range takers {
					wg.Go(func() {
						buf := make([]byte, maxStamped)
						for left.Add(-1) >= 0 {
							msg, st, err := mpi.Mprobe(c, mpi.AnySource, mpi.AnyTag)
							if err != nil {
								errs[k] = err
								return
							}
							n := mpi.GetCount[byte](st)
							got, err := mpi.Mrecv(msg, buf)
							if err != nil {
								errs[k] = err
								return
							}
							src, seq := int(binary.LittleEndian.Uint64(buf)), int(binary.LittleEndian.Uint64(buf[8:]))
							if got.Source != st.Source || got.Tag != st.Tag || mpi.GetCount[byte](got) != n || src != st.Source {
								errs[k] = fmt.Errorf("Mprobe described {source %d, tag %d, %d bytes}, Mrecv got {%d, %d, %d} stamped from %d",
									st.Source, st.Tag, n, got.Source, got.Tag, mpi.GetCount[byte](got), src)
								return
							}
							if err := checkStamped(buf, got, src, seq, seq%4); err != nil {
								errs[k] = err
								return
							}
							mu.Lock()
							dup := seen[[2]int{src, seq}]
							seen[[2]int{src, seq}] = true
							mu.Unlock()
							if dup {
								errs[k] = fmt.Errorf("message %d of rank %d received twice", seq, src)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return err
				}
				if len(seen) != senders*perSender {
					return fmt.Errorf("received %d distinct messages, want %d", len(seen), senders*perSender)
				}
				return nil
			}, cfg.opts...)
		})
	}
}
