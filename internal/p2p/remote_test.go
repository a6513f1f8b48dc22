package p2p

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/netd/auth"
	"github.com/weft-mpi/weft/internal/netd/wire"
	"github.com/weft-mpi/weft/internal/spin"
	"github.com/weft-mpi/weft/internal/topo"
)

// job is several procs' engines in one test process, each with its own network
// device on loopback: messages between them cross real TCP connections.
type job struct {
	worlds  []*World
	devices []*netd.Device
	addrs   [][]string // where each proc listens
}

// noColl refuses the collective channel, which these tests do not use.
type noColl struct{}

func (noColl) Handle(proc int, h *wire.Header, _ *netd.Payload) error {
	return fmt.Errorf("collective message from proc %d", proc)
}
func (noColl) Lost(int, error) {}

// newJob starts the procs of layout l, proc i with cfgs[i] (or the last of cfgs).
func newJob(t *testing.T, l *topo.Layout, cfgs ...Config) *job {
	t.Helper()
	n := l.Procs()
	addrs := make([][]string, n)
	j := &job{addrs: addrs}
	for i := range n {
		ln, a, err := netd.Listen(true)
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
		cfg := cfgs[min(i, len(cfgs)-1)]
		wd, err := NewJobWorld(l, i, cfg)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := netd.New(netd.Config{
			Self: i, Procs: n, Job: "p2p-test", Key: []byte("0123456789abcdef0123456789abcdef"),
			Listener: ln, Addrs: func(p int) ([]string, error) { return addrs[p], nil },
			P2P: wd, Coll: noColl{}, Spin: cfg.Spin,
			Log: func(format string, args ...any) { t.Logf("proc %d: "+format, append([]any{i}, args...)...) },
		})
		if err != nil {
			t.Fatal(err)
		}
		wd.Connect(dev)
		dev.Start()
		j.worlds, j.devices = append(j.worlds, wd), append(j.devices, dev)
	}
	t.Cleanup(func() {
		for _, d := range j.devices {
			d.Close()
		}
	})
	return j
}

// comm is the world communicator as proc i sees it.
func (j *job) comm(i int) *Comm {
	wd := j.worlds[i]
	return &Comm{Peers: wd.Endpoints, World: wd}
}

func testConfig() Config {
	return Config{EagerLimit: 16 << 10, NetEagerLimit: 64 << 10, PoolCap: 64 << 20, Spin: 20 * time.Microsecond}
}

func fill(size, seed int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

// TestRemoteStreaming: a rank that sends small messages back to back leaves them to
// the send daemon after the first (streamGap), and they still arrive, whole and in
// order: at the receiver's waits, and also when the sender, on one processor, goes
// on computing without calling the engine, so that only the daemon can write them.
func TestRemoteStreaming(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	sender, receiver := j.comm(0), j.comm(1)
	const count = 500
	var got atomic.Int32
	recvErr := make(chan error, 1)
	go func() {
		for i := range count {
			buf := make([]byte, 64)
			st, err := receive(receiver, 1, buf, 0, 5)
			if err == nil && (st.Bytes != i%64 || !bytes.Equal(buf[:st.Bytes], fill(i%64, i))) {
				err = fmt.Errorf("message %d: %d bytes %v, want %d bytes %v", i, st.Bytes, buf[:st.Bytes], i%64, fill(i%64, i))
			}
			if err != nil {
				recvErr <- err
				return
			}
			got.Add(1)
		}
		recvErr <- nil
	}()
	for i := range count {
		if err := sender.Send(0, fill(i%64, i), 1, 5, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if !raceEnabled && !j.worlds[0].peers[1].deferred.Load() {
		t.Error("no send was left to the send daemon, although they came back to back")
	}
	// Compute, never calling the engine: only the send daemon can write the rest.
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < count && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := got.Load(); n < count {
		t.Fatalf("%d of %d messages arrived while the sender computed", n, count)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
}

// TestRemoteDropAndPull is TMPI's Fig. 8 b: the receiving proc's pool has no room,
// so it drops every eager payload, keeps the envelopes, and pulls each one's data
// from the sender (who kept a copy) when a receive matches; the messages arrive
// whole and in order, and the sender's copies are all freed.
func TestRemoteDropAndPull(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	tiny := testConfig()
	tiny.PoolCap = 0
	j := newJob(t, l, testConfig(), tiny)
	sender, receiver := j.comm(0), j.comm(1)
	const count = 40
	for i := range count {
		if err := sender.Send(0, fill(i*100, i), 1, 3, Standard); err != nil {
			t.Fatal(err)
		}
	}
	// Every message waits as an envelope without data.
	ep := j.worlds[1].Endpoints[1]
	waitFor(t, "40 dropped envelopes", func() bool {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		ep.drain()
		n := 0
		for m := ep.unexp.order.head; m != nil; m = m.next {
			if m.kind == remoteKind && m.flags&dropped != 0 {
				n++
			}
		}
		return n == count
	})
	for i := range count {
		buf := make([]byte, 4000)
		st, err := receive(receiver, 1, buf, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:st.Bytes], fill(i*100, i)) {
			t.Fatalf("message %d: %d bytes, not the %d sent", i, st.Bytes, i*100)
		}
	}
	p := j.worlds[0].peers[1]
	waitFor(t, "the sender's copies freed", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.held.head == nil
	})
}

// shortPoolPair is a sender (rank 0) in one proc and a receiver (rank 1) in another
// whose pool has room for a few eager copies only, so that it drops and pulls some.
func shortPoolPair(t *testing.T) (sender, receiver *Comm) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	small := testConfig()
	small.PoolCap = 20 << 10
	j := newJob(t, l, testConfig(), small)
	return j.comm(0), j.comm(1)
}

// mixedSize is the size of the i-th message of the drop tests: eager, dropped,
// three-phase and empty in turn.
func mixedSize(i int) int { return []int{10, 3000, 100 << 10, 0, 9000}[i%5] }

// TestRemoteOrderUnderDrops mixes messages the receiver keeps, drops and clears in
// three phases: matching sees them in the order sent.
func TestRemoteOrderUnderDrops(t *testing.T) {
	sender, receiver := shortPoolPair(t)
	const count = 200
	go func() {
		for i := range count {
			if err := sender.Send(0, fill(mixedSize(i), i), 1, 4, Standard); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(10 * time.Millisecond) // let messages pile up unexpected
	buf := make([]byte, 100<<10)
	for i := range count {
		st, err := receive(receiver, 1, buf, AnySource, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:st.Bytes], fill(mixedSize(i), i)) {
			t.Fatalf("message %d: %d bytes, not the %d-byte message %d", i, st.Bytes, mixedSize(i), i)
		}
	}
}

// TestRemoteManyRanks: every rank of three procs of uneven sizes sends to every
// other rank at once, from several goroutines per rank.
func TestRemoteManyRanks(t *testing.T) {
	l, _ := topo.Uneven([][]int{{3, 1}, {2}})
	j := newJob(t, l, testConfig())
	n := l.Size()
	var wg sync.WaitGroup
	for rank := range n {
		proc, _ := l.Locate(rank)
		c := j.comm(proc.Proc)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for dest := range n {
				if dest != rank {
					if err := c.Send(rank, fill(rank*1000+dest, rank), dest, rank, Standard); err != nil {
						t.Error(err)
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for src := range n {
				if src == rank {
					continue
				}
				buf := make([]byte, 10000)
				st, err := receive(c, rank, buf, src, src)
				if err != nil {
					t.Error(err)
					continue
				}
				if !bytes.Equal(buf[:st.Bytes], fill(src*1000+rank, src)) {
					t.Errorf("rank %d from %d: wrong data", rank, src)
				}
			}
		}()
	}
	wg.Wait()
}

// TestRemoteLost: when the device says a proc's connections broke, the job ends
// with ErrProcFailed naming it, and a rank waiting for it is released.
func TestRemoteLost(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	// Connect first, so that there is a link to break.
	if err := j.comm(0).Send(0, []byte("hi"), 1, 0, Standard); err != nil {
		t.Fatal(err)
	}
	if _, err := receive(j.comm(1), 1, make([]byte, 2), 0, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := receive(j.comm(0), 0, make([]byte, 8), 1, 9)
		done <- err
	}()
	j.worlds[0].Lost(1, errors.New("connection reset by test"))
	select {
	case err := <-done:
		if !errors.Is(err, ErrAborted) {
			t.Fatalf("receive from a lost proc: %v, want ErrAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a receive from a lost proc still waits after 10 s")
	}
	cause := j.worlds[0].Cause()
	if cause == nil || cause.Class != errs.ProcFailed {
		t.Fatalf("cause %v, want ErrProcFailed", cause)
	}
	t.Log(cause)
}

// TestRemoteLostErrorsReturn: in errors-return mode a lost proc fails what
// waits for it (receives and probes from its rank, or from any source of a
// communicator that has it, sends to it, later ones too) and nothing else: the
// job goes on, and the others still talk.
func TestRemoteLostErrorsReturn(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1, 1}})
	cfg := testConfig()
	cfg.ErrorsReturn = true
	j := newJob(t, l, cfg)
	world := j.comm(0)
	// Ranks 0 and 2 only, as both their procs see it.
	pair := &Comm{Ctx: 7, Peers: []*Endpoint{j.worlds[0].Endpoints[0], j.worlds[0].Endpoints[2]}, World: j.worlds[0]}
	pair2 := &Comm{Ctx: 7, Peers: []*Endpoint{j.worlds[2].Endpoints[0], j.worlds[2].Endpoints[2]}, World: j.worlds[2]}

	var fromLost, anyWorld, anyPair Request
	world.Irecv(0, make([]byte, 8), 1, 3, &fromLost)
	world.Irecv(0, make([]byte, 8), AnySource, 4, &anyWorld)
	got := make([]byte, 8)
	pair.Irecv(0, got, AnySource, AnyTag, &anyPair)
	probes := make(chan error, 2)
	for _, src := range []int{1, AnySource} {
		go func() {
			_, _, err := world.Probe(0, src, 5, false)
			probes <- err
		}()
	}
	ep0 := j.worlds[0].Endpoints[0]
	for waiting := 0; waiting < 2; { // until both probes wait
		time.Sleep(time.Millisecond)
		ep0.mu.Lock()
		waiting = len(ep0.probes)
		ep0.mu.Unlock()
	}
	j.worlds[0].Lost(1, errors.New("connection reset by test"))

	isLoss := func(what string, err error) {
		t.Helper()
		var e *errs.Error
		if !errors.As(err, &e) || e.Class != errs.ProcFailed || !strings.Contains(e.Detail, "lost proc 1") {
			t.Errorf("%s: %v, want ErrProcFailed naming proc 1", what, err)
		}
	}
	isLoss("pending receive from the lost rank", j.worlds[0].Endpoints[0].Wait(&fromLost))
	isLoss("pending AnySource receive on a communicator with the lost rank", j.worlds[0].Endpoints[0].Wait(&anyWorld))
	for range 2 {
		select {
		case err := <-probes:
			isLoss("pending probe", err)
		case <-time.After(10 * time.Second):
			t.Fatal("a probe still waits 10 s after the loss")
		}
	}
	_, err := receive(world, 0, make([]byte, 8), 1, 3)
	isLoss("later receive from the lost rank", err)
	_, _, err = world.Probe(0, 1, 3, false)
	isLoss("later probe of the lost rank", err)
	_, _, err = world.Iprobe(0, 1, AnyTag, false)
	isLoss("Iprobe of the lost rank", err)
	if _, _, err = world.Iprobe(0, AnySource, AnyTag, false); err != nil {
		t.Errorf("Iprobe of any source after the loss: %v, want nothing and no error", err)
	}
	isLoss("later send to the lost rank", world.Send(0, []byte("x"), 1, 0, Standard))
	if anyPair.Done() {
		t.Fatalf("an AnySource receive on a communicator without the lost rank was ended: %v", anyPair.err)
	}
	if c := j.worlds[0].Cause(); c != nil {
		t.Fatalf("the job was aborted: %v", c)
	}
	if j.worlds[0].Loss() == nil {
		t.Fatal("the loss was not recorded")
	}
	// The survivors still talk: the waiting AnySource receive, then a ping-pong.
	if err := pair2.Send(1, []byte("survived"), 0, 9, Standard); err != nil {
		t.Fatal(err)
	}
	if err := j.worlds[0].Endpoints[0].Wait(&anyPair); err != nil || string(got) != "survived" {
		t.Fatalf("AnySource receive from a survivor: %v, %q", err, got)
	}
	sent := make(chan error, 1)
	go func() {
		for i := range 20 {
			if err := world.Send(0, fill(100<<10, i), 2, i, Standard); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for i := range 20 {
		b := make([]byte, 100<<10)
		if _, err := receive(j.comm(2), 2, b, 0, i); err != nil || !bytes.Equal(b, fill(100<<10, i)) {
			t.Fatalf("message %d between survivors: %v", i, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestRemoteStrangers: connections from strangers (garbage, a wrong key) while two
// procs exchange messages are refused and leave the job unharmed.
func TestRemoteStrangers(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	// The proc's Unix socket and its loopback addresses: the host's other
	// addresses may be those of other tests' network namespaces, gone any moment.
	var knock []string
	for _, a := range j.addrs[1] {
		if host, _, err := net.SplitHostPort(a); strings.HasPrefix(a, "unix:") || err == nil && net.ParseIP(host).IsLoopback() {
			knock = append(knock, a)
		}
	}
	if len(knock) < 2 {
		t.Fatalf("proc 1 listens at %q: want its Unix socket and a loopback address", j.addrs[1])
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // strangers keep knocking
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Through each of those addresses in turn: the Unix socket, then TCP.
			netw, addr := "tcp", knock[i%len(knock)]
			if name, ok := strings.CutPrefix(addr, "unix:"); ok {
				netw, addr = "unix", name
			}
			conn, err := net.Dial(netw, addr)
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				conn.Write(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 50))
			} else {
				h := auth.Hello{Version: wire.Version, Proc: 0, Job: "p2p-test"}
				conn.Write(auth.AppendHello(nil, &h)) // a hello, then no proof of the key
				conn.Write(make([]byte, 32))
			}
			conn.Close()
		}
	}()
	for i := range 500 {
		size := []int{8, 100 << 10}[i%2]
		var r Request
		if err := j.comm(0).Isend(0, fill(size, i), 1, 1, Standard, &r); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size)
		if _, err := receive(j.comm(1), 1, buf, 0, 1); err != nil {
			t.Fatal(err)
		}
		if err := j.worlds[0].Endpoints[0].Wait(&r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, fill(size, i)) {
			t.Fatalf("message %d corrupt", i)
		}
	}
	close(stop)
	wg.Wait()
	for i, wd := range j.worlds {
		if c := wd.Cause(); c != nil {
			t.Errorf("proc %d ended: %v", i, c)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// FuzzHandle sends the engine of a proc whatever headers (that pass wire.Parse)
// and payloads another proc of the job could send, in any order: a message it
// cannot place is a protocol error that ends the link and the job, never a panic
// or a hang; receives posted beforehand end (done or aborted).
func FuzzHandle(f *testing.F) {
	enc := func(hs ...wire.Header) []byte {
		var b []byte
		for _, h := range hs {
			h.Frag = uint32(h.Len)
			if h.Kind != wire.Eager {
				h.Frag = 0
			}
			if h.Kind == wire.Data {
				h.Frag = uint32(h.Len - h.Offset)
			}
			var hb [wire.Size]byte
			h.Put(hb[:])
			b = append(b, hb[:]...)
			b = append(b, make([]byte, h.Frag)...)
		}
		return b
	}
	f.Add(enc(wire.Header{Kind: wire.Eager, Dest: 1, Tag: 1, Len: 3, SendReq: 1, Seq: 1}))
	f.Add(enc(wire.Header{Kind: wire.RTS, Dest: 1, Tag: 2, Len: 100, SendReq: 1, Seq: 1},
		wire.Header{Kind: wire.CancelReq, Dest: 1, SendReq: 1}))
	f.Add(enc(wire.Header{Kind: wire.CTS, SendReq: 9, RecvReq: 3, Len: 5}))
	f.Add(enc(wire.Header{Kind: wire.Data, SendReq: 1, RecvReq: 1, Len: 8}))
	f.Add(enc(wire.Header{Kind: wire.Eager, Dest: 7, Tag: 1, Len: 0, SendReq: 1, Seq: 1}))
	f.Add(enc(wire.Header{Kind: wire.Eager, Dest: 1, Tag: 1, Len: 0, SendReq: 2, Seq: 2}))
	f.Add(enc(wire.Header{Kind: wire.Ack, SendReq: 5}, wire.Header{Kind: wire.Pull, SendReq: 1, RecvReq: 1, Len: 4},
		wire.Header{Kind: wire.CancelReply, SendReq: 3}))
	f.Fuzz(func(t *testing.T, in []byte) {
		l, _ := topo.Uneven([][]int{{1, 1}})
		j := newJob(t, l, testConfig())
		recv := make(chan error, 1)
		go func() {
			_, err := receive(j.comm(1), 1, make([]byte, 16), AnySource, AnyTag)
			recv <- err
		}()
		for len(in) >= wire.Size {
			h, err := wire.Parse(in)
			if err != nil || h.Kind == wire.Close || h.Kind == wire.Coll {
				return
			}
			in = in[wire.Size:]
			n := min(int(h.Frag), len(in))
			payload := in[:n]
			in = in[n:]
			if j.devices[0].Send(1, netd.ChannelP2P, &h, payload) != nil {
				break // the link ended: the engine refused something
			}
		}
		// Whatever came, the receive ends once the job is torn down.
		j.worlds[1].Abort(&errs.Error{Class: errs.Aborted, Rank: errs.None, Peer: errs.None, Tag: errs.None})
		select {
		case <-recv:
		case <-time.After(10 * time.Second):
			t.Fatal("a receive still waits after the job ended")
		}
	})
}

// ackCounter counts the Ack messages a proc sends, on their way to its device.
type ackCounter struct {
	Net
	mu    sync.Mutex
	count int
}

func (a *ackCounter) Post(proc int, ch netd.Channel, h *wire.Header, payload []byte, done func(error)) {
	if h.Kind == wire.Ack {
		a.mu.Lock()
		a.count++
		a.mu.Unlock()
	}
	a.Net.Post(proc, ch, h, payload, done)
}

func (a *ackCounter) sent() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// held is how many eager copies proc i keeps for proc 1-i.
func (j *job) held(i int) int {
	p := j.worlds[i].peers[1-i]
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for m := p.held.head; m != nil; m = m.next {
		n++
	}
	return n
}

// TestRemoteAckRides: in a conversation each Eager carries the acknowledgement of
// what came the other way, so a ping-pong frees the senders' copies without a
// single Ack message; a one-way stream still gets an Ack per ackEvery messages.
func TestRemoteAckRides(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	counters := []*ackCounter{{Net: j.devices[0]}, {Net: j.devices[1]}}
	for i, wd := range j.worlds {
		wd.Connect(counters[i])
	}
	a, b := j.comm(0), j.comm(1)
	const rounds = 100
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for range rounds {
			if _, err := receive(b, 1, buf, 0, 1); err != nil {
				done <- err
				return
			}
			if err := b.Send(1, buf, 0, 2, Standard); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, 8)
	for i := range rounds {
		buf[0] = byte(i)
		if err := a.Send(0, buf, 1, 1, Standard); err != nil {
			t.Fatal(err)
		}
		if _, err := receive(a, 0, buf, 1, 2); err != nil {
			t.Fatal(err)
		}
		if buf[0] != byte(i) {
			t.Fatalf("round %d: reply carries %d", i, buf[0])
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := counters[0].sent() + counters[1].sent(); n != 0 {
		t.Errorf("a ping-pong of %d rounds sent %d Ack messages, want 0", rounds, n)
	}
	// Each reply acknowledged its ping; proc 1's last reply awaits the next ping.
	waitFor(t, "proc 0's copies freed", func() bool { return j.held(0) == 0 })
	if n := j.held(1); n != 1 {
		t.Errorf("proc 1 holds %d copies after the ping-pong, want 1 (its last reply)", n)
	}

	const stream = 40
	for i := range stream {
		if err := a.Send(0, fill(8, i), 1, 3, Standard); err != nil {
			t.Fatal(err)
		}
	}
	for i := range stream {
		if _, err := receive(b, 1, buf, 0, 3); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, fill(8, i)) {
			t.Fatalf("stream message %d: got %v", i, buf)
		}
	}
	waitFor(t, "Acks of the stream", func() bool { return j.held(0) == stream%ackEvery })
	if n := counters[1].sent(); n != stream/ackEvery {
		t.Errorf("a stream of %d messages drew %d Acks, want %d", stream, n, stream/ackEvery)
	}
}

// TestRemoteCancelEager: a send whose eager copy waits at the receiver's proc is
// cancelled there, its copy released, and the receiver's handler reads nothing of
// the copy after releasing it, while other goroutines of that proc take copies
// from the same pool (a read after the release was a data race, seen by -race).
func TestRemoteCancelEager(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			j.worlds[1].free(newCopy(8, key{}))
			runtime.Gosched()
		}
	})
	for i := range 200 {
		var r Request
		if err := j.comm(0).Isend(0, fill(8, i), 1, 5, Standard, &r); err != nil {
			t.Fatal(err)
		}
		Cancel(&r)
		if err := j.worlds[0].Endpoints[0].Wait(&r); err != nil {
			t.Fatal(err)
		}
		if st := result(&r); !st.Cancelled {
			t.Fatalf("send %d: not cancelled, though no receive was posted", i)
		}
	}
	close(stop)
	wg.Wait()
	var r Request
	if err := j.comm(0).Isend(0, fill(8, 1000), 1, 5, Standard, &r); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := receive(j.comm(1), 1, buf, 0, 5); err != nil || !bytes.Equal(buf, fill(8, 1000)) {
		t.Fatalf("after the cancels, a message of tag 5: %v, %v", buf, err)
	}
}

// ringPoller is a Poller whose rings exist or not.
type ringPoller bool

func (ringPoller) PollBegin()    {}
func (ringPoller) Poll() bool    { return false }
func (ringPoller) PollEnd()      {}
func (p ringPoller) Polls() bool { return bool(p) }

// TestDaemonOnly: a receive waits without spinning exactly when its message can
// only come through a receive daemon: from a given rank of another proc, with no
// rings that the waiting rank would poll itself.
func TestDaemonOnly(t *testing.T) {
	l, _ := topo.Uneven([][]int{{2, 1}}) // proc 0: ranks 0 and 1; proc 1: rank 2
	j := newJob(t, l, testConfig())
	c := j.comm(0)
	for _, tc := range []struct {
		poller netd.Poller
		src    int
		want   bool
	}{
		{nil, 2, true}, {nil, 1, false}, {nil, AnySource, false}, {nil, ProcNull, false},
		{ringPoller(false), 2, true}, {ringPoller(true), 2, false}, {ringPoller(true), 1, false},
	} {
		c.World.poller = tc.poller
		if got := c.DaemonOnly(tc.src); got != tc.want {
			t.Errorf("poller %v, source %d: DaemonOnly %v, want %v", tc.poller, tc.src, got, tc.want)
		}
	}
}

// lateSend makes a job of two procs of one rank each, whose proc 1 sends data to
// proc 0 with tag after 10 ms (its receiver parks first); it returns proc 0's
// communicator and the send's outcome to come.
func lateSend(t *testing.T, data []byte, tag int) (*Comm, <-chan error) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	j := newJob(t, l, testConfig())
	c1 := j.comm(1)
	done := make(chan error, 1)
	go func() {
		time.Sleep(10 * time.Millisecond)
		done <- c1.Send(1, data, 0, tag, Standard)
	}()
	return j.comm(0), done
}

// TestWaitWithRemote: a nonblocking receive from another proc, and one from
// ProcNull, complete through WaitWith, which parks for the first (no rings).
func TestWaitWithRemote(t *testing.T) {
	want := fill(100, 3)
	c0, done := lateSend(t, want, 5)
	buf := make([]byte, 100)
	r := NewRequest()
	c0.Irecv(0, buf, 1, 5, r)
	if !c0.DaemonOnly(1) {
		t.Fatal("a receive from another proc over sockets is not left to the daemon")
	}
	if err := c0.WaitWith(0, r, 1); err != nil {
		t.Fatal(err)
	}
	if st := result(r); st.Source != 1 || st.Tag != 5 || !bytes.Equal(buf, want) {
		t.Fatalf("received %+v, data equal %v", st, bytes.Equal(buf, want))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	null := NewRequest()
	c0.Irecv(0, buf, ProcNull, 5, null)
	if err := c0.WaitWith(0, null, ProcNull); err != nil || !null.Done() {
		t.Fatalf("a receive from ProcNull: %v, done %v", err, null.Done())
	}
}

// TestWaitAnyRemote: WaitAny over receives from another proc parks at once when
// told not to poll (only the receive daemon completes them) and returns the one
// the daemon completed.
func TestWaitAnyRemote(t *testing.T) {
	want := fill(100, 4)
	c0, done := lateSend(t, want, 6)
	bufs := [][]byte{make([]byte, 100), make([]byte, 100)}
	rs := []*Request{NewRequest(), NewRequest()}
	c0.Irecv(0, bufs[0], 1, 5, rs[0])
	c0.Irecv(0, bufs[1], 1, 6, rs[1])
	i, err := c0.Peers[0].WaitAny(rs, false)
	if err != nil || i != 1 {
		t.Fatalf("WaitAny: %d, %v; want 1", i, err)
	}
	if st := result(rs[1]); st.Source != 1 || st.Tag != 6 || !bytes.Equal(bufs[1], want) || rs[0].Done() {
		t.Fatalf("received %+v, data equal %v, other receive done %v", st, bytes.Equal(bufs[1], want), rs[0].Done())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	Cancel(rs[0])
	if err := c0.Peers[0].Wait(rs[0]); err != nil || rs[0].flags&cancelled == 0 {
		t.Fatalf("cancelled receive: %v", err)
	}
}

// queueNet is a Net that records, for each Queue, whether the send was to be
// written at once, and says whether its links are rings.
type queueNet struct {
	rings bool
	now   []bool
}

func (q *queueNet) Send(int, netd.Channel, *wire.Header, []byte) error        { return nil }
func (q *queueNet) Post(int, netd.Channel, *wire.Header, []byte, func(error)) {}
func (q *queueNet) Flush(int, netd.Channel) error                             { return nil }
func (q *queueNet) Rings(int, netd.Channel) bool                              { return q.rings }
func (q *queueNet) Queue(_ int, _ netd.Channel, _ *wire.Header, _ []byte, now bool, ordered func()) error {
	q.now = append(q.now, now)
	ordered()
	return nil
}

// TestExchangeWritesAtOnce: a send soon after the last write to a proc is left to
// the send daemon (streaming), unless the proc sent us a message since and the link
// is a ring: then it is an exchange, and the send writes at once, once.
func TestExchangeWritesAtOnce(t *testing.T) {
	l, _ := topo.Uneven([][]int{{1, 1}})
	for _, rings := range []bool{false, true} {
		wd, err := NewJobWorld(l, 0, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		q := &queueNet{rings: rings}
		wd.Connect(q)
		p := wd.peers[1]
		send := func(answered bool) {
			t.Helper()
			if answered {
				if err := wd.Handle(1, &wire.Header{Kind: wire.Ack}, nil); err != nil {
					t.Fatal(err)
				}
			}
			p.wrote.Store(spin.Now() + int64(time.Hour)) // a write just now, whatever the clock does
			if _, err := p.send(&wire.Header{Kind: wire.Eager}, NewRequest(), nil, &p.held); err != nil {
				t.Fatal(err)
			}
		}
		send(false)
		send(true)
		send(false)
		if want := []bool{false, rings, false}; !slices.Equal(q.now, want) {
			t.Errorf("rings %v: sends written at once %v, want %v", rings, q.now, want)
		}
	}
}
