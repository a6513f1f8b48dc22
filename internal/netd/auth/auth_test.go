package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	key      = []byte("0123456789abcdef0123456789abcdef")
	otherKey = []byte("fedcba9876543210fedcba9876543210")
)

const testTimeout = 2 * time.Second

// counting wraps a Conn and counts the bytes read from it.
type counting struct {
	Conn
	n atomic.Int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type result struct {
	peer Hello
	err  error
}

// pair runs both sides of a handshake over net.Pipe. Each side closes its end
// when its Handshake fails, as a caller would.
func pair(t *testing.T, ci, cr Config) (ri, rr result) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ci.Initiator, cr.Initiator = true, false
	if ci.Timeout == 0 {
		ci.Timeout = testTimeout
	}
	if cr.Timeout == 0 {
		cr.Timeout = testTimeout
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ri.peer, ri.err = Handshake(a, ci)
		if ri.err != nil {
			a.Close()
		}
	}()
	go func() {
		defer wg.Done()
		rr.peer, rr.err = Handshake(b, cr)
		if rr.err != nil {
			b.Close()
		}
	}()
	wg.Wait()
	return
}

func TestHandshakeOK(t *testing.T) {
	for _, ch := range []uint8{ChannelP2P, ChannelColl} {
		ri, rr := pair(t,
			Config{Key: key, Job: "job-42", Proc: 3, Channel: ch},
			Config{Key: key, Job: "job-42", Proc: 7})
		if ri.err != nil || rr.err != nil {
			t.Fatalf("initiator: %v; responder: %v", ri.err, rr.err)
		}
		if ri.peer.Proc != 7 || rr.peer.Proc != 3 {
			t.Fatalf("procs learnt: initiator saw %d, responder saw %d", ri.peer.Proc, rr.peer.Proc)
		}
		if ri.peer.Channel != ch || rr.peer.Channel != ch {
			t.Fatalf("channel %d: initiator saw %d, responder saw %d", ch, ri.peer.Channel, rr.peer.Channel)
		}
		if ri.peer.Job != "job-42" || rr.peer.Version != Version {
			t.Fatalf("peer hellos %+v %+v", ri.peer, rr.peer)
		}
		if ri.peer.Nonce == rr.peer.Nonce {
			t.Fatal("both sides used one nonce")
		}
	}
}

// TestDeadlineCleared: after a handshake the connection has no deadline.
func TestDeadlineCleared(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := Handshake(b, Config{Key: key, Job: "j", Proc: 1, Timeout: 50 * time.Millisecond})
		errc <- err
	}()
	if _, err := Handshake(a, Config{Key: key, Job: "j", Proc: 0, Initiator: true, Timeout: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	go func() { _, _ = a.Write([]byte{1}) }()
	var buf [1]byte
	if _, err := b.Read(buf[:]); err != nil {
		t.Fatalf("read after handshake: %v", err)
	}
}

func TestWrongKey(t *testing.T) {
	// The stranger initiates, then the stranger responds: both sides refuse.
	ri, rr := pair(t, Config{Key: otherKey, Job: "j", Proc: 1}, Config{Key: key, Job: "j", Proc: 2})
	if !errors.Is(ri.err, ErrBadKey) || !errors.Is(rr.err, ErrBadKey) {
		t.Fatalf("stranger initiating: initiator %v; responder %v", ri.err, rr.err)
	}
	ri, rr = pair(t, Config{Key: key, Job: "j", Proc: 1}, Config{Key: otherKey, Job: "j", Proc: 2})
	if !errors.Is(ri.err, ErrBadKey) || !errors.Is(rr.err, ErrBadKey) {
		t.Fatalf("stranger responding: initiator %v; responder %v", ri.err, rr.err)
	}
}

func TestWrongJob(t *testing.T) {
	ri, rr := pair(t, Config{Key: key, Job: "job-1", Proc: 1}, Config{Key: key, Job: "job-2", Proc: 2})
	if !errors.Is(ri.err, ErrWrongJob) || !errors.Is(rr.err, ErrWrongJob) {
		t.Fatalf("initiator %v; responder %v", ri.err, rr.err)
	}
}

func TestBadConfig(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, c := range []Config{
		{Key: key[:MinKey-1], Job: "j"},
		{Key: key, Job: ""},
		{Key: key, Job: string(make([]byte, MaxJob+1))},
		{Key: key, Job: "j", Proc: MaxProc + 1},
		{Key: key, Job: "j", Channel: 2},
	} {
		if _, err := Handshake(a, c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func validHello(job string, proc uint32, version uint8) []byte {
	h := Hello{Version: version, Proc: proc, Job: job}
	_, _ = rand.Read(h.Nonce[:])
	return AppendHello(nil, &h)
}

// stranger plays a peer that writes send (then closes if closeAfter) and reads
// whatever it is sent. It returns when its conn is closed.
func stranger(c net.Conn, send []byte, closeAfter bool) {
	go func() { _, _ = io.Copy(io.Discard, c) }()
	if len(send) > 0 {
		_, _ = c.Write(send)
	}
	if closeAfter {
		c.Close()
	}
}

func TestGarbage(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	long := validHello("j", 1, Version)
	binary.LittleEndian.PutUint16(long[6:], 1000)
	long = append(long, bytes.Repeat([]byte("x"), 2000)...)
	badReserved := validHello("j", 1, Version)
	badReserved[12] = 1
	bigProc := validHello("j", 1, Version)
	binary.LittleEndian.PutUint32(bigProc[8:], 1<<31)
	cases := []struct {
		name  string
		send  []byte
		close bool
		want  error
	}{
		{"random", random, false, ErrNotWeft},
		{"http", []byte("GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n"), false, ErrNotWeft},
		{"http short", []byte("GET / HTTP/1.0\r\n\r\n"), false, ErrNotWeft},
		{"truncated hello, silent", validHello("job", 1, Version)[:30], false, ErrNotWeft},
		{"truncated hello, closed", validHello("job", 1, Version)[:30], true, ErrNotWeft},
		{"truncated job id", validHello("job-long", 1, Version)[:50], false, ErrNotWeft},
		{"hello, no proof", validHello("j", 1, Version), false, ErrBadKey},
		{"hello, short proof", append(validHello("j", 1, Version), 1, 2, 3), true, ErrBadKey},
		{"over-long job id", long, false, ErrNotWeft},
		{"reserved bytes", badReserved, false, ErrNotWeft},
		{"proc index", bigProc, false, ErrNotWeft},
		{"version 2", validHello("j", 1, 2), false, ErrVersion},
		{"silence", nil, false, ErrNotWeft},
		{"closed at once", nil, true, ErrNotWeft},
	}
	for _, c := range cases {
		for _, initiator := range []bool{false, true} {
			a, b := net.Pipe()
			cc := &counting{Conn: a}
			go stranger(b, c.send, c.close)
			start := time.Now()
			_, err := Handshake(cc, Config{Key: key, Job: "j", Proc: 0, Initiator: initiator, Timeout: 200 * time.Millisecond})
			el := time.Since(start)
			a.Close()
			b.Close()
			if !errors.Is(err, c.want) {
				t.Errorf("%s (initiator %v): err %v, want %v", c.name, initiator, err, c.want)
			}
			if el > time.Second {
				t.Errorf("%s (initiator %v): took %v", c.name, initiator, el)
			}
			if n := cc.n.Load(); n > MaxRead {
				t.Errorf("%s (initiator %v): read %d bytes > MaxRead %d", c.name, initiator, n, MaxRead)
			}
		}
	}
}

func TestTimeoutVisible(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_, err := Handshake(a, Config{Key: key, Job: "j", Timeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrNotWeft) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err %v, want ErrNotWeft and os.ErrDeadlineExceeded", err)
	}
}

// TestVersionMismatchBothSides: a responder tells a peer of another version
// which one it speaks.
func TestVersionMismatchBothSides(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := Handshake(b, Config{Key: key, Job: "j", Proc: 1, Timeout: testTimeout})
		errc <- err
	}()
	_ = a.SetDeadline(time.Now().Add(testTimeout))
	// The responder reads only the fixed part: net.Pipe has no buffer, so write aside.
	go func() { _, _ = a.Write(validHello("j", 0, Version+1)) }()
	h, _, err := readHello(a)
	if err != nil || h.Version != Version {
		t.Fatalf("peer of version %d read %+v, %v from the responder, want its version %d", Version+1, h, err, Version)
	}
	if err := <-errc; !errors.Is(err, ErrVersion) {
		t.Fatalf("responder: %v", err)
	}
}

// TestReflectHello: a peer echoes our own hello back.
func TestReflectHello(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		h, raw, err := readHello(b)
		if err != nil {
			return
		}
		_ = h
		_, _ = b.Write(raw)
		_, _ = io.Copy(io.Discard, b)
	}()
	_, err := Handshake(a, Config{Key: key, Job: "j", Proc: 4, Initiator: true, Timeout: testTimeout})
	if !errors.Is(err, ErrBadKey) {
		t.Fatalf("err %v, want ErrBadKey", err)
	}
}

// TestReflectProof: a peer without the key answers with a hello of its own
// and then echoes our proof back as its own.
func TestReflectProof(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		if _, _, err := readHello(b); err != nil {
			return
		}
		if _, err := b.Write(validHello("j", 9, Version)); err != nil {
			return
		}
		var p [ProofSize]byte
		if _, err := io.ReadFull(b, p[:]); err != nil {
			return
		}
		_, _ = b.Write(p[:])
	}()
	_, err := Handshake(a, Config{Key: key, Job: "j", Proc: 4, Initiator: true, Timeout: testTimeout})
	if !errors.Is(err, ErrBadKey) {
		t.Fatalf("err %v, want ErrBadKey", err)
	}
}

// TestReflectRelay: a peer without the key has us dial it (conn 2) while it
// dials us (conn 1), and swaps our hellos and proofs between the two, so that
// the transcripts match. It fails because each connection's peer then claims
// our own proc index.
func TestReflectRelay(t *testing.T) {
	us1, them1 := net.Pipe() // they dial us: we respond
	us2, them2 := net.Pipe() // we dial them: we initiate
	defer us1.Close()
	defer them1.Close()
	defer us2.Close()
	defer them2.Close()
	go func() {
		_, helloI2, err := readHello(them2) // our initiator hello
		if err != nil {
			return
		}
		if _, err := them1.Write(helloI2); err != nil { // as theirs on conn 1
			return
		}
		_, helloR1, err := readHello(them1) // our responder hello
		if err != nil {
			return
		}
		if _, err := them2.Write(helloR1); err != nil {
			return
		}
		var p [ProofSize]byte
		if _, err := io.ReadFull(them2, p[:]); err != nil {
			return
		}
		_, _ = them1.Write(p[:])
	}()
	cfg := Config{Key: key, Job: "j", Proc: 4, Timeout: 500 * time.Millisecond}
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err1 = Handshake(us1, cfg)
		us1.Close()
	}()
	go func() {
		defer wg.Done()
		c := cfg
		c.Initiator = true
		_, err2 = Handshake(us2, c)
		us2.Close()
	}()
	wg.Wait()
	if !errors.Is(err1, ErrBadKey) || !errors.Is(err2, ErrBadKey) {
		t.Fatalf("relay: responder %v; initiator %v", err1, err2)
	}
}

func TestHelloRoundTrip(t *testing.T) {
	h := Hello{Version: Version, Channel: ChannelColl, Proc: 12345, Job: "slurm.999.0"}
	_, _ = rand.Read(h.Nonce[:])
	b := AppendHello(nil, &h)
	got, n, err := DecodeHello(append(b, 0xff))
	if err != nil || n != len(b) || got != h {
		t.Fatalf("got %+v, %d, %v", got, n, err)
	}
}

func FuzzHello(f *testing.F) {
	f.Add(validHello("job-42", 3, Version))
	f.Add(validHello("j", 0, Version))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("WEFT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := DecodeHello(b)
		if err != nil {
			if !errors.Is(err, ErrNotWeft) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v is neither ErrNotWeft nor ErrVersion", err)
			}
			return
		}
		if n < helloFixed || n > MaxHello || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if out := AppendHello(nil, &h); !bytes.Equal(out, b[:n]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:n], out)
		}
		// The stream reader agrees with the slice decoder.
		h2, raw, err := readHello(bytes.NewReader(b))
		if err != nil || h2 != h || !bytes.Equal(raw, b[:n]) {
			t.Fatalf("readHello disagrees: %+v %v", h2, err)
		}
	})
}
