package netd

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// poller is a rank polling a Device's rings (Device.Poll) on a goroutine of
// its own until stop.
func poller(d *Device) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	d.PollBegin()
	go func() {
		defer wg.Done()
		defer d.PollEnd()
		for {
			select {
			case <-done:
				return
			default:
				d.Poll()
				runtime.Gosched() // as a rank's spin does
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// TestPoll: while a rank polls the rings, the messages that come whole are
// handled on its goroutine and the receive daemon stands aside; a message
// longer than the daemon's buffer is left to the daemon, in order with the
// others; once the rank stops, the daemon handles everything again.
func TestPoll(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		overShm(t)(i, cfg, p)
		cfg.Spin = 50 * time.Microsecond
	})
	hd := ps[1].p2p
	seq := uint64(0)
	send := func(size int) {
		t.Helper()
		if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, size), payloadOf(0, 0, seq, size)); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	send(8) // the ring is up before the rank polls
	waitFor(t, "the first message", func() bool { return hd.count() == 1 })

	stop := poller(ps[1].dev)
	for range 50 {
		send(8)
		send(1000)
		waitFor(t, "a message", func() bool { return hd.count() == int(seq) })
	}
	big := bufSize // longer than the daemon's buffer: the daemon's to read
	for range 5 {
		send(big)
		send(8)
		send(1000)
	}
	waitFor(t, "the messages", func() bool { return hd.count() == int(seq) })
	stop()
	for range 20 {
		send(8)
	}
	waitFor(t, "the messages", func() bool { return hd.count() == int(seq) })

	recs := hd.records()
	checkOrder(t, recs, int(seq))
	for i, r := range recs {
		switch {
		case i >= 1 && i <= 100 && !r.inline:
			t.Errorf("message %d (%d bytes), sent while a rank polled: handled by the daemon", i, r.h.Frag)
		case int(r.h.Frag) == big && r.inline:
			t.Errorf("message %d (%d bytes): handled by the polling rank, longer than the buffer", i, r.h.Frag)
		case i >= len(recs)-20 && r.inline:
			t.Errorf("message %d, sent after the rank stopped polling: handled inline", i)
		}
	}
}

// TestPollRace: ranks poll the rings at once while two procs stream messages
// of every size to a third, the daemons handling what the ranks leave: every
// message arrives once, whole and in order.
func TestPollRace(t *testing.T) {
	noLeaks(t)
	const msgs = 300
	ps := startJob(t, 3, func(i int, cfg *Config, p *tproc) {
		overShm(t)(i, cfg, p)
		cfg.Spin = 20 * time.Microsecond
	})
	var inline atomic.Int32
	ps[0].p2p.fn = func(proc int, h *wire.Header, p *Payload) error {
		r := readAll(proc, h, p)
		if r.inline {
			inline.Add(1)
		}
		hd := ps[0].p2p
		hd.mu.Lock()
		hd.got = append(hd.got, r)
		hd.mu.Unlock()
		return nil
	}
	var stops []func()
	for range 3 {
		stops = append(stops, poller(ps[0].dev))
	}
	var wg sync.WaitGroup
	for _, from := range []int{1, 2} {
		wg.Go(func() {
			for seq := range uint64(msgs) {
				size := []int{0, 8, 100, 3000, 20000, 70000}[seq%6]
				if err := ps[from].dev.Send(0, ChannelP2P, message(ChannelP2P, from, 0, seq, size), payloadOf(from, 0, seq, size)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "the messages", func() bool { return ps[0].p2p.count() == 2*msgs })
	for _, stop := range stops {
		stop()
	}
	checkOrder(t, ps[0].p2p.records(), msgs)
	if inline.Load() == 0 {
		t.Errorf("no message handled by a polling rank")
	}
}

// TestRingPollHandBack: daemons that stand aside for a polling rank are
// listed as parked; when the last rank stops, the first of them leads again,
// nudged, with a new budget, but never one whose connection has ended.
func TestRingPollHandBack(t *testing.T) {
	var rp ringPoll
	newConn := func() *conn { return &conn{nudge: make(chan struct{}, 1)} }
	gone, c := newConn(), newConn()
	if !rp.leadOrPark(gone) {
		t.Fatal("the first daemon to poll does not lead")
	}
	rp.inline.Add(1)
	if rp.leadOrPark(gone) || rp.leadOrPark(c) || rp.leader != nil {
		t.Fatalf("a rank polls: the daemons must stand aside, leader %p", rp.leader)
	}
	rp.leave(gone)
	rp.inline.Add(-1)
	rp.handBack()
	if rp.leader != c || !c.handed.Load() || len(c.nudge) != 1 || len(gone.nudge) != 0 {
		t.Fatalf("after the rank: leader %p (want %p), handed %v, nudges %d and %d", rp.leader, c, c.handed.Load(), len(c.nudge), len(gone.nudge))
	}
	if len(rp.parked) != 0 || rp.count.Load() != 0 {
		t.Fatalf("%d daemons still listed as parked", len(rp.parked))
	}
}
