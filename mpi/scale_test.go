package mpi_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// TestRing100k runs 100,000 ranks (about 0.3 s, 2 s under -race on 2 cores), each
// exchanging its rank with its neighbours.
func TestRing100k(t *testing.T) {
	const n = 100_000
	start := time.Now()
	mustRun(t, n, func(c *mpi.Comm) error {
		rank := c.Rank()
		right, left := (rank+1)%n, (rank+n-1)%n
		got := []int{-1}
		st, err := mpi.Sendrecv(c, []int{rank}, right, 0, got, left, 0)
		if err != nil {
			return err
		}
		if got[0] != left || st.Source != left || st.Tag != 0 || mpi.GetCount[int](st) != 1 {
			return fmt.Errorf("got %d from %d, want %d from %d", got[0], st.Source, left, left)
		}
		return nil
	})
	t.Logf("%d ranks in %v", n, time.Since(start))
}

// TestManyQueuedMessages has 10,000 messages of other tags wait in the unexpected
// queue while a rank receives a specific one, and 10,000 receives of other tags wait
// in the posted queue while a specific one is matched.
func TestManyQueuedMessages(t *testing.T) {
	const n = 10_000
	for _, cfg := range configs[:3] {
		t.Run("unexpected/"+cfg.name, func(t *testing.T) {
			sent := newGate()
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					reqs := make([]*mpi.Request, 0, n+1)
					for i := 1; i <= n+1; i++ {
						tag := i % (n + 1) // 1..n, then 0: the one wanted, last
						r, err := mpi.Isend(c, []int{tag}, 1, tag)
						if err != nil {
							return err
						}
						reqs = append(reqs, r)
					}
					sent.open()
					_, err := mpi.Waitall(reqs...)
					return err
				},
				func(c *mpi.Comm) error {
					if err := sent.wait(); err != nil {
						return err
					}
					buf := []int{-1}
					recv := func(src, tag, want int) error {
						st, err := mpi.Recv(c, buf, src, tag)
						if err != nil {
							return err
						}
						if buf[0] != want || st.Tag != want {
							return fmt.Errorf("Recv(source %d, tag %d) got message %d with tag %d, want %d", src, tag, buf[0], st.Tag, want)
						}
						return nil
					}
					if err := recv(0, 0, 0); err != nil {
						return err
					}
					if err := recv(mpi.AnySource, n/2, n/2); err != nil {
						return err
					}
					if st, ok, err := mpi.Iprobe(c, mpi.AnySource, mpi.AnyTag); !ok || err != nil || st.Tag != 1 {
						return fmt.Errorf("Iprobe(AnySource, AnyTag): tag %d, ok %v, %v; want the earliest, tag 1", st.Tag, ok, err)
					}
					for tag := 1; tag <= n; tag++ {
						if tag == n/2 {
							continue
						}
						if err := recv(0, mpi.AnyTag, tag); err != nil {
							return err
						}
					}
					return nil
				}), cfg.opts...)
		})
		t.Run("posted/"+cfg.name, func(t *testing.T) {
			posted := newGate()
			mustRun(t, 2, rankFuncs(
				func(c *mpi.Comm) error {
					if err := posted.wait(); err != nil {
						return err
					}
					for tag := 0; tag <= n; tag++ { // the one wanted, first
						if err := mpi.Send(c, []int{tag}, 1, tag); err != nil {
							return err
						}
					}
					return nil
				},
				func(c *mpi.Comm) error {
					reqs := make([]*mpi.Request, n+1)
					bufs := make([]int, n+1)
					for tag := n; tag >= 1; tag-- { // posted in reverse order of the sends
						var err error
						if reqs[tag], err = mpi.Irecv(c, bufs[tag:tag+1], 0, tag); err != nil {
							return err
						}
					}
					posted.open()
					if _, err := mpi.Recv(c, bufs[0:1], 0, 0); err != nil {
						return err
					}
					if _, err := mpi.Waitall(reqs[1:]...); err != nil {
						return err
					}
					for tag, v := range bufs {
						if v != tag {
							return fmt.Errorf("the receive of tag %d got message %d", tag, v)
						}
					}
					return nil
				}), cfg.opts...)
		})
	}
}

// TestEagerSendsManyRanks has each of many ranks send a small message to its right
// neighbour before anyone receives. The messages hold n × (8 + 64) bytes, well below
// the pool cap, so every Send must return at once: a standard send up to the eager
// limit is copied into the pool "so that the sender returns at once", and only "past
// [the pool cap] a standard send waits for its receiver".
func TestEagerSendsManyRanks(t *testing.T) {
	tests := []struct {
		n    int
		opts []mpi.Option
	}{
		{2000, nil}, // 528 KB held, 64 MiB cap
		{400, []mpi.Option{mpi.WithPoolCap(128 << 10)}}, // 106 KB held, 128 KiB cap
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			n := tt.n
			var returned atomic.Int64
			allSent := newGate()
			err := run(t, n, func(c *mpi.Comm) error {
				rank := c.Rank()
				if err := mpi.Send(c, []int{rank}, (rank+1)%n, 0); err != nil {
					return err
				}
				if returned.Add(1) == int64(n) {
					allSent.open()
				}
				if err := allSent.waitFor(3 * time.Second); err != nil {
					return fmt.Errorf("only %d of %d small standard sends returned before any receive was posted", returned.Load(), n)
				}
				got := []int{-1}
				if _, err := mpi.Recv(c, got, (rank+n-1)%n, 0); err != nil {
					return err
				}
				if got[0] != (rank+n-1)%n {
					return fmt.Errorf("got %d", got[0])
				}
				return nil
			}, tt.opts...)
			if err != nil {
				lines := strings.Split(err.Error(), "\n")
				t.Fatalf("Run: %d ranks failed, the first:\n%s", len(lines), strings.Join(lines[:min(3, len(lines))], "\n"))
			}
		})
	}
}
