package p2p

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// TestMailboxKeepsPerSenderOrder has three senders stream small messages (which take
// the mailbox when it is free and the inbox otherwise) to one receiver that takes
// them with AnySource, and checks that each sender's messages arrive in order.
func TestMailboxKeepsPerSenderOrder(t *testing.T) {
	const senders, n = 3, 3000
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		wd := NewWorld(senders+1, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: spin})
		c := &Comm{Peers: wd.Endpoints, World: wd}
		var wg sync.WaitGroup
		for s := 1; s <= senders; s++ {
			wg.Go(func() {
				var buf [8]byte
				for i := range n {
					binary.LittleEndian.PutUint64(buf[:], uint64(i))
					if err := c.Send(s, buf[:], 0, 7, Standard); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		next := make([]uint64, senders+1)
		var buf [8]byte
		for range senders * n {
			st, err := c.Recv(0, buf[:], AnySource, 7)
			if err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint64(buf[:]); got != next[st.Source] {
				t.Fatalf("spin %v: from rank %d got message %d, want %d", spin, st.Source, got, next[st.Source])
			}
			next[st.Source]++
		}
		wg.Wait()
		if wd.Endpoints[0].arrived() {
			t.Fatal("messages left over")
		}
	}
}

// TestMailboxUnexpected sends to a rank that has posted nothing: the mailbox message
// and the inbox messages after it queue as unexpected in the order sent.
func TestMailboxUnexpected(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	for i := range 5 {
		if err := c.Send(1, []byte{byte(i)}, 0, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if wd.Endpoints[0].box.state.Load() != boxFull {
		t.Fatal("the first small message did not take the mailbox")
	}
	for i := range 5 {
		var b [1]byte
		if st, err := c.Recv(0, b[:], 1, 0); err != nil || st.Bytes != 1 || b[0] != byte(i) {
			t.Fatalf("message %d: got %d (%+v, %v)", i, b[0], st, err)
		}
	}
	if got := wd.Pooled(); got > wd.chunk {
		t.Fatalf("after every message was received the pool still lends %d", got)
	}
}
