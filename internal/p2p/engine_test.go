package p2p

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestQueueMatchesScanAtEverySize checks that the indexed queue answers exactly as a
// plain scan in arrival order would, while it grows past indexAt and shrinks to zero,
// and that the empty buckets it keeps stay counted and bounded while many envelopes
// come and go.
func TestQueueMatchesScanAtEverySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var all []*Request // arrival order, the reference
	pats := []key{{0, 1, 2}, {0, AnySource, 2}, {0, 1, AnyTag}, {0, AnySource, AnyTag}, {1, 1, 2}, {0, 3, 0}}
	check := func() {
		t.Helper()
		for _, pat := range pats {
			var want *Request
			for _, r := range all {
				if matches(pat, r.key) {
					want = r
					break
				}
			}
			if got := q.match(pat); got != want {
				t.Fatalf("n=%d pattern %+v: got %p want %p", len(all), pat, got, want)
			}
		}
		if q.n != len(all) {
			t.Fatalf("count %d, want %d", q.n, len(all))
		}
		if q.index != nil {
			empty := 0
			for k, b := range q.index.buckets {
				if b.key != k {
					t.Fatalf("bucket of %+v filed under %+v", b.key, k)
				}
				if b.head == nil {
					empty++
				}
			}
			if empty != q.index.empty || empty > max(q.n, indexAt) {
				t.Fatalf("n=%d: %d empty buckets, counted %d, bound %d", q.n, empty, q.index.empty, max(q.n, indexAt))
			}
		}
		if q.n > 2*indexAt && q.index == nil && len(pats) > 0 {
			if q.first(key{9, 9, 9}); q.index == nil {
				t.Fatalf("a search through %d entries did not index the queue", q.n)
			}
		}
	}
	for step := 0; step < 4000; step++ {
		grow := step < 2000
		if len(all) == 0 || (grow && rng.IntN(3) > 0) || (!grow && rng.IntN(3) == 0) {
			tag := rng.IntN(3)
			if step%4 == 0 { // an envelope seldom seen again
				tag = 10 + rng.IntN(500)
			}
			r := &Request{key: key{uint32(rng.IntN(2)), int32(rng.IntN(4)), int32(tag)}}
			q.push(r)
			all = append(all, r)
		} else {
			i := rng.IntN(len(all))
			q.remove(all[i])
			all = append(all[:i], all[i+1:]...)
		}
		check()
	}
	for len(all) > 0 {
		q.remove(all[0])
		all = all[1:]
		check()
	}
	if q.index != nil {
		t.Fatal("an empty queue keeps its index")
	}
}

func TestTakePostedPrefersEarlierWildcard(t *testing.T) {
	wd := NewWorld(1, Config{EagerLimit: 16, PoolCap: 1 << 20})
	ep := wd.Endpoints[0]
	wild := &Request{key: key{0, AnySource, 5}}
	exact := &Request{key: key{0, 2, 5}}
	later := &Request{key: key{0, AnySource, AnyTag}}
	ep.post(wild)
	ep.post(exact)
	ep.post(later)
	k := key{0, 2, 5}
	for _, want := range []*Request{wild, exact, later} {
		if got := ep.takePosted(k); got != want {
			t.Fatalf("takePosted: got %+v want %+v", got.key, want.key)
		}
	}
	if ep.takePosted(k) != nil {
		t.Fatal("an empty engine matched")
	}
}

// TestPoolCreditReturns checks that the pool cap bounds eager copies, that a send
// past it waits for its receiver, and that credit goes back once copies are received.
func TestPoolCreditReturns(t *testing.T) {
	const capacity = 1 << 20
	wd := NewWorld(2, Config{EagerLimit: 1 << 20, PoolCap: capacity})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	big := make([]byte, 100<<10)
	charge := int64(len(big)) + envelopeCharge
	sent := 0
	for ; sent < 20; sent++ {
		r := new(Request)
		m, _, err := c.sendCopy(0, big, 1, 0, Standard, false)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil { // the pool is full: the send waits for its receiver
			if !c.sendDirect(0, big, 1, 0, Standard, r) {
				t.Fatal("the direct send did not queue")
			}
			if !wd.Endpoints[1].withdraw(r) {
				t.Fatal("the queued send was not in the receiver's queue")
			}
			break
		}
	}
	if want := int(capacity / charge); sent != want {
		t.Fatalf("%d eager copies of %d bytes fitted in a %d-byte pool; want %d", sent, charge, capacity, want)
	}
	if got := wd.Pooled(); got > capacity {
		t.Fatalf("pool lends %d > cap %d", got, capacity)
	}
	buf := make([]byte, len(big))
	for i := 0; i < sent; i++ {
		if st, err := receive(c, 1, buf, 0, 0); err != nil || st.Bytes != len(big) {
			t.Fatalf("recv %d: %+v %v", i, st, err)
		}
	}
	if got := wd.Pooled(); got > wd.chunk {
		t.Fatalf("after receiving everything the pool still lends %d bytes (chunk %d)", got, wd.chunk)
	}
}

// TestPoolCapBoundsMemory checks that the cap bounds the memory that queued copies
// of empty messages take, the Requests holding them, not only their payloads.
func TestPoolCapBoundsMemory(t *testing.T) {
	const capacity = 64 << 10
	wd := NewWorld(2, Config{EagerLimit: 64, PoolCap: capacity})
	c := &Comm{Peers: wd.Endpoints, World: wd}
	sent := 0
	for ; sent < 10*capacity; sent++ {
		m, _, err := c.sendCopy(0, nil, 1, 0, Standard, false)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			break
		}
	}
	if held := sent * int(unsafe.Sizeof(Request{})); held > capacity || sent == 0 {
		t.Fatalf("%d empty messages queued, holding %d bytes of Requests under a %d-byte cap", sent, held, capacity)
	}
}

func TestBsendFirstFit(t *testing.T) {
	wd := NewWorld(1, Config{})
	ep := wd.Endpoints[0]
	if err := ep.Attach(make([]byte, 3*(100+BsendOverhead))); err != nil {
		t.Fatal(err)
	}
	var ms []*Request
	for i := 0; i < 3; i++ {
		m, err := ep.bufferedCopy(make([]byte, 100), key{}, 0)
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		ms = append(ms, m)
	}
	if _, err := ep.bufferedCopy(make([]byte, 1), key{}, 0); err == nil {
		t.Fatal("a full attached buffer took another message")
	}
	ms[1].bseg.free(ms[1].boff)
	m, err := ep.bufferedCopy(make([]byte, 100), key{}, 0)
	if err != nil || m.boff != ms[1].boff {
		t.Fatalf("the freed middle span was not reused: off %d, err %v", m.boff, err)
	}
	done := make(chan []byte)
	go func() { b, _ := ep.Detach(); done <- b }()
	for _, m := range []*Request{ms[0], m, ms[2]} {
		select {
		case <-done:
			t.Fatal("Detach returned while messages were buffered")
		case <-time.After(10 * time.Millisecond):
		}
		m.bseg.free(m.boff)
	}
	if b := <-done; len(b) != 3*(100+BsendOverhead) {
		t.Fatalf("Detach returned %d bytes", len(b))
	}
}

func TestSpinAdapts(t *testing.T) {
	wd := NewWorld(1, Config{Spin: 8 * time.Microsecond})
	ep := wd.Endpoints[0]
	for i := 0; i < 10; i++ {
		ep.settle(time.Millisecond) // waits that parking was right for
	}
	if got := time.Duration(ep.spin.Load()); got != 0 {
		t.Fatalf("after long waits the budget is %v, want none", got)
	}
	ep.settle(time.Microsecond) // a wait shorter than parking costs
	if got := time.Duration(ep.spin.Load()); got != 8*time.Microsecond {
		t.Fatalf("after a short wait the budget is %v, want the configured 8µs", got)
	}
	ep.settle(12 * time.Microsecond) // within twice the budget
	if got := time.Duration(ep.spin.Load()); got != 8*time.Microsecond {
		t.Fatalf("after a wait within twice the budget it is %v, want 8µs", got)
	}
	ep.settle(20 * time.Microsecond) // well past it
	if got := time.Duration(ep.spin.Load()); got != 2*time.Microsecond {
		t.Fatalf("after a long wait the budget is %v, want a quarter, 2µs", got)
	}
	if ok, _ := ep.spinFor(func() bool { return true }); !ok {
		t.Fatal("a spin on a true condition failed")
	}
}

// TestCacheLineLayout pins the layout that keeps a hand-off between cores to few
// cache lines: a Request's matching state and completion flag share its first line,
// an Endpoint's inbox, lock, what senders read and its own counters are on lines of
// their own, a mailbox's slots are a line each, and Requests, Endpoints and mailboxes
// start on line boundaries.
func TestCacheLineLayout(t *testing.T) {
	if got := unsafe.Offsetof(Request{}.waiter); got != 64 || unsafe.Offsetof(Request{}.job)%64 != 0 {
		t.Errorf("the hot line of a Request ends at %d, want 64", got)
	}
	if got := unsafe.Sizeof(Request{}); got%64 != 0 {
		t.Errorf("a Request is %d bytes, not whole cache lines", got)
	}
	if got := unsafe.Sizeof(Endpoint{}); got%64 != 0 {
		t.Errorf("an Endpoint is %d bytes, not whole cache lines", got)
	}
	var ep Endpoint
	if got := unsafe.Offsetof(ep.mu); got != 64 {
		t.Errorf("the lock starts at %d, want 64: the inbox line is the senders'", got)
	}
	if got := unsafe.Offsetof(ep.seq); got >= 128 {
		t.Errorf("the posted queues end at %d, past the lock's line", got)
	}
	if got := unsafe.Offsetof(ep.credit); got < 192 || unsafe.Offsetof(ep.spin) < 192 {
		t.Errorf("the rank's own counters at %d share a line with what senders write", got)
	}
	if read, own := unsafe.Offsetof(ep.World)/64, unsafe.Offsetof(ep.credit)/64; read == own || unsafe.Offsetof(ep.peer)/64 == own {
		t.Errorf("what senders read (line %d) shares a line with the counters the rank writes at every send (line %d)", read, own)
	}
	for i := 0; i < 100; i++ {
		sink = new(Request) // on the heap, where Requests live
		if p := uintptr(unsafe.Pointer(sink)); p%64 != 0 {
			t.Fatalf("a Request at %#x is not line-aligned", p)
		}
	}
	var ln lane
	if unsafe.Offsetof(ln.slot)-unsafe.Offsetof(ln.head) != 64 || unsafe.Sizeof(slot{}) != 64 {
		t.Errorf("a lane's head and slots do not have lines of their own (head at %d, slots at %d, %d bytes each)",
			unsafe.Offsetof(ln.head), unsafe.Offsetof(ln.slot), unsafe.Sizeof(slot{}))
	}
	var b mailbox
	if unsafe.Offsetof(b.clock) != 64 || unsafe.Offsetof(b.moves) != 128 {
		t.Errorf("a mailbox's clock and moves do not have lines of their own (clock at %d, moves at %d)",
			unsafe.Offsetof(b.clock), unsafe.Offsetof(b.moves))
	}
	for range 100 {
		clockSink = newMailbox().clock // on the heap, where clocks live
		if p := uintptr(unsafe.Pointer(clockSink)); p%128 != 0 {
			t.Fatalf("a clock at %#x does not start a 128-byte block", p)
		}
	}
	for range 100 {
		laneSink = newLane(0) // on the heap, where lanes live
		if p := uintptr(unsafe.Pointer(&laneSink.head)); p%64 != 0 {
			t.Fatalf("a lane's head at %#x is not line-aligned", p)
		}
		if p := uintptr(unsafe.Pointer(laneSink.claims)); p%128 != 0 {
			t.Fatalf("a lane's claims at %#x do not start a 128-byte block", p)
		}
	}
	for _, n := range []int{1, 2, 3, 5, 16, 100, 1000} {
		for _, ep := range NewWorld(n, Config{}).Endpoints {
			if p := uintptr(unsafe.Pointer(ep)); p%64 != 0 {
				t.Fatalf("an endpoint of a %d-rank world at %#x is not line-aligned", n, p)
			}
		}
	}
}

var (
	sink      *Request
	laneSink  *lane
	clockSink *clock
)

// receive is Comm.Recv returning the status.
func receive(c *Comm, me int, buf []byte, src, tag int) (Status, error) {
	var st Status
	err := c.Recv(me, buf, src, tag, &st)
	return st, err
}

// result is the status of r, which has completed.
func result(r *Request) Status {
	var st Status
	r.Result(&st)
	return st
}

// TestPoolCreditExactPastHalf: once the pool is half used, senders take exactly the
// credit they charge, so that none lies idle where a sweep racing with them would
// miss it: 300 endpoints that reserve at once, the pool past half its cap, all get
// their credit, and the pool then lends exactly what they hold.
func TestPoolCreditExactPastHalf(t *testing.T) {
	const n, charge = 300, 264
	capacity := int64(2*n*charge + 64) // half of it, and every charge, fit
	wd := NewWorld(n, Config{EagerLimit: 1 << 10, PoolCap: capacity})
	if wd.chunk <= charge {
		t.Fatalf("chunk %d: the test needs chunks larger than one charge (%d)", wd.chunk, charge)
	}
	half := capacity/2 + 1
	if !wd.lend(half) {
		t.Fatal("the empty pool refused half its cap")
	}
	var wg sync.WaitGroup
	failed := make([]bool, n)
	for i, ep := range wd.Endpoints {
		wg.Go(func() { failed[i] = !ep.reserve(charge) })
	}
	wg.Wait()
	for i, f := range failed {
		if f {
			t.Fatalf("endpoint %d found no credit with %d of %d bytes lent", i, wd.Pooled(), capacity)
		}
	}
	if got, want := wd.Pooled(), half+n*charge; got != want {
		t.Fatalf("the pool lends %d bytes, want %d: endpoints hold credit they did not charge", got, want)
	}
}
