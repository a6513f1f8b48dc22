package netd

import (
	"testing"
	"time"
)

// TestDemand: while a rank of the receiving proc waits (Demand), its daemon
// polls on past its budget, so messages spaced far wider than the budget find it
// polling; with nobody waiting, each finds it blocked in the kernel. Over
// sockets it blocks either way: its polling would keep the other sockets'
// daemons from the network poller.
func TestDemand(t *testing.T) {
	const msgs, gap = 20, 2 * time.Millisecond // gap: over the budget, under demandPoll
	for name, tweak := range map[string]func(int, *Config, *tproc){"tcp": nil, "shm": overShm(t)} {
		for _, waiting := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				noLeaks(t)
				ps := startJob(t, 2, func(i int, cfg *Config, p *tproc) {
					if tweak != nil {
						tweak(i, cfg, p)
					}
					cfg.Spin = 20 * time.Microsecond
				})
				if waiting {
					ps[1].dev.Demand().Add()
					defer ps[1].dev.Demand().Done()
				}
				for seq := range uint64(msgs) {
					time.Sleep(gap)
					if err := ps[0].dev.Send(1, ChannelP2P, message(ChannelP2P, 0, 0, seq, 8), payloadOf(0, 0, seq, 8)); err != nil {
						t.Fatal(err)
					}
				}
				hd := ps[1].p2p
				waitFor(t, "the messages", func() bool { return hd.count() == msgs })
				recs := hd.records()
				checkOrder(t, recs, msgs)
				blocked := recs[msgs-1].blocked - recs[0].blocked // the first may find the daemon blocked either way
				switch polls := waiting && name == "shm"; {
				case polls && blocked > msgs/4:
					t.Errorf("a rank waits: the daemon blocked in the kernel %d times for %d messages %v apart, want at most %d", blocked, msgs-1, gap, msgs/4)
				case !polls && blocked < msgs/2:
					t.Errorf("waiting %v over %s: the daemon blocked in the kernel %d times for %d messages %v apart, want at least %d (its budget is 20µs)", waiting, name, blocked, msgs-1, gap, msgs/2)
				}
			})
		}
	}
}

// TestRingPollLeader: while a rank waits, one receive daemon of the proc polls
// every ring; the daemons of the others park, and the poller nudges each when
// its ring has data. Messages from two procs, spaced wider than the poll
// budget, all arrive in order, the parked daemons' messages through nudges, and
// none of the daemons blocks in the kernel for them.
func TestRingPollLeader(t *testing.T) {
	const msgs, gap = 20, 2 * time.Millisecond
	noLeaks(t)
	ps := startJob(t, 3, func(i int, cfg *Config, p *tproc) {
		overShm(t)(i, cfg, p)
		cfg.Spin = 20 * time.Microsecond
	})
	for _, from := range []int{1, 2} { // both rings up before the clock starts
		if err := ps[from].dev.Send(0, ChannelP2P, message(ChannelP2P, from, 0, 0, 8), payloadOf(from, 0, 0, 8)); err != nil {
			t.Fatal(err)
		}
	}
	hd := ps[0].p2p
	waitFor(t, "the first messages", func() bool { return hd.count() == 2 })
	ps[0].dev.Demand().Add()
	defer ps[0].dev.Demand().Done()
	for seq := uint64(1); seq < msgs; seq++ {
		for _, from := range []int{1, 2} {
			time.Sleep(gap)
			if err := ps[from].dev.Send(0, ChannelP2P, message(ChannelP2P, from, 0, seq, 8), payloadOf(from, 0, seq, 8)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the messages", func() bool { return hd.count() == 2*msgs })
	recs := hd.records()
	checkOrder(t, recs, msgs)
	first, last := map[int]rec{}, map[int]rec{}
	for _, r := range recs {
		if _, ok := first[r.proc]; !ok {
			first[r.proc] = r
		}
		last[r.proc] = r
	}
	parks, nudged := 0, 0
	for _, from := range []int{1, 2} {
		if blocked := last[from].blocked - first[from].blocked; blocked > msgs/4 {
			t.Errorf("from proc %d: the daemon blocked in the kernel %d times for %d messages %v apart, want at most %d", from, blocked, msgs-1, gap, msgs/4)
		}
		parks += last[from].parks - first[from].parks
		nudged += last[from].nudged - first[from].nudged
	}
	if parks == 0 || nudged == 0 {
		t.Errorf("the daemons parked %d times and were nudged for data %d times for %d messages, want both above 0: one daemon polls for all", parks, nudged, 2*(msgs-1))
	}
}
