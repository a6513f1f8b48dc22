package mpi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/mpi"
)

// ---- element types, sizes and paths ----

type celsius float64 // a named type: Elem admits ~float64

// roundTrip sends vals, an empty slice, a nil one and a long repetition of vals from
// rank 0 to rank 1 and checks the values bit for bit, the status and GetCount.
func roundTrip[T mpi.Elem](t *testing.T, vals []T) {
	t.Helper()
	long := make([]T, 0, 3000)
	for len(long) < cap(long) {
		long = append(long, vals...)
	}
	msgs := [][]T{vals, {}, nil, long}
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			for i, m := range msgs {
				if err := mpi.Send(c, m, 1, i); err != nil {
					return err
				}
			}
			return nil
		},
		func(c *mpi.Comm) error {
			for i, m := range msgs {
				var got []T // nil for the nil message
				if m != nil {
					got = make([]T, len(m))
				}
				st, err := mpi.Recv(c, got, 0, i)
				if err != nil {
					return err
				}
				if st.Source != 0 || st.Tag != i || mpi.GetCount[T](st) != len(m) {
					return fmt.Errorf("message %d: status {source %d, tag %d, count %d}, want {0, %d, %d}",
						i, st.Source, st.Tag, mpi.GetCount[T](st), i, len(m))
				}
				if !bytes.Equal(raw(got), raw(m)) {
					return fmt.Errorf("message %d: got %v, want %v", i, got[:min(len(got), 8)], m[:min(len(m), 8)])
				}
			}
			return nil
		}))
}

func TestSendRecvTypes(t *testing.T) {
	nan32 := math.Float32frombits(0x7fc00123)
	tests := []struct {
		name string
		test func(*testing.T)
	}{
		{"int", func(t *testing.T) { roundTrip(t, []int{0, 1, -1, math.MaxInt, math.MinInt}) }},
		{"int8", func(t *testing.T) { roundTrip(t, []int8{0, 1, -1, math.MaxInt8, math.MinInt8}) }},
		{"int16", func(t *testing.T) { roundTrip(t, []int16{0, 1, -1, math.MaxInt16, math.MinInt16}) }},
		{"int32", func(t *testing.T) { roundTrip(t, []int32{0, 1, -1, math.MaxInt32, math.MinInt32}) }},
		{"int64", func(t *testing.T) { roundTrip(t, []int64{0, 1, -1, math.MaxInt64, math.MinInt64}) }},
		{"uint", func(t *testing.T) { roundTrip(t, []uint{0, 1, math.MaxUint}) }},
		{"uint8", func(t *testing.T) { roundTrip(t, []uint8{0, 1, math.MaxUint8}) }},
		{"uint16", func(t *testing.T) { roundTrip(t, []uint16{0, 1, math.MaxUint16}) }},
		{"uint32", func(t *testing.T) { roundTrip(t, []uint32{0, 1, math.MaxUint32}) }},
		{"uint64", func(t *testing.T) { roundTrip(t, []uint64{0, 1, math.MaxUint64}) }},
		{"uintptr", func(t *testing.T) { roundTrip(t, []uintptr{0, 1, ^uintptr(0)}) }},
		{"float32", func(t *testing.T) {
			roundTrip(t, []float32{0, float32(math.Copysign(0, -1)), 1.5, -math.MaxFloat32, math.SmallestNonzeroFloat32,
				float32(math.Inf(1)), float32(math.Inf(-1)), nan32})
		}},
		{"float64", func(t *testing.T) {
			roundTrip(t, []float64{0, math.Copysign(0, -1), math.Pi, math.MaxFloat64, -math.SmallestNonzeroFloat64,
				math.Inf(1), math.Inf(-1), math.NaN()})
		}},
		{"complex64", func(t *testing.T) { roundTrip(t, []complex64{0, 1 + 2i, complex(float32(math.Inf(1)), nan32)}) }},
		{"complex128", func(t *testing.T) { roundTrip(t, []complex128{0, -1 - 2i, complex(math.MaxFloat64, math.NaN())}) }},
		{"bool", func(t *testing.T) { roundTrip(t, []bool{true, false, false, true, true}) }},
		{"byte", func(t *testing.T) { roundTrip(t, []byte("weft\x00\xff")) }},
		{"named float64", func(t *testing.T) { roundTrip(t, []celsius{-273.15, 100}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.test)
	}
}

// order is how a send and its receive meet in the engine.
type order int

const (
	prePosted order = iota // the receive is posted (Irecv) before a blocking Send starts
	queued                 // Isend queues the message before the receive (Recv) starts
	late                   // a blocking Send, and a Recv started shortly after
)

var orders = []struct {
	name string
	o    order
}{{"preposted", prePosted}, {"queued", queued}, {"late", late}}

// transfer sends msg from rank 0 to rank 1 with tag 9 in order ord and returns what
// rank 1's receive into a recvLen-byte buffer, filled with 0xEE beforehand, produced.
func transfer(t *testing.T, ord order, msg []byte, recvLen int, opts ...mpi.Option) ([]byte, mpi.Status, error) {
	t.Helper()
	buf := bytes.Repeat([]byte{0xEE}, recvLen)
	var st mpi.Status
	var rerr error
	g := newGate()
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			switch ord {
			case prePosted:
				if err := g.wait(); err != nil {
					return err
				}
			case queued:
				r, err := mpi.Isend(c, msg, 1, 9)
				if err != nil {
					return err
				}
				g.open()
				_, err = r.Wait()
				return err
			}
			return mpi.Send(c, msg, 1, 9)
		},
		func(c *mpi.Comm) error {
			switch ord {
			case prePosted:
				r, err := mpi.Irecv(c, buf, 0, 9)
				if err != nil {
					return err
				}
				g.open()
				st, rerr = r.Wait()
				return nil
			case queued:
				if err := g.wait(); err != nil {
					return err
				}
			case late:
				time.Sleep(time.Millisecond)
			}
			st, rerr = mpi.Recv(c, buf, 0, 9)
			return nil
		}), opts...)
	return buf, st, rerr
}

// forPaths runs test for every engine configuration and order.
func forPaths(t *testing.T, test func(t *testing.T, ord order, opts []mpi.Option)) {
	for _, cfg := range configs {
		for _, o := range orders {
			t.Run(cfg.name+"/"+o.name, func(t *testing.T) { test(t, o.o, cfg.opts) })
		}
	}
}

var sizes = []int{0, 1, 1001, mpi.DefaultEagerLimit, mpi.DefaultEagerLimit + 1, 300_001, 1 << 20}

func TestSendRecvSizes(t *testing.T) {
	forPaths(t, func(t *testing.T, ord order, opts []mpi.Option) {
		for _, n := range sizes {
			msg := pattern(n, byte(n))
			got, st, err := transfer(t, ord, msg, n, opts...)
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if err := wantStatus(st, 0, 9, n); err != nil {
				t.Errorf("%d bytes: %v", n, err)
			}
			if !bytes.Equal(got, msg) {
				t.Errorf("%d bytes: received data differs from what was sent", n)
			}
		}
	})
}

func TestRecvIntoLargerBuffer(t *testing.T) {
	forPaths(t, func(t *testing.T, ord order, opts []mpi.Option) {
		for _, n := range []int{0, 5, 3 * mpi.DefaultEagerLimit, 300_001} {
			msg := pattern(n, 1)
			got, st, err := transfer(t, ord, msg, 2*n+3, opts...)
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if err := wantStatus(st, 0, 9, n); err != nil {
				t.Errorf("%d bytes into %d: %v", n, 2*n+3, err)
			}
			if !bytes.Equal(got[:n], msg) {
				t.Errorf("%d bytes: received data differs from what was sent", n)
			}
			if tail := got[n:]; !bytes.Equal(tail, bytes.Repeat([]byte{0xEE}, len(tail))) {
				t.Errorf("%d bytes: the receive wrote past the message, into the rest of the buffer", n)
			}
		}
	})
}

func TestTruncate(t *testing.T) {
	forPaths(t, func(t *testing.T, ord order, opts []mpi.Option) {
		for _, tc := range []struct{ msg, buf int }{{1, 0}, {11, 10}, {1 << 20, 1 << 19}, {1<<20 + 5, 1<<19 + 3}} {
			_, st, err := transfer(t, ord, pattern(tc.msg, 0), tc.buf, opts...)
			e, cerr := wantClass(err, mpi.ErrTruncate)
			if cerr != nil {
				t.Errorf("%d bytes into %d: %v", tc.msg, tc.buf, cerr)
				continue
			}
			if e.Rank != 1 || e.Peer != 0 || e.Tag != 9 {
				t.Errorf("error {rank %d, peer %d, tag %d}, want {1, 0, 9}", e.Rank, e.Peer, e.Tag)
			}
			for _, s := range []string{fmt.Sprintf("%d-byte message", tc.msg), fmt.Sprintf("%d-byte receive buffer", tc.buf)} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if st.Source != 0 || st.Tag != 9 {
				t.Errorf("status {source %d, tag %d}, want {0, 9}", st.Source, st.Tag)
			}
		}
	})
}

func TestTruncatedMessageIsConsumed(t *testing.T) {
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if err := mpi.Send(c, []int64{1, 2, 3}, 1, 0); err != nil {
				return err
			}
			return mpi.Send(c, []int64{4}, 1, 0)
		},
		func(c *mpi.Comm) error {
			buf := make([]int64, 2)
			if _, err := mpi.Recv(c, buf, 0, 0); !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("first Recv: %v, want ErrTruncate", err)
			}
			st, err := mpi.Recv(c, buf, 0, 0)
			if err != nil || buf[0] != 4 || mpi.GetCount[int64](st) != 1 {
				return fmt.Errorf("second Recv got %v (count %d, err %v), want the second message [4]", buf, mpi.GetCount[int64](st), err)
			}
			return nil
		}))
}

func TestGetCount(t *testing.T) {
	counts := func(st mpi.Status) []int {
		return []int{mpi.GetCount[byte](st), mpi.GetCount[int16](st), mpi.GetCount[int32](st),
			mpi.GetCount[float64](st), mpi.GetCount[complex128](st)}
	}
	const U = mpi.Undefined
	tests := []struct {
		msg, buf int
		want     []int // byte, int16, int32, float64, complex128
	}{
		{0, 0, []int{0, 0, 0, 0, 0}},
		{3, 3, []int{3, U, U, U, U}},
		{3, 8, []int{3, U, U, U, U}},
		{4, 4, []int{4, 2, 1, U, U}},
		{24, 64, []int{24, 12, 6, 3, U}},
		{32, 32, []int{32, 16, 8, 4, 2}},
	}
	for _, tt := range tests {
		_, st, err := transfer(t, queued, pattern(tt.msg, 0), tt.buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := counts(st); !slicesEqual(got, tt.want) {
			t.Errorf("%d bytes into %d: GetCount byte, int16, int32, float64, complex128 = %v, want %v", tt.msg, tt.buf, got, tt.want)
		}
	}
	t.Run("typed buffer", func(t *testing.T) {
		mustRun(t, 2, rankFuncs(
			func(c *mpi.Comm) error { return mpi.Send(c, []byte{1, 2, 3}, 1, 0) },
			func(c *mpi.Comm) error {
				buf := []int16{-1, -1}
				st, err := mpi.Recv(c, buf, 0, 0)
				if err != nil {
					return err
				}
				if mpi.GetCount[int16](st) != mpi.Undefined || mpi.GetCount[byte](st) != 3 {
					return fmt.Errorf("3 bytes into []int16: GetCount int16 %d, byte %d; want Undefined, 3",
						mpi.GetCount[int16](st), mpi.GetCount[byte](st))
				}
				if got := raw(buf); !bytes.Equal(got, []byte{1, 2, 3, 0xff}) {
					return fmt.Errorf("buffer bytes %v, want [1 2 3 255]", got)
				}
				return nil
			}))
	})
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---- message order ----

// stamped returns the seq-th message of rank src: its size varies with seq, some
// above the eager limit, and its first 16 bytes say src and seq.
func stamped(src, seq int) []byte {
	n := 16 + seq%13
	if seq%5 == 0 {
		n += mpi.DefaultEagerLimit
	}
	b := pattern(n, byte(seq+src))
	binary.LittleEndian.PutUint64(b, uint64(src))
	binary.LittleEndian.PutUint64(b[8:], uint64(seq))
	return b
}

const maxStamped = 16 + 12 + mpi.DefaultEagerLimit

// checkStamped checks that the receive into buf with status st got message seq of src.
func checkStamped(buf []byte, st mpi.Status, src, seq, tag int) error {
	return checkMessage(buf, st, src, tag, stamped(src, seq))
}

// checkMessage checks that the receive into buf with status st got want from source
// with tag.
func checkMessage(buf []byte, st mpi.Status, source, tag int, want []byte) error {
	if st.Source != source || st.Tag != tag || mpi.GetCount[byte](st) != len(want) || !bytes.Equal(buf[:len(want)], want) {
		gotSrc, gotSeq := binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[8:])
		wantSrc, wantSeq := binary.LittleEndian.Uint64(want), binary.LittleEndian.Uint64(want[8:])
		return fmt.Errorf("received {source %d, tag %d, %d bytes, stamp %d/%d}, want {source %d, tag %d, %d bytes, stamp %d/%d}",
			st.Source, st.Tag, mpi.GetCount[byte](st), gotSrc, gotSeq, source, tag, len(want), wantSrc, wantSeq)
	}
	return nil
}

// sendStamped sends messages 0..n-1 of c's rank to dest, with tag tagOf(seq),
// cycling through the send modes, and waits for them all.
func sendStamped(c *mpi.Comm, dest, n int, tagOf func(int) int) error {
	// Room for every Bsend and Ibsend (2 in 6 messages), even if none is received yet.
	if err := c.AttachBuffer(make([]byte, (n/3+2)*(maxStamped+mpi.BsendOverhead))); err != nil {
		return err
	}
	var reqs []*mpi.Request
	for seq := range n {
		msg, tag := stamped(c.Rank(), seq), tagOf(seq)
		var r *mpi.Request
		var err error
		switch seq % 6 {
		case 0:
			err = mpi.Send(c, msg, dest, tag)
		case 1:
			r, err = mpi.Isend(c, msg, dest, tag)
		case 2:
			err = mpi.Bsend(c, msg, dest, tag)
		case 3:
			r, err = mpi.Ibsend(c, msg, dest, tag)
		case 4:
			err = mpi.Ssend(c, msg, dest, tag)
		case 5:
			r, err = mpi.Irsend(c, msg, dest, tag)
		}
		if err != nil {
			return err
		}
		if r != nil {
			reqs = append(reqs, r)
		}
	}
	if _, err := mpi.Waitall(reqs...); err != nil {
		return err
	}
	_, err := c.DetachBuffer()
	return err
}

func TestOrderSameTag(t *testing.T) {
	const n = 200
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error { return sendStamped(c, 1, n, func(int) int { return 4 }) },
				func(c *mpi.Comm) error {
					buf := make([]byte, maxStamped)
					for seq := range n {
						st, err := mpi.Recv(c, buf, 0, 4)
						if err != nil {
							return err
						}
						if err := checkStamped(buf, st, 0, seq, 4); err != nil {
							return err
						}
					}
					return nil
				}), cfg.opts...)
		})
	}
}

func TestOrderAnyTag(t *testing.T) {
	const n = 200
	tagOf := func(seq int) int { return seq % 7 }
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error { return sendStamped(c, 1, n, tagOf) },
				func(c *mpi.Comm) error {
					buf := make([]byte, maxStamped)
					for seq := range n {
						st, err := mpi.Recv(c, buf, 0, mpi.AnyTag)
						if err != nil {
							return err
						}
						if err := checkStamped(buf, st, 0, seq, tagOf(seq)); err != nil {
							return err
						}
					}
					return nil
				}), cfg.opts...)
		})
	}
}

func TestOrderAnySource(t *testing.T) {
	const senders, n = 4, 100
	tagOf := func(seq int) int { return seq % 3 }
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			mustRun(t, senders+1, func(c *mpi.Comm) error {
				if c.Rank() != 0 {
					return sendStamped(c, 0, n, tagOf)
				}
				buf := make([]byte, maxStamped)
				next := make([]int, senders+1) // next seq expected from each sender
				for range senders * n {
					st, err := mpi.Recv(c, buf, mpi.AnySource, mpi.AnyTag)
					if err != nil {
						return err
					}
					if st.Source < 1 || st.Source > senders {
						return fmt.Errorf("message from rank %d", st.Source)
					}
					if err := checkStamped(buf, st, st.Source, next[st.Source], tagOf(next[st.Source])); err != nil {
						return err
					}
					next[st.Source]++
				}
				return nil
			}, cfg.opts...)
		})
	}
}

// TestOrderPostedAndUnexpected receives the first half of a stream through receives
// posted before the sends, with and without wildcards, and the second half through
// receives posted after all the messages were queued.
func TestOrderPostedAndUnexpected(t *testing.T) {
	const k = 40
	pat := func(i int) (src, tag int) {
		src, tag = 0, 2
		if i%2 == 1 {
			src = mpi.AnySource
		}
		if i%3 == 0 {
			tag = mpi.AnyTag
		}
		return src, tag
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			posted, sent := newGate(), newGate()
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if err := posted.wait(); err != nil {
						return err
					}
					reqs := make([]*mpi.Request, 2*k)
					for seq := range reqs {
						var err error
						if reqs[seq], err = mpi.Isend(c, stamped(0, seq), 1, 2); err != nil {
							return err
						}
					}
					sent.open()
					_, err := mpi.Waitall(reqs...)
					return err
				},
				func(c *mpi.Comm) error {
					bufs := make([][]byte, 2*k)
					reqs := make([]*mpi.Request, k)
					for i := range reqs {
						bufs[i] = make([]byte, maxStamped)
						src, tag := pat(i)
						var err error
						if reqs[i], err = mpi.Irecv(c, bufs[i], src, tag); err != nil {
							return err
						}
					}
					posted.open()
					sts, err := mpi.Waitall(reqs...)
					if err != nil {
						return err
					}
					for i, st := range sts {
						if err := checkStamped(bufs[i], st, 0, i, 2); err != nil {
							return fmt.Errorf("posted receive %d: %v", i, err)
						}
					}
					if err := sent.wait(); err != nil {
						return err
					}
					for i := k; i < 2*k; i++ {
						bufs[i] = make([]byte, maxStamped)
						src, tag := pat(i)
						st, err := mpi.Recv(c, bufs[i], src, tag)
						if err != nil {
							return err
						}
						if err := checkStamped(bufs[i], st, 0, i, 2); err != nil {
							return fmt.Errorf("receive %d, posted after the sends: %v", i, err)
						}
					}
					return nil
				}), cfg.opts...)
		})
	}
}

func TestCommIsolation(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			onDup, onWorld, wildPosted := newGate(), newGate(), newGate()
			mustRun(t, 2, func(c *mpi.Comm) error {
				dup, err := c.Dup()
				if err != nil {
					return err
				}
				if cmp, err := mpi.Compare(c, dup); cmp != mpi.Congruent || err != nil {
					return fmt.Errorf("Compare(world, dup) = %v, %v; want Congruent", cmp, err)
				}
				if cmp, err := mpi.Compare(dup, dup); cmp != mpi.Ident || err != nil {
					return fmt.Errorf("Compare(dup, dup) = %v, %v; want Ident", cmp, err)
				}
				if c.Rank() == 0 {
					// Same source, same tag, on two communicators: dup first.
					r, err := mpi.Isend(dup, []int{1}, 1, 7)
					if err != nil {
						return err
					}
					onDup.open()
					if err := wildPosted.wait(); err != nil {
						return err
					}
					if err := mpi.Send(c, []int{2}, 1, 7); err != nil {
						return err
					}
					onWorld.open()
					_, err = r.Wait()
					return err
				}
				if err := onDup.wait(); err != nil {
					return err
				}
				if _, ok, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); ok || err != nil {
					return fmt.Errorf("Iprobe on the world sees the message sent on the dup (ok %v, err %v)", ok, err)
				}
				if st, ok, err := mpi.Iprobe(dup, 0, 7); !ok || err != nil || st.Source != 0 || st.Tag != 7 {
					return fmt.Errorf("Iprobe on the dup: ok %v, err %v, status %+v; want the message from 0 with tag 7", ok, err, st)
				}
				// A wildcard receive on the world must not take the queued dup message.
				buf := []int{0}
				r, err := mpi.Irecv(c, buf, mpi.AnySource, mpi.AnyTag)
				if err != nil {
					return err
				}
				wildPosted.open()
				if _, err := r.Wait(); err != nil || buf[0] != 2 {
					return fmt.Errorf("world receive got %v (err %v), want the world message [2]", buf, err)
				}
				if err := onWorld.wait(); err != nil {
					return err
				}
				if _, err := mpi.Recv(dup, buf, 0, 7); err != nil || buf[0] != 1 {
					return fmt.Errorf("dup receive got %v (err %v), want the dup message [1]", buf, err)
				}
				return nil
			}, cfg.opts...)
		})
	}
}

// TestMatchingOrder posts receives, then sends messages one after another, and checks
// which receive each message went to: the earliest posted receive that matches.
func TestMatchingOrder(t *testing.T) {
	type recv struct{ src, tag int }
	type send struct{ from, tag, val int }
	const any, anyTag = mpi.AnySource, mpi.AnyTag
	tests := []struct {
		name  string
		recvs []recv
		sends []send
		want  []int // the value each receive gets
	}{
		{"AnySource before exact", []recv{{any, 5}, {1, 5}}, []send{{1, 5, 10}, {1, 5, 11}}, []int{10, 11}},
		{"AnyTag before exact", []recv{{1, anyTag}, {1, 5}}, []send{{1, 5, 10}, {1, 5, 11}}, []int{10, 11}},
		{"both wildcards before exact", []recv{{any, anyTag}, {1, 5}}, []send{{1, 5, 10}, {1, 5, 11}}, []int{10, 11}},
		{"exact before wildcard", []recv{{1, 5}, {any, anyTag}}, []send{{1, 5, 10}, {1, 5, 11}}, []int{10, 11}},
		{"other source skips exact", []recv{{1, 5}, {any, 5}}, []send{{2, 5, 20}, {1, 5, 10}}, []int{10, 20}},
		{"interleaved", []recv{{any, 5}, {1, 5}, {any, 5}}, []send{{1, 5, 10}, {1, 5, 11}, {2, 5, 20}}, []int{10, 11, 20}},
		{"tags select", []recv{{2, 5}, {any, 6}, {1, 5}}, []send{{1, 5, 10}, {2, 5, 20}, {1, 6, 11}}, []int{20, 11, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make([]gate, len(tt.sends)+1) // done[i+1] opens when send i has returned
			for i := range done {
				done[i] = newGate()
			}
			mustRun(t, 3, func(c *mpi.Comm) error {
				if c.Rank() != 0 {
					for i, s := range tt.sends {
						if s.from != c.Rank() {
							continue
						}
						if err := done[i].wait(); err != nil {
							return err
						}
						if err := mpi.Send(c, []int{s.val}, 0, s.tag); err != nil {
							return err
						}
						done[i+1].open()
					}
					return nil
				}
				bufs := make([][]int, len(tt.recvs))
				reqs := make([]*mpi.Request, len(tt.recvs))
				for i, r := range tt.recvs {
					bufs[i] = []int{-1}
					var err error
					if reqs[i], err = mpi.Irecv(c, bufs[i], r.src, r.tag); err != nil {
						return err
					}
				}
				done[0].open()
				if _, err := mpi.Waitall(reqs...); err != nil {
					return err
				}
				for i := range bufs {
					if bufs[i][0] != tt.want[i] {
						return fmt.Errorf("receive %d (source %d, tag %d) got %d, want %d", i, tt.recvs[i].src, tt.recvs[i].tag, bufs[i][0], tt.want[i])
					}
				}
				return nil
			})
		})
	}
}

// ---- send modes ----

type sendFunc func(c *mpi.Comm, buf []byte, dest, tag int) error

// waited turns a nonblocking send into a blocking one.
func waited(start func(*mpi.Comm, []byte, int, int) (*mpi.Request, error)) sendFunc {
	return func(c *mpi.Comm, buf []byte, dest, tag int) error {
		r, err := start(c, buf, dest, tag)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}
}

var sendModes = []struct {
	name     string
	send     sendFunc
	buffered bool // needs an attached buffer
	sync     bool // completes only once matched
}{
	{"Send", mpi.Send[byte], false, false},
	{"Bsend", mpi.Bsend[byte], true, false},
	{"Ssend", mpi.Ssend[byte], false, true},
	{"Rsend", mpi.Rsend[byte], false, false},
	{"Isend", waited(mpi.Isend[byte]), false, false},
	{"Ibsend", waited(mpi.Ibsend[byte]), true, false},
	{"Issend", waited(mpi.Issend[byte]), false, true},
	{"Irsend", waited(mpi.Irsend[byte]), false, false},
}

// checkCompletion sends size bytes from rank 0 to rank 1 with send and checks the data
// and when send returned: before the receive was posted (blocks false), or only
// after it (blocks true). buffered attaches a Bsend buffer first.
func checkCompletion(t *testing.T, send sendFunc, buffered bool, size int, blocks bool, opts ...mpi.Option) {
	t.Helper()
	msg := pattern(size, 5)
	returned := newGate()
	var posted atomic.Bool
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if buffered {
				if err := c.AttachBuffer(make([]byte, size+mpi.BsendOverhead)); err != nil {
					return err
				}
			}
			if err := send(c, msg, 1, 0); err != nil {
				return err
			}
			early := !posted.Load()
			returned.open()
			if blocks && early {
				return errors.New("the send returned before its receive was posted")
			}
			return nil
		},
		func(c *mpi.Comm) error {
			if blocks {
				time.Sleep(30 * time.Millisecond)
			} else if err := returned.waitFor(3 * time.Second); err != nil {
				posted.Store(true)
				mpi.Recv(c, make([]byte, size), 0, 0)
				return fmt.Errorf("the send did not return before its receive was posted: %v", err)
			}
			posted.Store(true)
			buf := make([]byte, size)
			st, err := mpi.Recv(c, buf, 0, 0)
			if err != nil {
				return err
			}
			if err := wantStatus(st, 0, 0, size); err != nil {
				return err
			}
			if !bytes.Equal(buf, msg) {
				return errors.New("received data differs from what was sent")
			}
			return nil
		}), opts...)
}

func TestSendModes(t *testing.T) {
	for _, m := range sendModes {
		for _, size := range []int{0, 100, mpi.DefaultEagerLimit + 1, 1 << 20} {
			blocks := m.sync || (!m.buffered && size > mpi.DefaultEagerLimit)
			t.Run(fmt.Sprintf("%s/%dB", m.name, size), func(t *testing.T) {
				checkCompletion(t, m.send, m.buffered, size, blocks)
			})
		}
	}
}

func TestStandardSendConfig(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		opts   []mpi.Option
		blocks bool
	}{
		{"eager limit 0, small", 8, []mpi.Option{mpi.WithEagerLimit(0)}, true},
		{"eager limit 0, empty", 0, []mpi.Option{mpi.WithEagerLimit(0)}, false},
		{"eager limit raised", 1 << 20, []mpi.Option{mpi.WithEagerLimit(2 << 20)}, false},
		{"pool cap 0", 8, []mpi.Option{mpi.WithPoolCap(0)}, true},
		{"within pool cap", 100, []mpi.Option{mpi.WithPoolCap(1000)}, false},
		{"beyond pool cap", 2000, []mpi.Option{mpi.WithPoolCap(1000)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCompletion(t, mpi.Send[byte], false, tt.size, tt.blocks, tt.opts...)
		})
	}
	t.Run("pool cap bounds queued copies", func(t *testing.T) {
		// 50 sends of 100 bytes cannot all be held by a 1000-byte pool.
		const n = 50
		var posted atomic.Bool
		mustRun(t, 2, rankFuncs(
			func(c *mpi.Comm) error {
				for i := range n {
					if err := mpi.Send(c, pattern(100, byte(i)), 1, 0); err != nil {
						return err
					}
				}
				if !posted.Load() {
					return errors.New("all sends returned before any receive: the pool held more than its cap")
				}
				return nil
			},
			func(c *mpi.Comm) error {
				time.Sleep(30 * time.Millisecond)
				posted.Store(true)
				buf := make([]byte, 100)
				for i := range n {
					if _, err := mpi.Recv(c, buf, 0, 0); err != nil {
						return err
					}
					if !bytes.Equal(buf, pattern(100, byte(i))) {
						return fmt.Errorf("message %d differs", i)
					}
				}
				return nil
			}), mpi.WithPoolCap(1000))
	})
}

func TestBsendErrors(t *testing.T) {
	mustRun(t, 2, func(c *mpi.Comm) error {
		if c.Rank() == 1 {
			return nil
		}
		wantBufErr := func(what string, err error, peer, tag int) error {
			e, cerr := wantClass(err, mpi.ErrBuffer)
			if cerr != nil {
				return fmt.Errorf("%s: %v", what, cerr)
			}
			if e.Rank != 0 || e.Peer != peer || e.Tag != tag {
				return fmt.Errorf("%s: error {rank %d, peer %d, tag %d}, want {0, %d, %d}", what, e.Rank, e.Peer, e.Tag, peer, tag)
			}
			return nil
		}
		msg := make([]byte, 100)
		if err := wantBufErr("Bsend without a buffer", mpi.Bsend(c, msg, 1, 4), 1, 4); err != nil {
			return err
		}
		if err := wantBufErr("Ibsend without a buffer", reqErr(mpi.Ibsend(c, msg, 1, 5)), 1, 5); err != nil {
			return err
		}
		if err := wantBufErr("DetachBuffer without a buffer", errOf(c.DetachBuffer()), mpi.NoValue, mpi.NoValue); err != nil {
			return err
		}
		small := make([]byte, len(msg)+mpi.BsendOverhead-1)
		if err := c.AttachBuffer(small); err != nil {
			return err
		}
		if err := wantBufErr("second AttachBuffer", c.AttachBuffer(make([]byte, 1000)), mpi.NoValue, mpi.NoValue); err != nil {
			return err
		}
		err := mpi.Bsend(c, msg, 1, 6)
		if err := wantBufErr("Bsend into a buffer one byte too small", err, 1, 6); err != nil {
			return err
		}
		if !strings.Contains(err.Error(), "100-byte message") {
			return fmt.Errorf("error %q does not give the message size", err)
		}
		if b, err := c.DetachBuffer(); err != nil || unsafe.SliceData(b) != unsafe.SliceData(small) || len(b) != len(small) {
			return fmt.Errorf("DetachBuffer with nothing buffered: %d bytes, %v; want the attached buffer back", len(b), err)
		}
		return nil
	})
}

func TestBsendBufferSpace(t *testing.T) {
	const size = 100
	filled, received := newGate(), newGate()
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if err := c.AttachBuffer(make([]byte, 2*(size+mpi.BsendOverhead))); err != nil {
				return err
			}
			msg := pattern(size, 1)
			for i := range 2 {
				if err := mpi.Bsend(c, msg, 1, i); err != nil {
					return fmt.Errorf("Bsend %d of 2 that fit: %v", i, err)
				}
			}
			// The copies are made at once: changing msg now changes nothing.
			copy(msg, pattern(size, 2))
			if err := mpi.Bsend(c, msg, 1, 2); !errors.Is(err, mpi.ErrBuffer) {
				return fmt.Errorf("third Bsend into a full buffer: %v, want ErrBuffer", err)
			}
			filled.open()
			if err := received.wait(); err != nil {
				return err
			}
			// The receiver took message 0: its room is free again.
			if err := mpi.Bsend(c, msg, 1, 2); err != nil {
				return fmt.Errorf("Bsend after a buffered message was received: %v", err)
			}
			_, err := c.DetachBuffer()
			return err
		},
		func(c *mpi.Comm) error {
			if err := filled.wait(); err != nil {
				return err
			}
			buf := make([]byte, size)
			for tag, seed := range []byte{1, 1, 2} {
				if _, err := mpi.Recv(c, buf, 0, tag); err != nil {
					return err
				}
				if !bytes.Equal(buf, pattern(size, seed)) {
					return fmt.Errorf("message %d differs from what Bsend was given", tag)
				}
				if tag == 0 {
					received.open()
				}
			}
			return nil
		}))
}

func TestDetachBufferWaits(t *testing.T) {
	for _, size := range []int{10, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var received atomic.Bool
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					buf := make([]byte, 2*(size+mpi.BsendOverhead))
					if err := c.AttachBuffer(buf); err != nil {
						return err
					}
					for tag := range 2 {
						if err := mpi.Bsend(c, pattern(size, byte(tag)), 1, tag); err != nil {
							return err
						}
					}
					got, err := c.DetachBuffer()
					if err != nil {
						return err
					}
					if !received.Load() {
						return errors.New("DetachBuffer returned before the buffered messages were received")
					}
					if unsafe.SliceData(got) != unsafe.SliceData(buf) || len(got) != len(buf) {
						return errors.New("DetachBuffer did not return the attached buffer")
					}
					if err := mpi.Bsend(c, []byte{1}, 1, 0); !errors.Is(err, mpi.ErrBuffer) {
						return fmt.Errorf("Bsend after DetachBuffer: %v, want ErrBuffer", err)
					}
					return nil
				},
				func(c *mpi.Comm) error {
					time.Sleep(30 * time.Millisecond)
					buf := make([]byte, size)
					for tag := range 2 {
						if tag == 1 {
							received.Store(true)
						}
						if _, err := mpi.Recv(c, buf, 0, tag); err != nil {
							return err
						}
						if !bytes.Equal(buf, pattern(size, byte(tag))) {
							return fmt.Errorf("message %d differs", tag)
						}
					}
					return nil
				}))
		})
	}
}

// ---- probes ----

func TestProbe(t *testing.T) {
	for _, n := range []int{13, 5 * mpi.DefaultEagerLimit} { // int32s: eager and rendezvous
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			probed, sent := newGate(), newGate()
			msg := make([]int32, n)
			for i := range msg {
				msg[i] = int32(i) * 3
			}
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if err := probed.wait(); err != nil {
						return err
					}
					r, err := mpi.Isend(c, msg, 1, 3)
					if err != nil {
						return err
					}
					sent.open()
					_, err = r.Wait()
					return err
				},
				func(c *mpi.Comm) error {
					if _, ok, err := mpi.Iprobe(c, 0, 3); ok || err != nil {
						return fmt.Errorf("Iprobe before the send: ok %v, err %v", ok, err)
					}
					probed.open()
					if err := sent.wait(); err != nil {
						return err
					}
					check := func(what string, st mpi.Status) error {
						if st.Source != 0 || st.Tag != 3 || mpi.GetCount[int32](st) != n || mpi.GetCount[byte](st) != 4*n {
							return fmt.Errorf("%s: status {source %d, tag %d, count %d}, want {0, 3, %d}", what, st.Source, st.Tag, mpi.GetCount[int32](st), n)
						}
						return nil
					}
					st, err := mpi.Probe(c, mpi.AnySource, mpi.AnyTag)
					if err != nil {
						return err
					}
					if err := check("Probe", st); err != nil {
						return err
					}
					if n%2 == 1 && mpi.GetCount[int64](st) != mpi.Undefined {
						return fmt.Errorf("GetCount[int64] of %d bytes is %d, want Undefined", 4*n, mpi.GetCount[int64](st))
					}
					st, ok, err := mpi.Iprobe(c, 0, 3)
					if !ok || err != nil {
						return fmt.Errorf("Iprobe after Probe: ok %v, err %v; Probe must not consume the message", ok, err)
					}
					if err := check("Iprobe", st); err != nil {
						return err
					}
					buf := make([]int32, n)
					if st, err = mpi.Recv(c, buf, 0, 3); err != nil {
						return err
					}
					if err := check("Recv", st); err != nil {
						return err
					}
					if !slicesEqual(buf, msg) {
						return errors.New("received data differs")
					}
					if _, ok, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); ok || err != nil {
						return fmt.Errorf("Iprobe after Recv: ok %v, err %v; want nothing", ok, err)
					}
					return nil
				}))
		})
	}
}

func TestProbeWaits(t *testing.T) {
	var sent atomic.Bool
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error {
			if err := mpi.Send(c, []byte{1}, 1, 1); err != nil {
				return err
			}
			time.Sleep(30 * time.Millisecond)
			sent.Store(true)
			return mpi.Send(c, []byte{2, 2}, 1, 2)
		},
		func(c *mpi.Comm) error {
			st, err := mpi.Probe(c, 0, 2) // the tag-1 message does not match
			if err != nil {
				return err
			}
			if !sent.Load() {
				return errors.New("Probe returned before a matching message was sent")
			}
			if err := wantStatus(st, 0, 2, 2); err != nil {
				return err
			}
			// The earliest message wins for a wildcard probe.
			if st, err = mpi.Probe(c, 0, mpi.AnyTag); err != nil {
				return err
			}
			if err := wantStatus(st, 0, 1, 1); err != nil {
				return fmt.Errorf("Probe(AnyTag) after two messages: %v", err)
			}
			buf := make([]byte, 2)
			for tag := 1; tag <= 2; tag++ {
				if _, err := mpi.Recv(c, buf, 0, tag); err != nil {
					return err
				}
			}
			return nil
		}))
}

func TestMprobe(t *testing.T) {
	for _, n := range []int{3, mpi.DefaultEagerLimit + 1} {
		for _, blocking := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/blocking=%v", n, blocking), func(t *testing.T) {
				first, second := pattern(n, 1), pattern(n, 2)
				probed, sent, taken := newGate(), newGate(), newGate()
				mustRun(t, 2, rankFuncs(
					func(c *mpi.Comm) error {
						if err := probed.wait(); err != nil {
							return err
						}
						r, err := mpi.Isend(c, first, 1, 5)
						if err != nil {
							return err
						}
						sent.open()
						if err := taken.wait(); err != nil {
							return err
						}
						if err := mpi.Send(c, second, 1, 5); err != nil {
							return err
						}
						_, err = r.Wait()
						return err
					},
					func(c *mpi.Comm) error {
						if msg, _, ok, err := mpi.Improbe(c, 0, 5); ok || msg != nil || err != nil {
							return fmt.Errorf("Improbe before the send: %v, %v, %v", msg, ok, err)
						}
						probed.open()
						if err := sent.wait(); err != nil {
							return err
						}
						var msg *mpi.Message
						var st mpi.Status
						var err error
						if blocking {
							msg, st, err = mpi.Mprobe(c, mpi.AnySource, 5)
						} else {
							var ok bool
							if msg, st, ok, err = mpi.Improbe(c, 0, mpi.AnyTag); !ok && err == nil {
								err = errors.New("Improbe found no message")
							}
						}
						if err != nil {
							return err
						}
						if err := wantStatus(st, 0, 5, n); err != nil {
							return err
						}
						if _, ok, _ := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); ok {
							return errors.New("Iprobe still sees the message Mprobe took")
						}
						taken.open()
						// A Recv now gets the second message: the first is reserved for Mrecv.
						buf := make([]byte, n)
						if _, err := mpi.Recv(c, buf, 0, 5); err != nil {
							return err
						}
						if !bytes.Equal(buf, second) {
							return errors.New("Recv got the message that Mprobe had taken")
						}
						if st, err = mpi.Mrecv(msg, buf); err != nil {
							return err
						}
						if err := wantStatus(st, 0, 5, n); err != nil {
							return fmt.Errorf("Mrecv: %v", err)
						}
						if !bytes.Equal(buf, first) {
							return errors.New("Mrecv did not get the probed message")
						}
						if _, err := mpi.Mrecv(msg, buf); !errors.Is(err, mpi.ErrRequest) {
							return fmt.Errorf("second Mrecv of a message: %v, want ErrRequest", err)
						}
						return nil
					}))
			})
		}
	}
}

func TestMrecvTruncate(t *testing.T) {
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error { return mpi.Send(c, []int16{1, 2, 3}, 1, 0) },
		func(c *mpi.Comm) error {
			msg, _, err := mpi.Mprobe(c, 0, 0)
			if err != nil {
				return err
			}
			_, err = mpi.Mrecv(msg, make([]int16, 2))
			if e, cerr := wantClass(err, mpi.ErrTruncate); cerr != nil || e.Rank != 1 || e.Peer != 0 || e.Tag != 0 {
				return fmt.Errorf("Mrecv of 6 bytes into 4: %v, want ErrTruncate naming rank 1, peer 0, tag 0", err)
			}
			if _, err := mpi.Mrecv(nil, []byte{}); !errors.Is(err, mpi.ErrRequest) {
				return fmt.Errorf("Mrecv(nil): %v, want ErrRequest", err)
			}
			return nil
		}))
}

// ---- Sendrecv, ProcNull, self ----

func TestSendrecvRing(t *testing.T) {
	const n = 7
	for _, cfg := range configs {
		for _, length := range []int{3, 40000} { // eager and rendezvous
			t.Run(fmt.Sprintf("%s/%d", cfg.name, length), func(t *testing.T) {
				mustRun(t, n, func(c *mpi.Comm) error {
					rank := c.Rank()
					right, left := (rank+1)%n, (rank+n-1)%n
					fill := func(from int) []int32 {
						s := make([]int32, length)
						for i := range s {
							s[i] = int32(from*1000 + i)
						}
						return s
					}
					got := make([]int32, length)
					st, err := mpi.Sendrecv(c, fill(rank), right, rank, got, left, left)
					if err != nil {
						return err
					}
					if st.Source != left || st.Tag != left || mpi.GetCount[int32](st) != length || !slicesEqual(got, fill(left)) {
						return fmt.Errorf("Sendrecv: status {source %d, tag %d, count %d}, want {%d, %d, %d}, or wrong data",
							st.Source, st.Tag, mpi.GetCount[int32](st), left, left, length)
					}
					// Different send and receive types: int32 out, float32 in.
					f := make([]float32, 1)
					if _, err := mpi.Sendrecv(c, []int32{int32(math.Float32bits(float32(rank) + 0.5))}, left, 0, f, right, 0); err != nil {
						return err
					}
					if f[0] != float32(right)+0.5 {
						return fmt.Errorf("Sendrecv with two types got %v, want %v", f[0], float32(right)+0.5)
					}
					buf := fill(rank)
					if st, err = mpi.SendrecvReplace(c, buf, right, 1, left, 1); err != nil {
						return err
					}
					if st.Source != left || st.Tag != 1 || !slicesEqual(buf, fill(left)) {
						return fmt.Errorf("SendrecvReplace: got source %d, tag %d; want %d, 1, or wrong data", st.Source, st.Tag, left)
					}
					return nil
				}, cfg.opts...)
			})
		}
	}
}

func TestProcNull(t *testing.T) {
	isNull := func(what string, st mpi.Status, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		if st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || mpi.GetCount[int](st) != 0 || st.Cancelled {
			return fmt.Errorf("%s: status %+v (count %d), want source ProcNull, tag AnyTag, count 0", what, st, mpi.GetCount[int](st))
		}
		return nil
	}
	mustRun(t, 2, func(c *mpi.Comm) error {
		buf := []int{7, 7}
		untouched := func(what string) error {
			if buf[0] != 7 || buf[1] != 7 {
				return fmt.Errorf("%s from ProcNull wrote into the buffer: %v", what, buf)
			}
			return nil
		}
		for _, send := range sendModes {
			if err := send.send(c, []byte{1}, mpi.ProcNull, 1); err != nil {
				return fmt.Errorf("%s to ProcNull: %v", send.name, err)
			}
		}
		st, err := mpi.Recv(c, buf, mpi.ProcNull, 3)
		if err := isNull("Recv", st, err); err != nil {
			return err
		}
		if err := untouched("Recv"); err != nil {
			return err
		}
		r, err := mpi.Irecv(c, buf, mpi.ProcNull, mpi.AnyTag)
		if err != nil {
			return err
		}
		st, err = r.Wait()
		if err := isNull("Irecv", st, err); err != nil {
			return err
		}
		st, err = mpi.Sendrecv(c, []int{1}, mpi.ProcNull, 0, buf, mpi.ProcNull, 0)
		if err := isNull("Sendrecv", st, err); err != nil {
			return err
		}
		st, err = mpi.SendrecvReplace(c, buf, mpi.ProcNull, 0, mpi.ProcNull, 0)
		if err := isNull("SendrecvReplace", st, err); err != nil {
			return err
		}
		st, err = mpi.Probe(c, mpi.ProcNull, 0)
		if err := isNull("Probe", st, err); err != nil {
			return err
		}
		st, ok, err := mpi.Iprobe(c, mpi.ProcNull, 0)
		if err := isNull("Iprobe", st, err); err != nil || !ok {
			return fmt.Errorf("Iprobe(ProcNull): ok %v, %v; want ok", ok, err)
		}
		msg, st, err := mpi.Mprobe(c, mpi.ProcNull, 0)
		if err := isNull("Mprobe", st, err); err != nil {
			return err
		}
		st, err = mpi.Mrecv(msg, buf)
		if err := isNull("Mrecv", st, err); err != nil {
			return err
		}
		if err := untouched("receives"); err != nil {
			return err
		}
		// Sendrecv with a real peer on one side only.
		peer := 1 - c.Rank()
		if c.Rank() == 0 {
			_, err = mpi.Sendrecv(c, []int{42}, peer, 0, buf, mpi.ProcNull, 0)
			return err
		}
		st, err = mpi.Sendrecv(c, []int{0}, mpi.ProcNull, 0, buf, peer, 0)
		if err != nil || buf[0] != 42 || st.Source != 0 {
			return fmt.Errorf("Sendrecv from a real peer, to ProcNull: buf %v, source %d, err %v", buf, st.Source, err)
		}
		return nil
	})
}

func TestSelfMessages(t *testing.T) {
	for _, n := range []int{8, 1 << 20} {
		mustRun(t, 1, func(c *mpi.Comm) error {
			msg := pattern(n, 9)
			buf := make([]byte, n)
			// Isend to oneself, then receive: the rendezvous completes at the Recv.
			r, err := mpi.Isend(c, msg, 0, 1)
			if err != nil {
				return err
			}
			if st, err := mpi.Recv(c, buf, 0, 1); err != nil || wantStatus(st, 0, 1, n) != nil || !bytes.Equal(buf, msg) {
				return fmt.Errorf("%d bytes to self: %v", n, err)
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			clear(buf)
			if st, err := mpi.Sendrecv(c, msg, 0, 2, buf, 0, 2); err != nil || wantStatus(st, 0, 2, n) != nil || !bytes.Equal(buf, msg) {
				return fmt.Errorf("%d bytes Sendrecv to self: %v", n, err)
			}
			return nil
		})
	}
}

func TestMaxTag(t *testing.T) {
	mustRun(t, 2, rankFuncs(
		func(c *mpi.Comm) error { return mpi.Send(c, []int{5}, 1, mpi.TagUB) },
		func(c *mpi.Comm) error {
			buf := []int{0}
			st, err := mpi.Recv(c, buf, 0, mpi.TagUB)
			if err != nil || st.Tag != mpi.TagUB || buf[0] != 5 {
				return fmt.Errorf("receive with tag TagUB: %v, tag %d, %v", buf, st.Tag, err)
			}
			return nil
		}))
}
