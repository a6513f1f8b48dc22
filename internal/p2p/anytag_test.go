package p2p

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cycleTag is the tag of a sender's i-th message in the AnyTag tests: eight tags in
// turn, so that an engine that keeps tags apart (by index bucket, or in shards of its
// own) must still give an AnyTag receive each sender's messages in the order sent.
func cycleTag(i int) int { return i % 8 }

// stamped is the i-th message of goroutine g: g, i, and padding up to size bytes.
func stamped(g, i, size int) []byte {
	b := make([]byte, max(size, 5))
	b[0] = byte(g)
	binary.LittleEndian.PutUint32(b[1:], uint32(i))
	return b
}

// orderCheck checks that every (source, goroutine) stream of stamped messages
// arrives in the order sent.
type orderCheck map[[2]int]int

func (o orderCheck) check(st Status, buf []byte) error {
	g, i := int(buf[0]), int(binary.LittleEndian.Uint32(buf[1:]))
	k := [2]int{st.Source, g}
	if i != o[k] {
		return fmt.Errorf("from rank %d goroutine %d (tag %d): message %d, want %d", st.Source, g, st.Tag, i, o[k])
	}
	if st.Tag != cycleTag(i) {
		return fmt.Errorf("from rank %d goroutine %d: message %d has tag %d, want %d", st.Source, g, i, st.Tag, cycleTag(i))
	}
	o[k]++
	return nil
}

// TestAnyTagKeepsSenderOrder has three ranks of two goroutines each send messages
// of eight tags in turn, by mailbox, inbox and direct send (8, 48 and 200 bytes), to
// a rank that receives them all with AnySource and AnyTag, some waiting unexpected,
// some posted first: each goroutine's messages arrive in the order sent.
func TestAnyTagKeepsSenderOrder(t *testing.T) {
	const senders, goroutines, n = 3, 2, 600
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		wd := NewWorld(senders+1, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: spin})
		c := &Comm{Peers: wd.Endpoints, World: wd}
		wg := sendFrom(senders, goroutines, func(s, g int) {
			for i := range n {
				if err := c.Send(s, stamped(g, i, []int{8, 48, 200}[(i+g)%3]), 0, cycleTag(i), Standard); err != nil {
					t.Error(err)
					return
				}
			}
		})
		time.Sleep(5 * time.Millisecond) // some wait unexpected
		seen := orderCheck{}
		buf := make([]byte, 200)
		for range senders * goroutines * n {
			st, err := receive(c, 0, buf, AnySource, AnyTag)
			if err != nil {
				t.Fatal(err)
			}
			if err := seen.check(st, buf); err != nil {
				t.Fatalf("spin %v: %v", spin, err)
			}
		}
		wg.Wait()
		if ep := wd.Endpoints[0]; ep.arrived() || ep.unexp.n != 0 {
			t.Fatalf("left over: %d unexpected messages", ep.unexp.n)
		}
	}
}

// TestAnyTagRemoteOrder is the same across procs, with a pool small enough that
// some eager payloads are dropped and pulled.
func TestAnyTagRemoteOrder(t *testing.T) {
	sender, receiver := shortPoolPair(t)
	const n = 300
	go func() {
		for i := range n {
			if err := sender.Send(0, stamped(0, i, mixedSize(i)), 1, cycleTag(i), Standard); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(10 * time.Millisecond) // let messages pile up unexpected
	seen := orderCheck{}
	buf := make([]byte, 100<<10)
	for range n {
		st, err := receive(receiver, 1, buf, 0, AnyTag)
		if err != nil {
			t.Fatal(err)
		}
		if err := seen.check(st, buf); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostOrderWithAnyTag posts receives of one tag around an AnyTag one, and one of
// another tag: each message goes to the earliest posted receive that matches it.
func TestPostOrderWithAnyTag(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	bufs := make([][]byte, 4)
	rs := make([]*Request, 4)
	for i, tag := range []int{5, AnyTag, 5, 6} {
		bufs[i], rs[i] = make([]byte, 1), new(Request)
		c.Irecv(0, bufs[i], 1, tag, rs[i])
	}
	// message a (tag 5) takes rs[0]; b (tag 5) the AnyTag rs[1], posted before
	// rs[2]; c (tag 6) rs[3]; d (tag 5) rs[2].
	for _, m := range []struct {
		tag  int
		data byte
	}{{5, 'a'}, {5, 'b'}, {6, 'c'}, {5, 'd'}} {
		if err := c.Send(1, []byte{m.data}, 0, m.tag, Standard); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"a", "b", "d", "c"} {
		if err := wd.Endpoints[0].Wait(rs[i]); err != nil {
			t.Fatal(err)
		}
		if string(bufs[i]) != want {
			t.Errorf("receive %d got %q, want %q", i, bufs[i], want)
		}
	}
	if ep := wd.Endpoints[0]; ep.wild.head != nil || ep.posted.n != 0 {
		t.Error("a matched receive is still posted")
	}
}

// TestAnyTagProbe probes with AnyTag for messages of one sender with three tags: the
// earliest is reported first, whether the probe came before the messages or after.
func TestAnyTagProbe(t *testing.T) {
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	probed := make(chan Status, 1)
	go func() {
		_, st, err := c.Probe(0, 1, AnyTag, false)
		if err != nil {
			t.Error(err)
		}
		probed <- st
	}()
	time.Sleep(time.Millisecond) // the probe waits
	for tag := 3; tag >= 1; tag-- {
		if err := c.Send(1, []byte{byte(tag)}, 0, tag, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if st := <-probed; st.Tag != 3 {
		t.Fatalf("a waiting probe saw tag %d first, want 3", st.Tag)
	}
	for _, want := range []int{3, 2, 1} {
		m, st, err := c.Iprobe(0, 1, AnyTag, true)
		if err != nil || m == nil || st.Tag != want {
			t.Fatalf("Mprobe: message %v, tag %d, %v; want tag %d", m != nil, st.Tag, err, want)
		}
		var b [1]byte
		if st, err := Mrecv(m, b[:]); err != nil || b[0] != byte(want) || st.Tag != want {
			t.Fatalf("Mrecv: %q, tag %d, %v; want tag %d", b, st.Tag, err, want)
		}
	}
	if ep := wd.Endpoints[0]; len(ep.probes) != 0 || ep.arrived() || ep.unexp.n != 0 {
		t.Fatal("the probes left waiters or messages behind")
	}
}

// TestMergeSeesEarlierLanes has a sender leave pairs of messages in its receiver's
// mailbox, the second in the lane after the first's, while the receiver merges the
// lanes over and over, as a receive with AnyTag does: a merge that read the first
// lane before the first message landed there, and the second lane after the second
// did, must not take the second first.
func TestMergeSeesEarlierLanes(t *testing.T) {
	const pairs = 200000
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: 1 << 20})
	ep := wd.Endpoints[0]
	ep.box.Store(newMailbox())
	var (
		got  atomic.Int64
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	defer wg.Wait()
	defer stop.Store(true)
	wg.Go(func() {
		for i := range 2 * pairs {
			if _, ok := ep.deposit(stamped(0, i, 8), key{0, 1, int32(cycleTag(i))}, true); !ok {
				t.Errorf("message %d found no slot", i)
				stop.Store(true)
				return
			}
			for i%2 == 1 && got.Load() <= int64(i) {
				if stop.Load() {
					return
				}
				runtime.Gosched()
			}
		}
	})
	seen := orderCheck{}
	pat := key{0, AnySource, AnyTag}
	buf := make([]byte, 8)
	for got.Load() < 2*pairs && !stop.Load() {
		var st Status
		ep.mu.Lock()
		ok, _ := ep.takeBox(&pat, buf, &st, published)
		ep.mu.Unlock()
		if !ok {
			runtime.Gosched() // at GOMAXPROCS=1 the sender runs only when this yields
			continue
		}
		if err := seen.check(st, buf); err != nil {
			t.Fatal(err)
		}
		got.Add(1)
	}
}

// BenchmarkAnyTagStream: two ranks stream 8-byte blocking sends of eight tags in
// turn to a rank that receives them with AnySource and AnyTag, each receive a
// merge of the lanes.
func BenchmarkAnyTagStream(b *testing.B) {
	const senders = 2
	wd := NewWorld(senders+1, Config{EagerLimit: 64, PoolCap: 1 << 20, Spin: 20 * time.Microsecond})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	n := max(b.N/senders, 1)
	wg := sendFrom(senders, 1, func(s, _ int) {
		buf := make([]byte, 8)
		for i := range n {
			if err := c.Send(s, buf, 0, cycleTag(i), Standard); err != nil {
				b.Error(err)
				return
			}
		}
	})
	buf := make([]byte, 8)
	b.ResetTimer()
	for range senders * n {
		if _, err := receive(c, 0, buf, AnySource, AnyTag); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}
