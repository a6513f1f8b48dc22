package p2p

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// sendFrom runs send(s, g) for goroutines goroutines of each of the ranks 1 to
// senders, and returns what to wait for them with.
func sendFrom(senders, goroutines int, send func(s, g int)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		for g := range goroutines {
			wg.Go(func() { send(s, g) })
		}
	}
	return &wg
}

// awaitErr fails t with what unless an error, nil, comes from ch within 20 s.
func awaitErr(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(what)
	}
}

// parkedReceive starts a receive at rank 0 of c of tag 0 from rank 1, which must
// get message 9, and returns once it has parked: its outcome comes on the channel.
func parkedReceive(c *Comm) <-chan error {
	done := make(chan error, 1)
	go func() {
		var m [1]byte
		_, err := receive(c, 0, m[:], 1, 0)
		if err == nil && m[0] != 9 {
			err = fmt.Errorf("the receive of tag 0 got message %d, want 9", m[0])
		}
		done <- err
	}()
	for c.Peers[0].parked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	return done
}

// laneMate returns the first tag after tag that takes the same mailbox lane.
func laneMate(tag int32) int32 {
	t := tag + 1
	for laneOf(t) != laneOf(tag) {
		t++
	}
	return t
}

// TestLanesKeepSenderOrder has two ranks of two goroutines each send messages of
// four tags in turn (two of them sharing a lane), by mailbox, inbox and direct send
// (that one not waiting), to a rank that receives them with patterns picked at
// random: an exact source or AnySource, an exact tag or AnyTag. Exact tags take messages out of their lanes
// ahead of the other lanes; a receive must still never get a message while an
// earlier one of the same goroutine that it matches is not received yet.
func TestLanesKeepSenderOrder(t *testing.T) {
	const senders, goroutines, n = 2, 2, 400
	tags := []int{0, 1, 2, int(laneMate(0))}
	tagOf := func(i int) int { return tags[i%len(tags)] }
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		t.Run(fmt.Sprint("spin ", spin), func(t *testing.T) {
			wd := NewWorld(senders+1, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: spin})
			c := &Comm{Peers: wd.Endpoints, World: wd}
			wg := sendFrom(senders, goroutines, func(s, g int) {
				// The direct sends do not wait: the receiver may want later messages first.
				var direct []*Request
				for i := range n {
					var err error
					if size := []int{8, 48, 200}[(i/4+g)%3]; size <= 64 {
						err = c.Send(s, stamped(g, i, size), 0, tagOf(i), Standard)
					} else {
						direct = append(direct, NewRequest())
						err = c.Isend(s, stamped(g, i, size), 0, tagOf(i), Standard, direct[len(direct)-1])
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
				for _, r := range direct {
					if err := wd.Endpoints[s].Wait(r); err != nil {
						t.Error(err)
					}
				}
			})
			// got[src][g][i]: message i of goroutine g of rank src was received.
			got := make([][][]bool, senders+1)
			left := make([][]int, senders+1) // messages not received, by source and tag
			for s := 1; s <= senders; s++ {
				got[s] = [][]bool{make([]bool, n), make([]bool, n)}
				left[s] = make([]int, len(tags))
				for i := range len(tags) {
					left[s][i] = goroutines * n / len(tags)
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(spin)))
			buf := make([]byte, 200)
			for range senders * goroutines * n {
				// A pattern that some message not yet received matches.
				var src, ti int
				for {
					src, ti = 1+rng.IntN(senders), rng.IntN(len(tags))
					if left[src][ti] > 0 {
						break
					}
				}
				pat := key{src: int32(src), tag: int32(tags[ti])}
				if rng.IntN(2) == 0 {
					pat.src = AnySource
				}
				if rng.IntN(2) == 0 {
					pat.tag = AnyTag
				}
				st, err := receive(c, 0, buf, int(pat.src), int(pat.tag))
				if err != nil {
					t.Fatal(err)
				}
				g, i := int(buf[0]), int(binary.LittleEndian.Uint32(buf[1:]))
				if st.Tag != tagOf(i) {
					t.Fatalf("message %d of rank %d goroutine %d has tag %d, want %d", i, st.Source, g, st.Tag, tagOf(i))
				}
				for j := range i {
					if !got[st.Source][g][j] && matches(pat, key{src: int32(st.Source), tag: int32(tagOf(j))}) {
						t.Fatalf("receive (source %d, tag %d) got message %d of rank %d goroutine %d before its message %d (tag %d)",
							pat.src, pat.tag, i, st.Source, g, j, tagOf(j))
					}
				}
				got[st.Source][g][i] = true
				left[st.Source][i%len(tags)]--
			}
			wg.Wait()
			if ep := wd.Endpoints[0]; ep.arrived() || ep.unexp.n != 0 {
				t.Fatalf("left over: %d unexpected messages", ep.unexp.n)
			}
		})
	}
}

// TestLaneHeadBehindClaim has a sender's message wait in one lane behind a slot
// that another sender has claimed but not yet written, and its next message, of
// another tag, come in another lane: a receive of AnyTag must wait for the claimed
// slot rather than take the later message first.
func TestLaneHeadBehindClaim(t *testing.T) {
	wd := NewWorld(3, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	b := newMailbox()
	ep.box.Store(b)
	stamp := b.clock.n.Add(1) - 1
	late, pos := ep.claimSlot(b.lane(laneOf(0)), 1) // rank 2's message of tag 0, not written yet
	for i, tag := range []int{0, 1} {
		if err := c.Send(1, []byte{byte(i + 1)}, 0, tag, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if laneOf(0) == laneOf(1) || b.lanes[laneOf(1)].Load() == nil {
		t.Fatal("the messages of tags 0 and 1 did not take two lanes")
	}
	time.AfterFunc(5*time.Millisecond, func() {
		late.stamp, late.key, late.n = stamp, key{src: 2}, 0
		late.publish(pos)
		ep.Progress() // as its sender does for a parked receive
	})
	var m [1]byte
	for want := byte(1); want <= 2; want++ {
		if st, err := receive(c, 0, m[:], 1, AnyTag); err != nil || m[0] != want {
			t.Fatalf("receive of AnyTag from rank 1: got message %d of tag %d (%v), want message %d", m[0], st.Tag, err, want)
		}
	}
	if st, err := receive(c, 0, m[:], 2, 0); err != nil || st.Len != 0 {
		t.Fatalf("receive from rank 2: %+v, %v", st, err)
	}
}

// TestParkedBehindClaim has a receive park for a message that comes in its lane
// behind a slot that another sender has claimed but not yet written: the receive
// parks first and the slot is claimed while it sleeps, or the message comes first.
// That sender's message is of a tag nobody waits for: it drains for no one when
// it publishes. So the drain by the message's own sender, or by the parking
// receive, must wait for the slot.
func TestParkedBehindClaim(t *testing.T) {
	for _, first := range []string{"receive", "message"} {
		t.Run(first+" first", func(t *testing.T) {
			wd := NewWorld(3, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 0})
			c := &Comm{Peers: wd.Endpoints, World: wd}
			ep := wd.Endpoints[0]
			sendThenReceive(t, c, mailboxAfter, func() {})
			b := ep.box.Load()
			var (
				late  *slot
				pos   uint64
				stamp uint64
			)
			claim := func() { // rank 2's message of another tag, not written yet
				stamp = b.clock.n.Add(1) - 1
				late, pos = ep.claimSlot(b.lane(laneOf(0)), 1)
			}
			other := laneMate(0)
			send := func() {
				if err := c.Send(1, []byte{9}, 0, 0, Standard); err != nil {
					t.Error(err)
				}
			}
			if first == "message" {
				claim()
				send()
			}
			done := parkedReceive(c)
			if first == "receive" {
				time.Sleep(time.Millisecond) // into its select
				claim()
			}
			time.AfterFunc(5*time.Millisecond, func() {
				late.stamp, late.key, late.n = stamp, key{src: 2, tag: other}, 0
				late.publish(pos)
			})
			if first == "receive" {
				send()
			}
			awaitErr(t, done, "the parked receive did not get its message from behind a claimed slot")
			if st, err := receive(c, 0, nil, 2, int(other)); err != nil || st.Len != 0 {
				t.Fatalf("receive from rank 2: %+v, %v", st, err)
			}
		})
	}
}

// TestProbeWakes has a Probe wait for a message that then comes through the
// mailbox: the sender's drain must move it to the unexpected queue, where the
// Probe looks, rather than leave it in its lane.
func TestProbeWakes(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 0})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {})
	done := make(chan error, 1)
	go func() {
		_, st, err := c.Probe(0, 1, 5, false)
		if err == nil && (st.Tag != 5 || st.Bytes != 1) {
			err = fmt.Errorf("the probe found %+v, want 1 byte of tag 5", st)
		}
		done <- err
	}()
	for ep.parked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Send(1, []byte{3}, 0, 5, Standard); err != nil {
		t.Fatal(err)
	}
	awaitErr(t, done, "the probe did not see the message come through the mailbox")
	var m [1]byte
	if _, err := receive(c, 0, m[:], 1, 5); err != nil || m[0] != 3 {
		t.Fatalf("got message %d (%v), want 3", m[0], err)
	}
}

// TestLaneCollision has a message that nobody receives yet sit at the head of a
// lane, and a receive of another tag of that lane park: the message it waits for,
// which comes behind, must still reach it (the head moving to the unexpected queue).
func TestLaneCollision(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 0})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	sendThenReceive(t, c, mailboxAfter, func() {})
	other := int(laneMate(0))
	if err := c.Send(1, []byte{7}, 0, other, Standard); err != nil {
		t.Fatal(err)
	}
	done := parkedReceive(c)
	if err := c.Send(1, []byte{9}, 0, 0, Standard); err != nil {
		t.Fatal(err)
	}
	awaitErr(t, done, "the parked receive did not get its message from behind another tag's")
	var m [1]byte
	if _, err := receive(c, 0, m[:], 1, other); err != nil || m[0] != 7 {
		t.Fatalf("receive of tag %d: got message %d (%v), want 7", other, m[0], err)
	}
}

// TestLeftHeadQuiet checks when a message left at a lane's head counts as arrived,
// which sends a rank's spinning waits to drain: not once a drain left it there,
// since nothing posted can take it, unless a receive polls its lane; again once a
// message comes behind it. A receive posted later takes it.
func TestLeftHeadQuiet(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 0})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {})
	if err := c.Send(1, []byte{1}, 0, 5, Standard); err != nil {
		t.Fatal(err)
	}
	if !ep.arrived() {
		t.Fatal("a new message does not count as arrived")
	}
	ep.mu.Lock()
	ep.polling = pollBit(5) // as a receive of tag 5 polling the lane
	ep.drain()
	ep.polling = 0
	ep.mu.Unlock()
	if !ep.arrived() {
		t.Fatal("a message that a drain left where a receive polls no longer counts as arrived")
	}
	ep.drainNow()
	if ep.arrived() {
		t.Fatal("a message that a drain left, nothing posted wanting it, still counts as arrived")
	}
	if err := c.Send(1, []byte{2}, 0, 5, Standard); err != nil {
		t.Fatal(err)
	}
	if !ep.arrived() {
		t.Fatal("a message behind the one left does not count as arrived")
	}
	ep.drainNow()
	r := NewRequest()
	c.Irecv(0, make([]byte, 1), 1, 6, r) // another lane's receive
	if ep.arrived() {
		t.Fatal("a receive posted in another lane makes the left message count as arrived")
	}
	for want := byte(1); want <= 2; want++ { // a receive looks for itself
		var m [1]byte
		if _, err := receive(c, 0, m[:], 1, 5); err != nil || m[0] != want {
			t.Fatalf("got message %d (%v), want %d", m[0], err, want)
		}
	}
	Cancel(r)
	if st := result(r); !st.Cancelled {
		t.Fatal("the receive of tag 6 was not cancelled")
	}
}

// TestRunAheadTags has two ranks exchange with a new tag at every step, one rank
// often a step ahead, with no spin: every receive parks, and a message that a
// drain left in its lane before its receive was posted must still wake it.
func TestRunAheadTags(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 0})
			c := &Comm{Peers: wd.Endpoints, World: wd}
			var wg sync.WaitGroup
			for me := range 2 {
				wg.Go(func() {
					for i := range 2000 {
						var step sync.WaitGroup
						step.Go(func() {
							var m [8]byte
							if st, err := receive(c, me, m[:], 1-me, i); err != nil || st.Tag != i {
								t.Errorf("rank %d step %d: got tag %d (%v)", me, i, st.Tag, err)
							}
						})
						step.Go(func() {
							if err := c.Send(me, make([]byte, 8), 1-me, i, Standard); err != nil {
								t.Error(err)
							}
						})
						step.Wait()
					}
				})
			}
			wg.Wait()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the exchange hung")
	}
}
