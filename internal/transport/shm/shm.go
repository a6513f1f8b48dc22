// Package shm is a byte stream between two procs of one host through shared
// memory: a pair of single-producer single-consumer rings in one segment that
// both procs map. Writing is a copy into the ring and reading a copy out of it,
// with no system call while the other side keeps up, which is what makes a
// polling reader fast across processes.
//
// A Unix domain socket between the two procs stays beside the rings. It carries
// the segment when the connection opens (Offer, Answer), then serves as the
// doorbell: a side that found nothing to read, or no room to write, flags that it
// sleeps and waits for a byte on the socket, which the other side sends only then.
// It is also the liveness check: when a proc dies, its end of the socket closes
// and the survivor's reads and writes end instead of waiting forever.
//
// The peer's words in the segment are never trusted: a head or tail that
// cannot be (more data than the ring holds) ends the stream with an error.
package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/internal/shmem"
	"github.com/weft-mpi/weft/internal/spin"
)

// Layout of a segment: a page of two control blocks, then the two rings' data.
// The dialer (Offer) writes ring 0 and reads ring 1; the other side the reverse.
// A control block holds, each on a cache line of its own so that the producer
// and the consumer do not share one: the producer's head (bytes ever written),
// the consumer's tail (bytes ever read), the two sleep flags, and the
// producer's end-of-stream flag.
const (
	ctlSize   = 512
	dataStart = 4096
	offHead   = 0
	offTail   = 64
	offRWait  = 128 // the consumer sleeps until data comes
	offWWait  = 192 // the producer sleeps until room comes
	offEOF    = 256 // the producer wrote its last byte (CloseWrite)
)

// Ring sizes a segment may have: a power of two in [MinRing, MaxRing].
const (
	MinRing     = 4 << 10
	MaxRing     = 64 << 20
	DefaultRing = 1 << 20
)

// Doorbell bytes on the socket.
const (
	bellData  = 'D' // your ring has data
	bellSpace = 'S' // your ring has room
)

// segmentSize is the bytes of a segment whose rings hold size bytes each.
func segmentSize(size int) int { return dataStart + 2*size }

// ring is one direction of a segment, seen from one side.
//
// A side that publishes its counter (head, tail) or raises its sleep flag and
// then reads the other side's word does so with Swap: the pairs of a store
// and a later load of another word are what keeps a sleeper from missing the
// other side's move (each side sees the other's store, or the other sees its
// own). Go promises that of Store too, and Store is an XCHG on amd64, as Swap
// is, but the race detector's Store of a word outside the Go heap is a plain
// move that a later load may pass (golang/go#58020): under -race a reader
// and a writer then both slept with the ring full, in one run in a few dozen.
type ring struct {
	head, tail   *atomic.Uint64
	rwait, wwait *atomic.Uint32
	eof          *atomic.Uint32
	data         []byte
	size         uint64
	pos          uint64 // our own counter: tail if we read the ring, head if we write it
	seen         uint64 // the writer's last load of the reader's tail
	mask         uint64
}

func newRing(mem []byte, i, size int) ring {
	ctl := mem[i*ctlSize : (i+1)*ctlSize]
	word := func(off int) unsafe.Pointer { return unsafe.Pointer(&ctl[off]) }
	start := dataStart + i*size
	return ring{
		head:  (*atomic.Uint64)(word(offHead)),
		tail:  (*atomic.Uint64)(word(offTail)),
		rwait: (*atomic.Uint32)(word(offRWait)),
		wwait: (*atomic.Uint32)(word(offWWait)),
		eof:   (*atomic.Uint32)(word(offEOF)),
		data:  mem[start : start+size : start+size],
		size:  uint64(size),
		mask:  uint64(size - 1),
	}
}

// ErrCorrupt: the peer left a ring in a state no correct peer can make.
var ErrCorrupt = errors.New("shm: ring corrupt")

// errPeerGone: the peer's end of the socket closed.
var errPeerGone = errors.New("shm: peer hung up")

// Conn is one end of a shared-memory stream. It is a net.Conn; TryRead and
// TryWrite are its non-blocking reads and writes, for a caller that polls.
// Reads are safe from any goroutine, each taking the next bytes there are (Await
// waits for them and takes none); writes from one goroutine at a time, reads and
// writes concurrently, Close and the deadlines from anywhere.
type Conn struct {
	bell *net.UnixConn
	seg  *shmem.Segment
	in   ring // the peer writes, we read
	out  ring // we write, the peer reads

	// Spin is how long a Write that found the ring full polls for room before
	// it sleeps until the reader rings.
	Spin time.Duration

	rmu, wmu        sync.Mutex // a Read or TryRead, a Write or TryWrite
	dataBell        chan struct{}
	spaceBell       chan struct{}
	done            chan struct{} // closed by Close
	gone            chan struct{} // closed when the socket ends (the peer hung up or died)
	ringer          sync.WaitGroup
	closeOnce       sync.Once
	readDL, writeDL atomic.Int64 // deadlines in Unix nanoseconds, 0: none
	bellErr         atomic.Pointer[error]
	wroteEOF        bool        // CloseWrite done; guarded by wmu
	reading         atomic.Bool // a Read or Await sleeps until the doorbell rings (see Wake)
	over            atomic.Bool // gone or done is closed: Ready's test without a channel operation
	writing         atomic.Bool // a Write does
}

func newConn(bell *net.UnixConn, seg *shmem.Segment, size int, dialer bool) *Conn {
	in, out := 1, 0
	if !dialer {
		in, out = 0, 1
	}
	c := &Conn{
		bell: bell, seg: seg,
		in: newRing(seg.Mem, in, size), out: newRing(seg.Mem, out, size),
		dataBell: make(chan struct{}, 1), spaceBell: make(chan struct{}, 1),
		done: make(chan struct{}), gone: make(chan struct{}),
	}
	runtime.AddCleanup(c, func(s *shmem.Segment) { _ = s.Unmap() }, seg)
	c.ringer.Add(1)
	go c.listen()
	return c
}

// listen reads doorbell bytes until the socket ends. A deadline on the socket
// does not end it: c keeps its own (SetReadDeadline), and one on the socket is
// left over from the upgrade, set by the caller of Offer or Answer to bound it
// (and, by a netd Device that closes meanwhile, moved into the past) until
// that caller clears it. Ending there made the Conn report its peer gone: the
// Device's Close then failed to say goodbye, and the peer counted it as lost.
func (c *Conn) listen() {
	defer c.ringer.Done()
	defer c.over.Store(true) // after the close: a poller that sees it finds gone closed
	defer close(c.gone)
	var b [64]byte
	for {
		n, err := c.bell.Read(b[:])
		for _, x := range b[:n] {
			switch x {
			case bellData:
				signal(c.dataBell)
			case bellSpace:
				signal(c.spaceBell)
			default:
				err := fmt.Errorf("shm: doorbell byte %#x from the peer", x)
				c.bellErr.Store(&err)
				_ = c.bell.Close()
				return
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !closed(c.done) {
			_ = c.bell.SetDeadline(time.Time{})
			continue
		}
		if err != nil {
			return
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ring sends the peer a doorbell byte; an error means the peer is gone, which
// its own reads and writes find out.
func (c *Conn) ring(b byte) {
	_, _ = c.bell.Write([]byte{b})
}

// closedErr says why c can no longer be used, or nil.
func (c *Conn) closedErr() error {
	if closed(c.done) {
		return net.ErrClosed
	}
	return nil
}

// closed says whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// peerErr is the error of a stream whose peer hung up: io.EOF for a reader
// that took all the data, errPeerGone for a writer; a bad doorbell overrides both.
func (c *Conn) peerErr(eof error) error {
	if p := c.bellErr.Load(); p != nil {
		return *p
	}
	return eof
}

// TryRead reads what the ring holds, up to len(b) bytes, without waiting: 0
// and no error when it is empty. At the end of the stream it returns io.EOF.
func (c *Conn) TryRead(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.closedErr(); err != nil {
		return 0, err
	}
	return c.tryRead(b)
}

func (c *Conn) tryRead(b []byte) (int, error) {
	r := &c.in
	avail, err := r.readable()
	if err != nil {
		return 0, err
	}
	if avail == 0 {
		// Perhaps the end: the peer sets its end flag, or hangs up, after its
		// last head, so a head read after the end was seen is the last one.
		eof := r.eof.Load() != 0
		if !eof && !closed(c.gone) {
			return 0, nil
		}
		if avail, err = r.readable(); err != nil {
			return 0, err
		}
		if avail == 0 {
			if eof {
				return 0, io.EOF
			}
			return 0, c.peerErr(io.EOF)
		}
	}
	if len(b) == 0 {
		return 0, nil
	}
	n := min(uint64(len(b)), avail)
	at := r.pos & r.mask
	k := copy(b[:n], r.data[at:])
	copy(b[k:n], r.data)
	raceAcquireRead()
	r.pos += n
	r.tail.Swap(r.pos)
	if r.wwait.Load() != 0 && r.wwait.CompareAndSwap(1, 0) {
		c.ring(bellSpace)
	}
	return int(n), nil
}

// readable is how many bytes the peer has written that we have not read.
func (r *ring) readable() (uint64, error) {
	n := r.head.Load() - r.pos
	if n > r.size {
		return 0, fmt.Errorf("%w: the peer's head is %d bytes past our tail, in a ring of %d", ErrCorrupt, n, r.size)
	}
	return n, nil
}

// writable is how many bytes we may write before the ring is full, or at least
// want of them. It loads the reader's tail only when the tail it saw last leaves
// less room than want: that load misses the cache whenever the reader has moved
// the tail, and then takes the line from the reader, which stalls its next store.
func (r *ring) writable(want uint64) (uint64, error) {
	if room := r.size - (r.pos - r.seen); room >= want {
		return room, nil
	}
	tail := r.tail.Load()
	used := r.pos - tail
	if used > r.size {
		return 0, fmt.Errorf("%w: the peer's tail is %d bytes behind our head, in a ring of %d", ErrCorrupt, used, r.size)
	}
	r.seen = tail
	return r.size - used, nil
}

// Read reads at least one byte into b, waiting for the peer to write.
func (c *Conn) Read(b []byte) (int, error) {
	for {
		n, err := c.TryRead(b)
		if n > 0 || err != nil || len(b) == 0 {
			return n, err
		}
		if err := c.Await(nil); err != nil {
			return 0, err
		}
	}
}

// Await waits until a TryRead would find something (see Ready), stop receives,
// the read deadline passes, or c is closed; it reads nothing. It is the sleep
// of Read, for a reader that shares the ring's data with goroutines that poll
// it (TryRead) and must not take what they are waiting for.
func (c *Conn) Await(stop <-chan struct{}) error {
	for !c.Ready() {
		// Flag that we sleep, then look again: a writer that published before
		// it saw the flag left data we now see, one that published after rings.
		c.in.rwait.Swap(1)
		if c.Ready() {
			c.in.rwait.CompareAndSwap(1, 0)
			return nil
		}
		c.reading.Store(true)
		stopped, err := c.wait(c.dataBell, &c.readDL, stop)
		c.reading.Store(false)
		c.in.rwait.CompareAndSwap(1, 0) // woken otherwise, the writer would ring for nothing
		if err != nil || stopped {
			return err
		}
	}
	return nil
}

// TryWrite writes what the ring has room for of b, without waiting.
func (c *Conn) TryWrite(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writeErr(); err != nil {
		return 0, err
	}
	bufs := net.Buffers{b}
	return c.tryWrite(&bufs)
}

// writeErr says why c takes no more writes, or nil.
func (c *Conn) writeErr() error {
	if err := c.closedErr(); err != nil {
		return err
	}
	if c.wroteEOF {
		return fmt.Errorf("shm: write after CloseWrite")
	}
	if closed(c.gone) {
		return c.peerErr(errPeerGone)
	}
	return nil
}

// tryWrite writes what the ring has room for of bufs, in order, and drops it
// from bufs. One publication of the head covers it all: a reader that polls
// sees a message whole, and its line moves between the procs once.
func (c *Conn) tryWrite(bufs *net.Buffers) (int, error) {
	r := &c.out
	want := uint64(0)
	for _, b := range *bufs {
		want += uint64(len(b))
	}
	room, err := r.writable(want)
	if err != nil || room == 0 {
		return 0, err
	}
	n := uint64(0)
	for len(*bufs) > 0 && n < room {
		b := (*bufs)[0]
		k := min(uint64(len(b)), room-n)
		at := r.pos & r.mask
		m := copy(r.data[at:], b[:k])
		copy(r.data, b[m:k])
		r.pos += k
		n += k
		if k == uint64(len(b)) {
			*bufs = (*bufs)[1:]
		} else {
			(*bufs)[0] = b[k:]
		}
	}
	if n == 0 {
		return 0, nil
	}
	raceReleaseWrite()
	r.head.Swap(r.pos)
	if r.rwait.Load() != 0 && r.rwait.CompareAndSwap(1, 0) {
		c.ring(bellData)
	}
	return int(n), nil
}

// Write writes all of b, waiting for room as the peer reads.
func (c *Conn) Write(b []byte) (int, error) {
	bufs := net.Buffers{b}
	n, err := c.WriteBuffers(&bufs)
	return int(n), err
}

// WriteBuffers writes all of bufs, as Write, and drops it from bufs: as much as
// the ring has room for at a time, with one publication.
func (c *Conn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	done := int64(0)
	var start time.Time
	for {
		if err := c.writeErr(); err != nil {
			return done, err
		}
		n, err := c.tryWrite(bufs)
		done += int64(n)
		if err != nil || !hasBytes(*bufs) {
			return done, err
		}
		if n > 0 {
			start = time.Time{}
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		if time.Since(start) < c.Spin {
			runtime.Gosched()
			spin.Yield() // the reader may be a thread waiting for this processor
			continue
		}
		c.out.wwait.Swap(1)
		if room, err := c.out.writable(1); room > 0 || err != nil {
			c.out.wwait.CompareAndSwap(1, 0)
			continue
		}
		c.writing.Store(true)
		_, err = c.wait(c.spaceBell, &c.writeDL, nil)
		c.writing.Store(false)
		c.out.wwait.CompareAndSwap(1, 0)
		if err != nil {
			return done, err
		}
	}
}

// hasBytes says whether any of bufs is not empty.
func hasBytes(bufs net.Buffers) bool {
	for _, b := range bufs {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

// Ready says whether a TryRead would find something: data, the end of the
// stream, or an error. Safe from any goroutine, for a poller watching rings that
// others read.
func (c *Conn) Ready() bool {
	return c.in.head.Load() != c.in.tail.Load() || c.in.eof.Load() != 0 || c.over.Load()
}

// Closed returns a channel closed by Close.
func (c *Conn) Closed() <-chan struct{} { return c.done }

// Wake ends the sleep of a Read that waits for data the ring already holds, or
// of a Write that waits for room the ring already has. Such a sleeper waits
// for the peer's doorbell byte, which reaches it through the Go network poller,
// and the scheduler consults the poller only when no goroutine of the process
// is ready to run: while another goroutine polls (a receive daemon of another
// connection, yielding between polls), the byte waits until that one stops
// polling. A poller that calls Wake for every ring of its process ends that
// wait at its next poll. The sleep flags in the segment cannot tell who
// sleeps, since the peer clears them when it rings; reading and writing are
// our own.
func (c *Conn) Wake() {
	if c.reading.Load() && c.in.head.Load() != c.in.tail.Load() {
		signal(c.dataBell)
	}
	if c.writing.Load() && c.out.head.Load()-c.out.tail.Load() < c.out.size {
		signal(c.spaceBell)
	}
}

// wait sleeps until bell rings, the peer hangs up (the caller looks again and
// finds out), stop receives (stopped), the deadline in dl passes, or c is closed.
func (c *Conn) wait(bell chan struct{}, dl *atomic.Int64, stop <-chan struct{}) (stopped bool, err error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var expired <-chan time.Time
		if d := dl.Load(); d != 0 {
			left := time.Until(time.Unix(0, d))
			if left <= 0 {
				return false, os.ErrDeadlineExceeded
			}
			if timer == nil {
				timer = time.NewTimer(left)
			} else {
				timer.Reset(left)
			}
			expired = timer.C
		}
		select {
		case <-bell:
			return false, nil
		case <-c.gone:
			return false, nil
		case <-stop:
			return true, nil
		case <-c.done:
			return false, net.ErrClosed
		case <-expired:
		}
	}
}

// CloseWrite ends the stream we write: the peer reads what we wrote, then
// io.EOF. We may go on reading.
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.closedErr(); err != nil {
		return err
	}
	if !c.wroteEOF {
		c.wroteEOF = true
		c.out.eof.Store(1)
		c.ring(bellData)
	}
	return nil
}

// Close ends both directions; the peer's reads and writes end too. Reads and
// writes under way return net.ErrClosed. The segment stays mapped until c is
// garbage: Ready, Wake and Await may be under way on other goroutines, which
// poll without a lock.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.done)
		c.over.Store(true)
	})
	if !first {
		return net.ErrClosed
	}
	err := c.bell.Close()
	c.ringer.Wait()
	return err
}

func (c *Conn) LocalAddr() net.Addr  { return c.bell.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr { return c.bell.RemoteAddr() }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.readDL.Store(unixNano(t))
	signal(c.dataBell) // a Read asleep looks at its new deadline
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.writeDL.Store(unixNano(t))
	signal(c.spaceBell)
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}
