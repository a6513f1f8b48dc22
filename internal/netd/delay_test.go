package netd

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// delayed starts a job of n procs whose Devices delay every message by d.
func delayedJob(t *testing.T, n int, d time.Duration) []*tproc {
	return startJob(t, n, func(_ int, cfg *Config, _ *tproc) { cfg.Delay = d })
}

// TestDelayOrder: with a delay, Sends and Posts from two goroutines per channel,
// 0 bytes to 8 MiB, arrive intact and in order per sender, and a Send's payload
// may be overwritten as soon as Send returns.
func TestDelayOrder(t *testing.T) {
	noLeaks(t)
	ps := delayedJob(t, 2, time.Millisecond)
	const count, senders = 60, 2
	var wg sync.WaitGroup
	var failed atomic.Value
	for _, ch := range []Channel{ChannelP2P, ChannelColl} {
		for tag := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := range uint64(count) {
					size := sizes[seq%uint64(len(sizes))]
					h := message(ch, 0, tag, seq, size)
					if seq%2 == 0 {
						// A scratch buffer, spoiled after Send returns.
						buf := append([]byte(nil), payloadOf(0, tag, seq, size)...)
						if err := ps[0].dev.Send(1, ch, h, buf); err != nil {
							failed.Store(err)
							return
						}
						clear(buf)
						continue
					}
					ps[0].dev.Post(1, ch, h, payloadOf(0, tag, seq, size), func(err error) {
						if err != nil {
							failed.Store(err)
						}
					})
				}
			}()
		}
	}
	wg.Wait()
	for _, ch := range []Channel{ChannelP2P, ChannelColl} {
		hd := ps[1].handler(ch)
		waitFor(t, "every message on "+ch.String(), func() bool { return hd.count() == senders*count || failed.Load() != nil })
		if err := failed.Load(); err != nil {
			t.Fatal(err)
		}
		checkOrder(t, hd.records(), count)
	}
}

// TestDelayAtLeast: each message arrives at least the delay after it was sent,
// a ping-pong's round trip takes at least twice the delay, and a handler that
// answers with Post is not held by the delay.
func TestDelayAtLeast(t *testing.T) {
	noLeaks(t)
	const delay = 100 * time.Millisecond
	var sent sync.Map // seq -> time.Time
	arrived := make(chan time.Duration, 8)
	var slowest atomic.Int64
	ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
		cfg.Delay = delay
		switch i {
		case 0:
			p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
				at, _ := sent.Load(h.Seq)
				arrived <- time.Since(at.(time.Time))
				return nil
			}
		case 1:
			dev := func() *Device { return p.dev }
			p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
				start := time.Now()
				for range 10 {
					dev().Post(proc, ChannelP2P, message(ChannelP2P, 1, 0, h.Seq, 0), nil, nil)
				}
				slowest.Store(max(slowest.Load(), int64(time.Since(start))))
				return nil
			}
		}
	})
	for seq := range uint64(3) {
		sent.Store(seq, time.Now())
		if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, 8), payloadOf(0, 0, seq, 8)); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			select {
			case rtt := <-arrived:
				if rtt < 2*delay {
					t.Fatalf("round trip %v with a delay of %v each way", rtt, delay)
				}
			case <-time.After(waitLimit):
				t.Fatal("no answer")
			}
		}
	}
	if d := time.Duration(slowest.Load()); d >= delay/2 {
		t.Errorf("a handler's 10 Posts took %v with a delay of %v: the delay held the receive daemon", d, delay)
	}
}

// TestDelayZero: without a delay, Send and Post go straight to the link: no
// delay line, no goroutine, no copy.
func TestDelayZero(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, nil)
	pl := payloadOf(0, 0, 0, 100)
	for seq := range uint64(10) {
		if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, 100), pl); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the messages", func() bool { return ps[1].p2p.count() == 10 })
	h := message(ChannelP2P, 0, 0, 10, 100)
	allocs := testing.AllocsPerRun(100, func() {
		if err := ps[0].dev.Send(1, ChannelP2P, h, pl); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Send of 100 bytes without a delay allocates %v times, want 0", allocs)
	}
	ps[0].dev.lines.Range(func(k, _ any) bool {
		t.Error("a delay line exists without a delay")
		return false
	})
}

// TestDelayClose: Close hands over what waits on the delay lines before it
// closes: messages sent just before Close arrive; Sends after it fail.
func TestDelayClose(t *testing.T) {
	noLeaks(t)
	ps := delayedJob(t, 2, 50*time.Millisecond)
	const count = 20
	for seq := range uint64(count) {
		if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, 64), payloadOf(0, 0, seq, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ps[0].dev.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the messages sent before Close", func() bool { return ps[1].p2p.count() == count })
	checkOrder(t, ps[1].p2p.records(), count)
	if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, count, 0), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if _, lost := ps[1].p2p.lostErr(0); lost {
		t.Error("an orderly Close with a delay counted as a lost link")
	}
}

// TestDelayUnreachable: a delayed Send to a proc that cannot be reached
// returns at once; the failure reaches the Handlers' Lost.
func TestDelayUnreachable(t *testing.T) {
	noLeaks(t)
	ps := startJob(t, 2, func(i int, cfg *Config, _ *tproc) {
		cfg.Delay = time.Millisecond
		cfg.Addrs = func(int) ([]string, error) { return nil, errors.New("no address") }
	})
	if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, 0, 8), payloadOf(0, 0, 0, 8)); err != nil {
		t.Fatalf("delayed Send: %v, want nil (the error goes to Lost)", err)
	}
	waitFor(t, "Lost", func() bool {
		_, p2pLost := ps[0].p2p.lostErr(1)
		_, collLost := ps[0].coll.lostErr(1)
		return p2pLost && collLost
	})
	if err, _ := ps[0].p2p.lostErr(1); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Lost with %v, want ErrUnreachable", err)
	}
}

// TestDelayNegative: a negative delay is refused.
func TestDelayNegative(t *testing.T) {
	_, err := New(Config{Self: 0, Procs: 1, Job: testJob, Key: testKey, P2P: &handler{}, Coll: &handler{}, Delay: -time.Microsecond})
	if err == nil {
		t.Fatal("New accepted a negative delay")
	}
}

// BenchmarkSendDelay is a small Send's cost without and with a delay line.
func BenchmarkSendDelay(b *testing.B) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond} {
		b.Run(d.String(), func(b *testing.B) {
			ps := startJob(b, 2, func(_ int, cfg *Config, _ *tproc) { cfg.Delay = d })
			h := message(ChannelP2P, 0, 0, 0, 64)
			pl := payloadOf(0, 0, 0, 64)
			for b.Loop() {
				if err := ps[0].dev.Send(1, ChannelP2P, h, pl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
