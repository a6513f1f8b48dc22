package p2p

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMailboxKeepsPerSenderOrder has three senders stream small messages (which take
// the mailbox when it is free and the inbox otherwise) to one receiver that takes
// them with AnySource, and checks that each sender's messages arrive in order: of 8
// bytes, and of lengths up to past mailboxCap, whose claims of several slots race.
func TestMailboxKeepsPerSenderOrder(t *testing.T) {
	const senders, n = 3, 3000
	for _, long := range []bool{false, true} {
		for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
			senderOrder(t, senders, n, long, spin)
		}
	}
}

// senderOrder is one run of TestMailboxKeepsPerSenderOrder: message i of a sender
// starts with i and, when long, is 8+i%(mailboxCap+8) bytes long, the rest of
// them the sender's rank.
func senderOrder(t *testing.T, senders, n int, long bool, spin time.Duration) {
	t.Helper()
	size := func(int) int { return 8 }
	if long {
		size = func(i int) int { return 8 + i%(mailboxCap+8) }
	}
	wd := NewWorld(senders+1, Config{EagerLimit: 1024, PoolCap: 1 << 20, Spin: spin})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		wg.Go(func() {
			buf := bytes.Repeat([]byte{byte(s)}, mailboxCap+16)
			for i := range n {
				binary.LittleEndian.PutUint64(buf, uint64(i))
				if err := c.Send(s, buf[:size(i)], 0, 7, Standard); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	next := make([]uint64, senders+1)
	buf := make([]byte, mailboxCap+16)
	for range senders * n {
		st, err := receive(c, 0, buf, AnySource, 7)
		if err != nil {
			t.Fatal(err)
		}
		i := next[st.Source]
		if got := binary.LittleEndian.Uint64(buf); got != i {
			t.Fatalf("spin %v, long %v: from rank %d got message %d, want %d", spin, long, st.Source, got, i)
		}
		want := bytes.Repeat([]byte{byte(st.Source)}, size(int(i))-8)
		if st.Bytes != size(int(i)) || !bytes.Equal(buf[8:st.Bytes], want) {
			t.Fatalf("spin %v, long %v: message %d from rank %d has %d bytes % x, want %d", spin, long, i, st.Source, st.Bytes, buf[8:st.Bytes], size(int(i)))
		}
		next[st.Source]++
	}
	wg.Wait()
	if wd.Endpoints[0].arrived() {
		t.Fatal("messages left over")
	}
}

// TestMailboxUnexpected sends to a rank that receives nothing meanwhile: once the
// rank has its mailbox, the messages fill it, then (the receiver taking none within
// the spin) go through the inbox. All queue as unexpected, in the order sent, and
// the pool gets back what they held once they are received.
func TestMailboxUnexpected(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {
		if ep.box.Load() == nil {
			t.Fatal("no mailbox after mailboxAfter messages")
		}
	})
	sendThenReceive(t, c, laneSlots+10, func() {
		if ln := laneFor(ep, 0); ln.tail.Load() != laneSlots || !ln.stuck.Load() || ep.inbox.Load() == nil {
			t.Fatal("the messages did not fill the lane, find it stuck and go through the inbox")
		}
	})
	if laneFor(ep, 0).stuck.Load() {
		t.Fatal("the lane is still stuck after its receiver took messages")
	}
	if got := wd.Pooled(); got > wd.chunk {
		t.Fatalf("after every message was received the pool still lends %d", got)
	}
}

// TestMailboxPoolCharge checks the pool's account of the mailbox: a message in a
// slot charges nothing, one that leaves the ring for the unexpected queue charges
// its eager copy until it is received, and the ring takes no message while the
// pool is full.
func TestMailboxPoolCharge(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	// held is what the pool lends beyond the credit the endpoints keep: the
	// charges of the messages held.
	held := func() int64 {
		h := wd.Pooled()
		for _, e := range wd.Endpoints {
			h -= e.credit.Load() + e.returned
		}
		return h
	}
	exchange := func(n int, between func()) {
		sendThenReceive(t, c, n, between)
		if h := held(); h != 0 {
			t.Fatalf("the pool holds %d bytes for messages all received", h)
		}
	}
	exchange(mailboxAfter, func() {})
	b := laneFor(ep, 0)
	if b == nil {
		t.Fatal("no mailbox after mailboxAfter messages")
	}
	const n = 10
	exchange(n, func() {
		if got := b.tail.Load() - b.head.Load(); got != n {
			t.Fatalf("%d messages in the ring, want %d", got, n)
		}
		if h := held(); h != 0 {
			t.Fatalf("the ring's messages charge the pool %d bytes, want none", h)
		}
		ep.Progress() // no receive is posted: the lane's messages stay
		if ep.unexp.n != 0 || b.head.Load() != 0 {
			t.Fatalf("a drain with no receive posted took the lane's messages: %d unexpected", ep.unexp.n)
		}
		mergeAll(ep) // a merge, as Probe's, queues them as unexpected
		if ep.unexp.n != n {
			t.Fatalf("%d unexpected messages after the merge, want %d", ep.unexp.n, n)
		}
		if h, want := held(), n*chargeOf(1); h != want {
			t.Fatalf("the unexpected messages charge the pool %d bytes, want %d", h, want)
		}
	})
	room := wd.cfg.PoolCap - wd.Pooled()
	wd.pooled.Add(room)
	if _, ok := ep.deposit([]byte{1}, key{0, 1, 0}, true); ok {
		t.Fatal("a message went into the ring while the pool was full")
	}
	wd.pooled.Add(-room)
	exchange(1, func() {
		if b.tail.Load() == b.head.Load() {
			t.Fatal("the ring refused a message with the pool not full")
		}
		// The pool fills up while the message is in the ring, and nothing is
		// left to charge it to: it is charged over the cap when it leaves.
		wd.sweep(wd.sweeps.Load())
		wd.pooled.Add(-ep.returned)
		ep.returned = 0
		room := wd.cfg.PoolCap - wd.Pooled()
		wd.pooled.Add(room)
		mergeAll(ep)
		if h, want := held()-room, chargeOf(1); h != want {
			t.Fatalf("the message queued with the pool full charges it %d bytes, want %d", h, want)
		}
		wd.pooled.Add(-room)
	})
}

// laneFor returns the lane of ep's mailbox that messages of tag take, or nil.
func laneFor(ep *Endpoint, tag int32) *lane {
	if b := ep.box.Load(); b != nil {
		return b.lanes[laneOf(tag)].Load()
	}
	return nil
}

// mergeAll moves what ep's mailbox and inbox hold into the engine, as Probe does.
func mergeAll(ep *Endpoint) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.merge()
}

// sendThenReceive has rank 1 of c send n one-byte messages to rank 0, calls
// between, then has rank 0 receive them and checks that they come in order.
func sendThenReceive(t *testing.T, c *Comm, n int, between func()) {
	t.Helper()
	for i := range n {
		if err := c.Send(1, []byte{byte(i)}, 0, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	between()
	for i := range n {
		var b [1]byte
		if st, err := receive(c, 0, b[:], 1, 0); err != nil || st.Bytes != 1 || b[0] != byte(i) {
			t.Fatalf("message %d: got %d (%+v, %v)", i, b[0], st, err)
		}
	}
}

// TestMailboxPacesSender has a blocking sender stream small messages to a receiver
// slower than it: the sender waits for the ring instead of queueing a backlog, so
// the receiver never finds more than the ring and the messages before it queued.
func TestMailboxPacesSender(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Second})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	const n = 20 * laneSlots
	go func() {
		for i := range n {
			if err := c.Send(1, []byte{byte(i)}, 0, 0, Standard); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ep := wd.Endpoints[0]
	most := 0
	for i := range n {
		var b [1]byte
		if _, err := receive(c, 0, b[:], 1, 0); err != nil || b[0] != byte(i) {
			t.Fatalf("message %d: got %d (%v)", i, b[0], err)
		}
		ep.mu.Lock()
		queued := ep.unexp.n
		if ln := laneFor(ep, 0); ln != nil {
			queued += int(ln.tail.Load() - ln.head.Load())
		}
		ep.mu.Unlock()
		most = max(most, queued)
		time.Sleep(time.Microsecond) // slower than the sender
	}
	if most > mailboxAfter+laneSlots {
		t.Fatalf("the receiver found %d messages queued, more than the %d before the mailbox and in it", most, mailboxAfter+laneSlots)
	}
}

// TestMailboxOrderBehindClaim has a sender's message wait in the mailbox behind a
// slot that another sender has claimed but not yet written: the same sender's next
// message, through the inbox or sent directly, must not overtake it.
func TestMailboxOrderBehindClaim(t *testing.T) {
	for _, next := range []struct {
		name string
		size int
	}{{"inbox", 48}, {"direct", 200}} {
		t.Run(next.name, func(t *testing.T) {
			wd := NewWorld(3, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Millisecond})
			c := &Comm{Peers: wd.Endpoints, World: wd}
			ep := wd.Endpoints[0]
			ep.box.Store(newMailbox())
			ln := ep.box.Load().lane(laneOf(0))
			late, pos := ep.claimSlot(ln, 1) // rank 2's message, not written yet
			if err := c.Send(1, []byte{1}, 0, 0, Standard); err != nil {
				t.Fatal(err)
			}
			if ln.tail.Load() != 2 {
				t.Fatal("rank 1's first message did not take the mailbox")
			}
			sent := make(chan error, 1)
			go func() { sent <- c.Send(1, make([]byte, next.size), 0, 0, Standard) }()
			time.AfterFunc(5*time.Millisecond, func() {
				late.key, late.n = key{src: 2}, 0
				late.publish(pos)
			})
			buf := make([]byte, 200)
			for want := range []int{1, next.size} {
				st, err := receive(c, 0, buf, 1, 0)
				if err != nil || st.Len != []int{1, next.size}[want] {
					t.Fatalf("receive %d from rank 1: got %d bytes (%v), want %d", want, st.Len, err, []int{1, next.size}[want])
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if _, err := receive(c, 0, buf, 2, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRecvPollsBeforePosting has a blocking receive wait for a message that comes
// later, through the mailbox (8 bytes) or sent directly (200 bytes): within the spin,
// which here outlasts the test, it takes the message without posting a receive. A
// receive posted by another goroutine of the rank meanwhile still gets the first
// matching message.
func TestRecvPollsBeforePosting(t *testing.T) {
	for _, size := range []int{8, 200} {
		wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Hour})
		c := &Comm{Peers: wd.Endpoints, World: wd}
		ep := wd.Endpoints[0]
		ep.box.Store(newMailbox())
		send := func(v byte) {
			time.Sleep(5 * time.Millisecond)
			msg := make([]byte, size)
			msg[0] = v
			if err := c.Send(1, msg, 0, 3, Standard); err != nil {
				t.Error(err)
			}
		}
		recv := func(want byte) {
			t.Helper()
			buf := make([]byte, size)
			posts := postCount(ep)
			done := make(chan error, 1)
			go func() {
				st, err := receive(c, 0, buf, 1, 3)
				if err == nil && (st.Len != size || buf[0] != want) {
					err = fmt.Errorf("got %d bytes, message %d, want message %d", st.Len, buf[0], want)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%d bytes: %v", size, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%d bytes: the polling receive did not see message %d come", size, want)
			}
			if postCount(ep) != posts {
				t.Fatalf("%d bytes: the receive posted itself instead of taking the message as it came", size)
			}
		}
		go send(1)
		recv(1)

		early := NewRequest()
		c.Irecv(0, make([]byte, size), AnySource, AnyTag, early)
		go func() { send(2); send(3) }()
		recv(3)
		if err := ep.Wait(early); err != nil || early.buf()[0] != 2 {
			t.Fatalf("%d bytes: the posted receive got message %d (%v), want 2", size, early.buf()[0], err)
		}
	}
}

// TestOnePollerALane has two goroutines of a rank receive at once. On tags of
// one mailbox lane, one polls and the other posts itself at once; on tags of two
// lanes, both poll. Either way both get their messages.
func TestOnePollerALane(t *testing.T) {
	same := int32(2)
	for laneOf(same) != laneOf(1) {
		same++
	}
	for _, tc := range []struct {
		name         string
		tags         [2]int
		posts, polls int
	}{{"one lane", [2]int{1, int(same)}, 1, 1}, {"two lanes", [2]int{1, 2}, 0, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Hour})
			c := &Comm{Peers: wd.Endpoints, World: wd}
			ep := wd.Endpoints[0]
			got := make(chan error, 2)
			for _, tag := range tc.tags {
				go func() {
					var b [1]byte
					st, err := receive(c, 0, b[:], 1, tag)
					if err == nil && (st.Tag != tag || b[0] != byte(tag)) {
						err = fmt.Errorf("receive of tag %d got tag %d, message %d", tag, st.Tag, b[0])
					}
					got <- err
				}()
			}
			for deadline := time.Now().Add(20 * time.Second); int(postCount(ep)) != tc.posts || polls(ep) != tc.polls; {
				if time.Now().After(deadline) {
					t.Fatalf("%d receives posted, %d polling: want %d and %d", postCount(ep), polls(ep), tc.posts, tc.polls)
				}
				time.Sleep(time.Millisecond)
			}
			for _, tag := range []int{tc.tags[1], tc.tags[0]} {
				if err := c.Send(1, []byte{byte(tag)}, 0, tag, Standard); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				awaitErr(t, got, "a receive did not complete")
			}
			if n := postCount(ep); int(n) != tc.posts {
				t.Fatalf("%d receives posted, want %d", n, tc.posts)
			}
		})
	}
}

// polls says how many receives of ep poll.
func polls(ep *Endpoint) int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return bits.OnesCount16(ep.polling)
}

// postCount is how many receives ep has posted so far.
func postCount(ep *Endpoint) uint64 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.seq
}

// TestParkedTagDrains has rank 1 send messages of tag 2 to rank 0 while the only
// parked goroutine of rank 0 waits for tag 1 (its count stands in for one, so that
// no wake-up of its own drains meanwhile): they stay in the mailbox, where a drain
// for the parked one would have queued them as unexpected copies. Once they fill
// the ring, the sender makes room by queueing them (nobody takes them) instead of
// waiting a whole spin and turning to the inbox. Then a goroutine parks for real
// in a receive of tag 1, the message of tag 1 wakes it, the others arrive in
// order, and nothing stays counted.
func TestParkedTagDrains(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 200 * time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {})
	ep.want(tagsOf(1), 1)
	ep.parked.Add(1)
	const n = 10
	for i := range n {
		if err := c.Send(1, []byte{byte(i)}, 0, 2, Standard); err != nil {
			t.Fatal(err)
		}
	}
	ep.mu.Lock()
	queued := ep.unexp.n
	ep.mu.Unlock()
	if queued != 0 {
		t.Fatalf("%d messages of tag 2 were queued as unexpected for a goroutine parked on tag 1", queued)
	}
	const more = n + laneSlots
	for i := n; i < more; i++ {
		if err := c.Send(1, []byte{byte(i)}, 0, 2, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if laneFor(ep, 2).stuck.Load() || ep.inbox.Load() != nil {
		t.Fatal("the sender waited for a receiver parked on another tag, and turned to the inbox")
	}
	ep.parked.Add(-1)
	ep.want(tagsOf(1), -1)

	done := make(chan error)
	go func() {
		var b [1]byte
		st, err := receive(c, 0, b[:], 1, 1)
		if err == nil && (b[0] != 99 || st.Tag != 1) {
			err = fmt.Errorf("the receive of tag 1 got %d with tag %d", b[0], st.Tag)
		}
		done <- err
	}()
	for ep.parked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if w := ep.wanted.Load(); w != tagsOf(1) {
		t.Errorf("a receive parked on tag 1 wants the tag classes %#x, want %#x", w, tagsOf(1))
	}
	if err := c.Send(1, []byte{99}, 0, 1, Standard); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range more {
		var b [1]byte
		if _, err := receive(c, 0, b[:], 1, 2); err != nil || b[0] != byte(i) {
			t.Fatalf("message %d of tag 2: got %d (%v)", i, b[0], err)
		}
	}
	if ep.parked.Load() != 0 || ep.wanted.Load() != 0 {
		t.Fatalf("after the waits %d goroutines parked, wanting tags %#x", ep.parked.Load(), ep.wanted.Load())
	}
}

// TestEarlySendCancel has rank 1 start small standard sends that complete at once in
// rank 0's ring (SendEarly) and cancel them: one still in its slot, one that a merge
// moved to the unexpected queue, and one received already, which stays sent. The
// receiver then gets exactly the messages not cancelled, in order, a full lane of
// early sends later goes through the inbox, and the pool gets back what they held.
func TestEarlySendCancel(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {})
	send := func(v byte) *Early {
		t.Helper()
		var e Early
		if ok, err := c.SendEarly(1, []byte{v}, 0, 3, Standard, &e); !ok || err != nil {
			t.Fatalf("SendEarly of message %d: %v, %v", v, ok, err)
		}
		return &e
	}
	want := func(v byte) {
		t.Helper()
		var b [1]byte
		if st, err := receive(c, 0, b[:], 1, 3); err != nil || b[0] != v {
			t.Fatalf("received %d (%+v, %v), want message %d", b[0], st, err, v)
		}
	}
	inRing := send(1)
	if inRing.ticket == 0 {
		t.Fatal("a small early send with a free lane did not go into the ring")
	}
	moved := send(2)
	kept := send(3)
	c.CancelEarly(1, 0, 3, inRing)
	if !inRing.cancelled {
		t.Fatal("an early send still in its slot was not cancelled")
	}
	mergeAll(ep)
	if ep.unexp.n != 2 {
		t.Fatalf("%d unexpected messages after the merge, want 2 (the cancelled slot passed over)", ep.unexp.n)
	}
	c.CancelEarly(1, 0, 3, moved)
	if !moved.cancelled || ep.unexp.n != 1 {
		t.Fatalf("an early send moved to the unexpected queue: cancelled %v, %d left queued", moved.cancelled, ep.unexp.n)
	}
	c.CancelEarly(1, 0, 3, moved) // again: nothing left to withdraw
	if !moved.cancelled || ep.unexp.n != 1 {
		t.Fatal("a second Cancel changed the outcome")
	}
	want(3)
	c.CancelEarly(1, 0, 3, kept)
	if kept.cancelled {
		t.Fatal("an early send cancelled after it was received")
	}
	late := send(4)
	c.CancelEarly(1, 0, 3, late)
	after := send(5)
	want(5) // the cancelled slot ahead of it is passed over
	if !late.cancelled || after.cancelled {
		t.Fatal("wrong outcome of a Cancel in the ring")
	}
	for i := range laneSlots + 1 {
		send(byte(i))
	}
	if ep.inbox.Load() == nil {
		t.Fatal("early sends to a full lane did not go through the inbox")
	}
	for i := range laneSlots + 1 {
		want(byte(i))
	}
	if ep.arrived() {
		t.Fatal("messages left over")
	}
	if got := wd.Pooled(); got > wd.chunk {
		t.Fatalf("after every message was received or cancelled the pool still lends %d", got)
	}
}

// TestMailboxSpans sends messages longer than a slot holds, up to mailboxCap, through
// a lane: received straight (bursts of them, so that they wrap round the ring), into
// posted receives, from the unexpected queue after a merge, into a shorter buffer,
// and past a cancelled one. Every message arrives whole, in order, with its length,
// and each took the slots its length needs.
func TestMailboxSpans(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 1024, PoolCap: 1 << 20, Spin: time.Millisecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sendThenReceive(t, c, mailboxAfter, func() {})
	ln := laneFor(ep, 0)
	sizes := []int{33, 1, slotData + slotMore, mailboxCap, slotData, slotData + slotMore + 1, 200, mailboxCap - 1, 0, 89}
	seed := 0
	send := func(n int) {
		t.Helper()
		tail := ln.tail.Load()
		seed++
		if err := c.Send(1, fill(n, seed), 0, 0, Standard); err != nil {
			t.Fatal(err)
		}
		if got, want := ln.tail.Load()-tail, spanOf(n); got != want {
			t.Fatalf("a message of %d bytes took %d slots, want %d", n, got, want)
		}
	}
	check := func(got []byte, st Status, n, seed int) {
		t.Helper()
		want := fill(n, seed)
		if st.Len != n || st.Bytes != min(n, len(got)) || st.Source != 1 || !bytes.Equal(got[:st.Bytes], want[:st.Bytes]) {
			t.Fatalf("message %d of %d bytes: status %+v, got % x, want % x", seed, n, st, got[:st.Bytes], want[:st.Bytes])
		}
	}
	recv := func(n, seed, room int) {
		t.Helper()
		buf := make([]byte, room)
		st, err := receive(c, 0, buf, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		check(buf, st, n, seed)
	}
	// Bursts of 1 to 5 messages, over several laps of the ring.
	for round := range 60 {
		first := seed + 1
		var burst []int
		for i := range round%5 + 1 {
			n := sizes[(round+i)%len(sizes)]
			send(n)
			burst = append(burst, n)
		}
		for i, n := range burst {
			recv(n, first+i, mailboxCap)
		}
	}
	if ln.tail.Load() < 3*laneSlots {
		t.Fatalf("the bursts went %d slots round the ring, want several laps", ln.tail.Load())
	}
	// Into posted receives.
	reqs := make([]*Request, len(sizes))
	bufs := make([][]byte, len(sizes))
	for i := range sizes {
		reqs[i], bufs[i] = NewRequest(), make([]byte, mailboxCap)
		c.Irecv(0, bufs[i], 1, 0, reqs[i])
	}
	first := seed + 1
	for _, n := range sizes {
		send(n)
	}
	for i, n := range sizes {
		if err := ep.Wait(reqs[i]); err != nil {
			t.Fatal(err)
		}
		check(bufs[i], result(reqs[i]), n, first+i)
	}
	// From the unexpected queue, charged to the pool by their lengths.
	first = seed + 1
	for _, n := range sizes[:5] {
		send(n)
	}
	mergeAll(ep)
	if ep.unexp.n != 5 {
		t.Fatalf("%d unexpected messages after the merge, want 5", ep.unexp.n)
	}
	for i, n := range sizes[:5] {
		recv(n, first+i, mailboxCap)
	}
	// Into a shorter buffer: the rest of the message is passed over.
	send(mailboxCap)
	send(100)
	recv(mailboxCap, seed-1, 40)
	recv(100, seed, 100)
	// Past a cancelled message of several slots.
	var e Early
	if ok, err := c.SendEarly(1, fill(300, 99), 0, 0, Standard, &e); !ok || err != nil || e.ticket == 0 {
		t.Fatalf("SendEarly of 300 bytes: %v, %v, ticket %d", ok, err, e.ticket)
	}
	c.CancelEarly(1, 0, 0, &e)
	if !e.cancelled {
		t.Fatal("a message of several slots was not cancelled")
	}
	send(150)
	recv(150, seed, mailboxCap)
	if ep.arrived() {
		t.Fatal("messages left over")
	}
	if got := wd.Pooled(); got > wd.chunk {
		t.Fatalf("after every message was received the pool still lends %d", got)
	}
}

// TestParkedWaitsSeeSlots has a receiver that parks at once (no spin) wait for each
// of a stream of small messages that go through the mailbox, alternately with a
// blocking receive and with a blocking Probe and then the receive; the sender sends
// each message as soon as the receiver counts itself parked, so that its
// publication races the wait's last look. A slot's publication is a release store
// that the sender's look at parked may pass: a wait that missed a message published
// so would park for ever (see pending), which the watchdog turns into a failure
// (the window is a few nanoseconds wide: TestProbeSeesClaimedSlot opens it at will).
// Values and order are checked.
func TestParkedWaitsSeeSlots(t *testing.T) {
	const n = 20000
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	sent := make(chan error, 1)
	var raced atomic.Int64 // messages sent to a receiver counted parked
	go func() {
		var b [8]byte
		for i := range n {
			for turn := 0; i >= mailboxAfter && ep.parked.Load() == 0 && turn < 1000; turn++ {
				runtime.Gosched()
			}
			if ep.parked.Load() > 0 {
				raced.Add(1)
			}
			binary.LittleEndian.PutUint64(b[:], uint64(i))
			if err := c.Send(1, b[:], 0, 3, Standard); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	got := make(chan error, 1)
	var received atomic.Int64
	go func() {
		var b [8]byte
		for i := range n {
			if i%2 == 1 {
				if _, st, err := c.Probe(0, 1, 3, false); err != nil || st.Len != 8 {
					got <- fmt.Errorf("probe %d: %d bytes (%v)", i, st.Len, err)
					return
				}
			}
			if _, err := receive(c, 0, b[:], 1, 3); err != nil {
				got <- err
				return
			}
			if v := binary.LittleEndian.Uint64(b[:]); v != uint64(i) {
				got <- fmt.Errorf("message %d received as %d", i, v)
				return
			}
			received.Add(1)
		}
		got <- nil
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the receiver is still waiting after %d of %d messages (a wake-up lost)", received.Load(), n)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if ln := laneFor(ep, 3); ln == nil || ln.head.Load() < n/2 {
		t.Fatal("fewer than half the messages went through the mailbox")
	}
	if k := raced.Load(); k < n/2 {
		t.Fatalf("only %d of %d messages were sent to a parked receiver", k, n)
	}
}

// TestProbeSeesClaimedSlot has a sender claim a slot of the probed lane after a
// blocking Probe has counted itself parked and before its last look, and publish
// the message only after that look, without waking anybody: as a sender whose look
// at parked passed its publication (a release store) and found nobody. The last
// look must see the claim (see pending), and the Probe must then wait for the
// message and return it; a look at published messages only parks for ever.
func TestProbeSeesClaimedSlot(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	ep := wd.Endpoints[0]
	ep.box.Store(newMailbox())
	ln := ep.box.Load().lane(laneOf(3))
	var late *slot
	var pos uint64
	claimed := make(chan struct{})
	probeParked = func() {
		probeParked = nil
		late, pos = ep.claimSlot(ln, 1)
		close(claimed)
	}
	defer func() { probeParked = nil }()
	probed := make(chan error, 1)
	go func() {
		_, st, err := c.Probe(0, 1, 3, false)
		if err == nil && (st.Source != 1 || st.Tag != 3 || st.Len != 8) {
			err = fmt.Errorf("probed source %d, tag %d, %d bytes; want 1, 3, 8", st.Source, st.Tag, st.Len)
		}
		probed <- err
	}()
	<-claimed
	time.Sleep(5 * time.Millisecond) // the last look taken
	late.key, late.n = key{src: 1, tag: 3}, 8
	late.publish(pos)
	select {
	case err := <-probed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Probe still waits for a message claimed before its last look")
	}
}
