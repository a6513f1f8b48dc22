//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/shmem"
)

// socketPair returns the two ends of a fresh Unix stream socket.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return end(fds[0]), end(fds[1])
}

// pair upgrades a fresh socket pair to rings of size bytes.
func pair(t *testing.T, size int) (*Conn, *Conn) {
	t.Helper()
	a, b := socketPair(t)
	type result struct {
		c   net.Conn
		err error
	}
	answered := make(chan result, 1)
	go func() {
		c, err := Answer(b, true)
		answered <- result{c, err}
	}()
	ca, err := Offer(a, size)
	if err != nil {
		t.Fatal(err)
	}
	r := <-answered
	if r.err != nil {
		t.Fatal(r.err)
	}
	da, ok1 := ca.(*Conn)
	db, ok2 := r.c.(*Conn)
	if !ok1 || !ok2 {
		t.Fatalf("upgrade declined: %T, %T", ca, r.c)
	}
	t.Cleanup(func() {
		da.Close()
		db.Close()
	})
	return da, db
}

// checkGoroutines fails t if goroutines are left over once it ends.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines left over", n-before)
		}
	})
}

// TestStream sends random bytes in random pieces through a small ring, so that
// the writer often finds it full and the reader often empty and both sleep;
// what comes out is what went in, in order.
func TestStream(t *testing.T) {
	for _, writerSpin := range []time.Duration{0, 50 * time.Microsecond} {
		checkGoroutines(t)
		a, b := pair(t, MinRing)
		a.Spin = writerSpin
		data := make([]byte, 3<<20+17)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		go func() {
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(3*MinRing))
				if _, err := a.Write(rest[:k]); err != nil {
					t.Error(err)
					return
				}
				rest = rest[k:]
			}
			a.CloseWrite()
		}()
		got, err := io.ReadAll(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("spin %v: %d bytes came, want %d, or they differ", writerSpin, len(got), len(data))
		}
	}
}

// TestTry: the non-blocking calls move what fits and never wait.
func TestTry(t *testing.T) {
	a, b := pair(t, MinRing)
	buf := make([]byte, 2*MinRing)
	if n, err := b.TryRead(buf); n != 0 || err != nil {
		t.Fatalf("TryRead of an empty ring: %d, %v", n, err)
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	n, err := a.TryWrite(buf)
	if n != MinRing || err != nil {
		t.Fatalf("TryWrite of %d bytes into a ring of %d: %d, %v", len(buf), MinRing, n, err)
	}
	if n, err := a.TryWrite(buf); n != 0 || err != nil {
		t.Fatalf("TryWrite into a full ring: %d, %v", n, err)
	}
	got := make([]byte, 100)
	if n, err := b.TryRead(got); n != 100 || err != nil || !bytes.Equal(got, buf[:100]) {
		t.Fatalf("TryRead: %d, %v, %v", n, err, got[:4])
	}
	// Room for 100 more: they wrap around the ring's end.
	if n, err := a.TryWrite(buf[MinRing : MinRing+200]); n != 100 || err != nil {
		t.Fatalf("TryWrite after a read of 100: %d, %v", n, err)
	}
	rest := make([]byte, MinRing)
	if n, err := b.TryRead(rest); n != MinRing || err != nil {
		t.Fatal(n, err)
	}
	if !bytes.Equal(rest[:MinRing-100], buf[100:MinRing]) || !bytes.Equal(rest[MinRing-100:], buf[MinRing:MinRing+100]) {
		t.Fatal("wrapped bytes differ")
	}
}

// writeQuietly moves b into c's outgoing ring as tryWrite does, but rings no
// doorbell: it stands for a doorbell byte that the reader's process has not
// yet taken from its network poller.
func writeQuietly(c *Conn, b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	r := &c.out
	k := copy(r.data[r.pos&r.mask:], b)
	copy(r.data, b[k:])
	r.pos += uint64(len(b))
	r.head.Swap(r.pos)
	r.rwait.CompareAndSwap(1, 0) // as a writer that rings does
}

// readQuietly is writeQuietly's twin for a reader: it drops n bytes of c's
// incoming ring and rings no doorbell.
func readQuietly(c *Conn, n int) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	r := &c.in
	r.pos += uint64(n)
	r.tail.Swap(r.pos)
	r.wwait.CompareAndSwap(1, 0)
}

// asleep waits until flag says that a Read or Write sleeps.
func asleep(t *testing.T, flag func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !flag(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Read or Write never went to sleep")
		}
	}
}

// TestWake: Wake ends the sleep of a Read whose ring got data, and of a Write
// whose ring got room, when no doorbell came; until then they sleep on.
func TestWake(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	quiet := func(what string, done chan string) {
		t.Helper()
		select {
		case s := <-done:
			t.Fatalf("%s returned (%s) with no doorbell and no Wake", what, s)
		case <-time.After(20 * time.Millisecond):
		}
	}
	woken := func(what string, done chan string) string {
		t.Helper()
		select {
		case s := <-done:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still asleep after Wake", what)
			return ""
		}
	}

	read := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		n, err := b.Read(buf)
		read <- fmt.Sprintf("%q, %v", buf[:n], err)
	}()
	asleep(t, b.reading.Load)
	b.Wake() // the ring is empty: the Read sleeps on
	writeQuietly(a, []byte("hello"))
	quiet("Read", read)
	a.Wake() // a's side sleeps in nothing
	quiet("Read", read)
	b.Wake()
	if got := woken("Read", read); got != `"hello", <nil>` {
		t.Fatalf("Read after Wake: %s", got)
	}
	if b.in.rwait.Load() != 0 {
		t.Error("the Read left its sleep flag raised: the writer would ring for nothing")
	}

	if n, err := a.TryWrite(make([]byte, MinRing)); n != MinRing || err != nil {
		t.Fatalf("filling the ring: %d, %v", n, err)
	}
	wrote := make(chan string, 1)
	go func() {
		n, err := a.Write([]byte("more"))
		wrote <- fmt.Sprintf("%d, %v", n, err)
	}()
	asleep(t, a.writing.Load)
	readQuietly(b, 100)
	quiet("Write", wrote)
	a.Wake()
	if got := woken("Write", wrote); got != "4, <nil>" {
		t.Fatalf("Write after Wake: %s", got)
	}
	if a.out.wwait.Load() != 0 {
		t.Error("the Write left its sleep flag raised: the reader would ring for nothing")
	}
	rest := make([]byte, MinRing-100+4) // what readQuietly left, and "more"
	if n, err := io.ReadFull(b, rest); err != nil || string(rest[n-4:]) != "more" {
		t.Fatalf("reading the ring: %d, %v, ends in %q", n, err, rest[n-4:])
	}
}

// TestPeerGone: when the peer closes (or dies: its socket closes either way),
// the reader gets what was written, then io.EOF, and a writer an error, also
// one asleep on a full ring.
func TestPeerGone(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	full := make(chan error, 1)
	go func() {
		_, err := b.Write(make([]byte, 2*MinRing))
		full <- err
	}()
	time.Sleep(20 * time.Millisecond) // b's writer fills the ring and sleeps
	a.Close()
	if err := <-full; err == nil || !errors.Is(err, errPeerGone) {
		t.Fatalf("writer to a closed peer: %v, want %v", err, errPeerGone)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestCloseWakes: a Read asleep returns net.ErrClosed when its own end closes,
// and os.ErrDeadlineExceeded at its deadline.
func TestCloseWakes(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	b.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	b.SetReadDeadline(time.Time{})
	read := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 10))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond)
	b.SetReadDeadline(time.Now().Add(-time.Second)) // wakes the Read asleep
	if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read when the deadline moved into the past: %v", err)
	}
	b.SetReadDeadline(time.Time{})
	go func() {
		_, err := b.Read(make([]byte, 10))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read when closed: %v", err)
	}
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the peer's read after our close: %v, want EOF", err)
	}
}

// TestCorrupt: a head the peer moved past what the ring can hold, or a tail past
// our head, ends the stream with ErrCorrupt; a stray doorbell byte with an error.
func TestCorrupt(t *testing.T) {
	a, b := pair(t, MinRing)
	a.out.head.Store(MinRing + 1)
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a ring whose head is past its size: %v", err)
	}
	if _, err := b.Write(make([]byte, MinRing-1)); err != nil {
		t.Fatal(err)
	}
	a.in.tail.Store(MinRing) // a reads the ring b writes: past b's head, MinRing-1
	// b loads the tail when it needs more room than the tail it saw left.
	if _, err := b.Write([]byte("xy")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("write into a ring whose tail is past our head: %v", err)
	}

	c, d := pair(t, MinRing)
	c.bell.Write([]byte{'?'})
	if _, err := d.Read(make([]byte, 1)); err == nil || !bytes.Contains([]byte(err.Error()), []byte("doorbell")) {
		t.Fatalf("read after a stray doorbell byte: %v", err)
	}
}

// TestAnswerRefuses: offers that break the protocol are refused with ErrOffer;
// a segment the dialer did not seal is declined (the socket stays as it was).
func TestAnswerRefuses(t *testing.T) {
	answer := func(offer []byte, f *os.File) (net.Conn, error) {
		a, b := socketPair(t)
		defer a.Close()
		if err := sendWithFile(a, offer, f); err != nil {
			t.Fatal(err)
		}
		return Answer(b, true)
	}
	seg, f, err := shmem.Create(segmentSize(MinRing))
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Unmap()
	defer f.Close()
	for _, tc := range []struct {
		name  string
		offer []byte
		f     *os.File
	}{
		{"bad magic", []byte("WEFT\x00\x10\x00\x00"), f},
		{"size not a power of two", encodeOffer(MinRing + 1), f},
		{"size too big", encodeOffer(2 * MaxRing), f},
		{"no descriptor", encodeOffer(MinRing), nil},
		{"a descriptor with no segment", encodeOffer(0), f},
		{"wrong segment size", encodeOffer(2 * MinRing), f},
	} {
		c, err := answer(tc.offer, tc.f)
		if tc.name == "wrong segment size" {
			if _, ok := c.(*net.UnixConn); !ok || err != nil {
				t.Errorf("%s: %T, %v, want the socket back", tc.name, c, err)
			}
			continue
		}
		if !errors.Is(err, ErrOffer) {
			t.Errorf("%s: %v, want ErrOffer", tc.name, err)
		}
	}
	// An unsealed memfd of the right size is declined.
	unsealed, err := os.CreateTemp("", "weft-shm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(unsealed.Name())
	defer unsealed.Close()
	unsealed.Truncate(int64(segmentSize(MinRing)))
	if c, err := answer(encodeOffer(MinRing), unsealed); err != nil {
		t.Fatal(err)
	} else if _, ok := c.(*net.UnixConn); !ok {
		t.Fatalf("an unsealed segment was taken: %T", c)
	}
}

func FuzzParseOffer(f *testing.F) {
	f.Add(encodeOffer(MinRing))
	f.Add(encodeOffer(0))
	f.Add([]byte("WSHM\xff\xff\xff\xff"))
	f.Add([]byte("WSHM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		size, err := parseOffer(b)
		if err != nil {
			return
		}
		if size != 0 && (size < MinRing || size > MaxRing || size&(size-1) != 0) {
			t.Fatalf("parseOffer(%q) = %d", b, size)
		}
		if !bytes.Equal(encodeOffer(size), b) {
			t.Fatalf("offer %q parsed as %d, which encodes differently", b, size)
		}
	})
}

// TestAwait: Await returns once the ring has data, and takes none of it; on a
// stop, with the ring still empty; when c is closed; at the end of the stream.
func TestAwait(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	stop := make(chan struct{}, 1)
	awaited := make(chan error, 1)
	await := func() {
		go func() { awaited <- b.Await(stop) }()
		time.Sleep(5 * time.Millisecond)
	}
	await()
	select {
	case err := <-awaited:
		t.Fatalf("Await on an empty ring returned %v", err)
	default:
	}
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := <-awaited; err != nil || !b.Ready() {
		t.Fatalf("Await after a write: %v, ready %v", err, b.Ready())
	}
	buf := make([]byte, 10)
	if n, err := b.TryRead(buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("TryRead after Await: %q, %v", buf[:n], err)
	}
	await()
	stop <- struct{}{}
	if err := <-awaited; err != nil || b.Ready() {
		t.Fatalf("Await stopped: %v, ready %v", err, b.Ready())
	}
	await()
	a.CloseWrite()
	if err := <-awaited; err != nil {
		t.Fatalf("Await at the end of the stream: %v", err)
	}
	if n, err := b.TryRead(buf); n != 0 || err != io.EOF {
		t.Fatalf("TryRead at the end: %d, %v", n, err)
	}
	_, b2 := pair(t, MinRing)
	go func() { awaited <- b2.Await(nil) }()
	time.Sleep(5 * time.Millisecond)
	b2.Close()
	if err := <-awaited; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Await when closed: %v", err)
	}
	if _, err := b2.TryRead(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRead when closed: %v", err)
	}
}

// TestWriteBuffers: a gather-write reaches the reader whole, in one
// publication of the head, and one larger than the ring arrives in order.
func TestWriteBuffers(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	head := a.out.head.Load()
	nb := net.Buffers{[]byte("head"), nil, []byte("er+"), []byte("payload")}
	if n, err := a.WriteBuffers(&nb); n != 14 || err != nil || len(nb) != 0 {
		t.Fatalf("WriteBuffers: %d, %v, %d buffers left", n, err, len(nb))
	}
	if got := a.out.head.Load() - head; got != 14 {
		t.Fatalf("head moved by %d, want 14", got)
	}
	buf := make([]byte, 32)
	if n, _ := b.TryRead(buf); string(buf[:n]) != "header+payload" {
		t.Fatalf("read %q", buf[:n])
	}
	data := make([]byte, 3*MinRing)
	for i := range data {
		data[i] = byte(i * 7)
	}
	go func() {
		nb := net.Buffers{data[:100], data[100 : 2*MinRing], data[2*MinRing:]}
		if _, err := a.WriteBuffers(&nb); err != nil {
			t.Error(err)
		}
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a gather-write three rings long: %v, or the bytes differ", err)
	}
}

// TestCloseWhilePolled: pollers that look at a ring without a lock (Ready,
// Wake, Await) go on safely while it is closed: its segment stays mapped.
func TestCloseWhilePolled(t *testing.T) {
	checkGoroutines(t)
	for range 20 {
		_, b := pair(t, MinRing)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for !closed(b.done) {
					b.Ready()
					b.Wake()
				}
				for range 100 {
					b.Ready()
					b.Wake()
				}
			})
		}
		wg.Go(func() { _ = b.Await(nil) })
		b.Close()
		wg.Wait()
	}
	runtime.GC()
}

// TestBellDeadline: a deadline left on the socket by the upgrade's caller, even
// one in the past, does not end the stream: the peer is not gone, and reads
// and writes go on.
func TestBellDeadline(t *testing.T) {
	checkGoroutines(t)
	a, b := pair(t, MinRing)
	for range 3 {
		b.bell.SetDeadline(time.Unix(1, 0))
		time.Sleep(2 * time.Millisecond)
	}
	if closed(b.gone) {
		t.Fatal("a past deadline on the socket counts as the peer gone")
	}
	if _, err := a.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "still" {
		t.Fatalf("read after the deadline: %q, %v", buf[:n], err)
	}
	if _, err := b.Write([]byte("here")); err != nil {
		t.Fatalf("write after the deadline: %v", err)
	}
}

// TestHandOffUnderRace: a buffer that one goroutine wrote into the ring, and that
// another reuses once the peer's answer has come back through the other ring, is
// not a race, as the same hand-off through a socket is not: under -race, the
// write of the reused buffer must not be reported against the read of the first
// write (the race detector sees no order through memory that both procs map, so
// the rings tell it, as internal/poll does for file descriptors).
func TestHandOffUnderRace(t *testing.T) {
	a, b := pair(t, MinRing)
	buf := []byte("payload")
	wrote := make(chan error, 1)
	go func() { // the sender, as a rank whose message a daemon writes
		_, err := a.Write(buf)
		wrote <- err
	}()
	go func() { // the peer proc: it reads the message, then answers
		got := make([]byte, len(buf))
		if _, err := io.ReadFull(b, got); err != nil {
			t.Error(err)
		}
		if _, err := b.Write([]byte{1}); err != nil {
			t.Error(err)
		}
	}()
	answer := make([]byte, 1)
	if _, err := io.ReadFull(a, answer); err != nil { // the receive daemon
		t.Fatal(err)
	}
	copy(buf, "reused!") // the buffer goes back to its pool and is filled again
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
