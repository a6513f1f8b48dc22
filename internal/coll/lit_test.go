package coll

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
)

// misfit is a call of rank 2 that differs from the root's: its buffer's length,
// element size and root, and the class of the fault it gets.
type misfit struct {
	len, elem, root int
	class           errs.Class
}

// inSlot is a collective whose root leaves a small buffer in the ring slot.
type inSlot struct {
	name   string
	lead   func(c *Comm, i int) error                             // the root's call i
	follow func(c *Comm, r int, buf []byte, elem, root int) error // another rank's
	want   func(r, i int) []byte                                  // what rank r gets from call i
	wrong  map[int]misfit                                         // rank 2's calls that differ
}

// TestInSlot: a root that runs a lap ahead leaves each small Bcast's or Scatter's
// copy in its ring slot and makes no episode; the ranks that come later get every
// call's data in order from there, a rank whose call differs from the root's
// (length, root, element size, another collective) gets the fault's class, and the
// next lap, which rewrites the slots while the others read them, delivers as well.
// Copies of 8-byte messages lie in the slot's line; longer ones in the claim's two
// lines too (a Scatter of 29-byte blocks: block 1 straddles the slot's line and the
// claim's, block 2 lies in the claim's first line; of 50-byte blocks, block 2
// straddles the claim's two lines); copies longer than litBytes in the slot's wide
// area (a Scatter of 3 blocks of 51 bytes, of 341: 1,023 bytes; a Scatter of 3
// blocks longer than litMax/3 does not fit, and is not tested).
func TestInSlot(t *testing.T) {
	for _, m := range []int{8, 29, 40, 50, 51, litBytes, litBytes + 1, litMax / 3, litMax} {
		t.Run(fmt.Sprintf("bytes=%d", m), func(t *testing.T) { testInSlot(t, m) })
	}
}

func testInSlot(t *testing.T, m int) {
	msg := func(r, i int) []byte {
		b := make([]byte, m)
		for j := range b {
			b[j] = byte(i + 3*j + 7*r)
		}
		b[0], b[1] = byte(i), byte(i>>8)
		return b
	}
	common := map[int]misfit{
		3:  {m - 1, 1, 0, errs.Truncate},
		5:  {m, 1, 1, errs.Root},
		6:  {m, 2, 0, errs.Count},
		63: {0, 1, 0, errs.Truncate},
		7:  {m, 1, 2, errs.Root}, // rank 2 calls itself the root
		8:  {class: errs.Arg},    // rank 2 calls Barrier
		9:  {class: errs.Arg},    // rank 2 calls Reduce
	}
	bcastWrong := map[int]misfit{4: {m + 1, 1, 0, errs.Count}}
	for i, w := range common {
		bcastWrong[i] = w
	}
	for _, k := range []inSlot{{
		name:   "Bcast",
		lead:   func(c *Comm, i int) error { return c.Bcast(0, msg(0, i), 1, 0) },
		follow: func(c *Comm, r int, buf []byte, elem, root int) error { return c.Bcast(r, buf, elem, root) },
		want:   func(_, i int) []byte { return msg(0, i) },
		wrong:  bcastWrong,
	}, {
		name: "Scatter",
		lead: func(c *Comm, i int) error {
			send := append(append(msg(0, i), msg(1, i)...), msg(2, i)...)
			return c.Scatter(0, &Part{Send: send, SendBlock: m, Recv: make([]byte, m)}, 1, 0)
		},
		follow: func(c *Comm, r int, buf []byte, elem, root int) error {
			return c.Scatter(r, &Part{Recv: buf}, elem, root)
		},
		want:  msg,
		wrong: common,
	}, {
		name: "Scatterv", // of a Scatter's blocks
		lead: func(c *Comm, i int) error {
			send := append(append(msg(0, i), msg(1, i)...), msg(2, i)...)
			p := Part{Send: send, SendCounts: []int{m, m, m}, SendDispls: []int{0, m, 2 * m}, Recv: make([]byte, m)}
			return c.Scatterv(0, &p, 1, 0)
		},
		follow: func(c *Comm, r int, buf []byte, elem, root int) error {
			return c.Scatterv(r, &Part{Recv: buf}, elem, root)
		},
		want:  msg,
		wrong: common,
	}} {
		if k.name != "Bcast" && 3*m > litMax {
			continue
		}
		for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
			c := New(NewJob(), 3, spin)
			for i := range ringSize {
				if err := k.lead(c, i); err != nil {
					t.Fatalf("%s, spin %v: root's call %d: %v", k.name, spin, i, err)
				}
			}
			for s := range uint64(ringSize) {
				if got := c.ring[s].lit.Load(); got != s+1 || c.ring[s].p.Load() != nil {
					t.Fatalf("%s, spin %v: slot %d holds the copy of episode %d (want %d), and episode %p (want none: nobody came before the root)",
						k.name, spin, s, got-1, s, c.ring[s].p.Load())
				}
			}
			recv := func(r, from, to int) error {
				for i := from; i < to; i++ {
					w, bad := k.wrong[i]
					if r != 2 || !bad {
						w.len, w.elem, w.root = m, 1, 0
					}
					buf := make([]byte, w.len)
					var err error
					switch {
					case r == 2 && i == 8:
						err = c.Barrier(r)
					case r == 2 && i == 9:
						err = c.Reduce(r, []byte{1}, nil, 1, matmul, 0)
					default:
						err = k.follow(c, r, buf, w.elem, w.root)
					}
					if r == 2 && bad {
						if !errors.Is(err, w.class) {
							return fmt.Errorf("rank 2's call %d with %d bytes of %d, root %d: %v, want %v", i, w.len, w.elem, w.root, err, w.class)
						}
						continue
					}
					if want := k.want(r, i); err != nil || string(buf) != string(want) {
						return fmt.Errorf("rank %d's call %d: %v (%v), want %v", r, i, buf, err, want)
					}
				}
				return nil
			}
			for r := 1; r < 3; r++ {
				if err := recv(r, 0, ringSize); err != nil {
					t.Fatalf("%s, spin %v: %v", k.name, spin, err)
				}
			}
			// Another lap with every rank at once: the root rewrites the slots behind the others.
			var wg sync.WaitGroup
			fails := make([]error, 3)
			wg.Go(func() {
				for i := ringSize; i < 3*ringSize; i++ {
					if err := k.lead(c, i); err != nil {
						fails[0] = err
						return
					}
				}
			})
			for r := 1; r < 3; r++ {
				wg.Go(func() { fails[r] = recv(r, ringSize, 3*ringSize) })
			}
			wg.Wait()
			if err := errors.Join(fails...); err != nil {
				t.Fatalf("%s, spin %v: %v", k.name, spin, err)
			}
		}
	}
}

// TestInSlotRace: ranks that come before a small Bcast's or Scatter's root make its
// episode, the root that comes first makes none, and slots keep episodes many laps
// old: every rank still gets every broadcast (of one line, two, or the wide area) and block, in
// order, with Reduces (made by whoever comes first) in between. (A rank that had
// loaded the slot's episode before it waited for the lap once swapped out an
// episode that had meanwhile been reused for its own call: two ranks then waited in
// an episode that the root never saw.)
func TestInSlotRace(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		const n, calls = 4, 200000
		c := New(NewJob(), n, spin)
		var wg sync.WaitGroup
		fails := make([]error, n)
		for r := range n {
			wg.Go(func() {
				buf := make([]byte, 512)
				for i := range calls {
					if i%4999 == 0 {
						var out []byte
						if r == 0 {
							out = make([]byte, 4)
						}
						if err := c.Reduce(r, matrix(r), out, 4, matmul, 0); err != nil || r == 0 && string(out) != string(inOrder(n)) {
							fails[r] = fmt.Errorf("rank %d, call %d: Reduce gave %v (%v)", r, i, out, err)
							return
						}
						continue
					}
					if i%5 == 2 { // every rank gets its own block: the call's number, its rank
						var p Part
						if r == 0 {
							p.Send, p.SendBlock = make([]byte, 2*n), 2
							for j := range n {
								p.Send[2*j], p.Send[2*j+1] = byte(i), byte(j)
							}
						}
						p.Recv = buf[:2]
						if err := c.Scatter(r, &p, 1, 0); err != nil || buf[0] != byte(i) || buf[1] != byte(r) {
							fails[r] = fmt.Errorf("rank %d, call %d: Scatter gave %v (%v)", r, i, buf[:2], err)
							return
						}
						continue
					}
					m := 8 << (3 * (i % 3)) // 8, 64 or 512 bytes: the slot's line, the claim's too, or the wide area
					if r == 0 {
						buf[0], buf[m-1] = byte(i), byte(i>>8)
					}
					if err := c.Bcast(r, buf[:m], 1, 0); err != nil || buf[0] != byte(i) || buf[m-1] != byte(i>>8) {
						fails[r] = fmt.Errorf("rank %d, call %d: Bcast gave %v (%v)", r, i, buf[:m], err)
						return
					}
				}
			})
		}
		awaitRanks(t, &wg, 20*time.Second, fmt.Sprintf("spin %v: the calls", spin))
		if err := errors.Join(fails...); err != nil {
			t.Fatalf("spin %v: %v", spin, err)
		}
	}
}

// TestEpisodesReused: in a long run of small Bcasts and Reduces, episodes made by
// the ranks come back to be made again (reuse): almost no allocation per call.
func TestEpisodesReused(t *testing.T) {
	const n, calls = 3, 20 * ringSize
	c := New(NewJob(), n, 0)
	run := func() {
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				buf, in, out := make([]byte, 8), matrix(r), make([]byte, 4)
				for range calls {
					c.Bcast(r, buf, 1, 1)
					c.Reduce(r, in, out, 4, matmul, 2)
				}
			})
		}
		wg.Wait()
	}
	run() // the episodes of two laps are made
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / (2 * calls); per > 0.25 {
		t.Errorf("%.2f allocations per collective, want almost none (%d in all; a rank that loses the race to make an episode drops the one it took)", per, after.Mallocs-before.Mallocs)
	}
}

// TestScatterEpisodesReused: Scatters and Scatterv of uneven blocks too long for
// the ring slot mix for many laps, through small episodes that come back to be
// made again, of either kind: every rank gets its own block every time (a Scatter
// that found a Scatterv's counts in its reused episode, where a Scatterv's root
// keeps them, would take the wrong one). Ranks that spin would race to make the
// episodes, and the losers drop theirs: more ranks than processors reuse more.
func TestScatterEpisodesReused(t *testing.T) {
	const n, calls = 4, 10 * ringSize
	counts, displs := []int{40, 8, 24, 16}, []int{48, 0, 8, 88} // uneven, out of order
	send, recv := make([][]byte, n), make([][]byte, n)
	for r := range n {
		send[r], recv[r] = make([]byte, 128), make([]byte, 40)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	c := New(NewJob(), n, 0)
	onEveryRank(t, c, calls, "scatter", func(r, i int) error {
		root, p := i%n, Part{Recv: recv[r]}
		if r == root {
			for j := range send[r] {
				send[r][j] = byte(i + 3*j)
			}
			p.Send = send[r]
		}
		lo, hi := r*32, (r+1)*32
		if i%5 < 2 { // a slot's episodes come back after 2 or 3 laps: of either kind
			if r == root {
				p.SendCounts, p.SendDispls = counts, displs
			}
			lo, hi = displs[r], displs[r]+counts[r]
			if err := c.Scatterv(r, &p, 1, root); err != nil {
				return err
			}
		} else {
			p.SendBlock = 32
			if err := c.Scatter(r, &p, 1, root); err != nil {
				return err
			}
		}
		for j, b := range p.Recv[:hi-lo] {
			if want := byte(i + 3*(lo+j)); b != want {
				return fmt.Errorf("root %d: byte %d of block [%d:%d] is %d, want %d", root, j, lo, hi, b, want)
			}
		}
		return nil
	})
}

// TestTwoRoots: two ranks that each call themselves the root of the same small
// Bcast, again and again: one of them always gets the fault, the third rank gets
// one root's buffer whole or the fault, and nobody hangs or races on the slot.
func TestTwoRoots(t *testing.T) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond} {
		const calls = 2000
		c := New(NewJob(), 3, spin)
		errs := [3][calls]error{}
		got := make([][]byte, calls)
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Go(func() {
				for i := range calls {
					buf := []byte{byte(r), byte(r), byte(r), byte(r), byte(r), byte(r), byte(r), byte(r)}
					root := r
					if r == 1 {
						root = 0
					}
					errs[r][i] = c.Bcast(r, buf, 1, root)
					if r == 1 {
						got[i] = buf
					}
				}
			})
		}
		awaitRanks(t, &wg, 20*time.Second, fmt.Sprintf("spin %v: the Bcasts", spin))
		for i := range calls {
			if errs[0][i] == nil && errs[2][i] == nil {
				t.Fatalf("spin %v, call %d: both ranks that called themselves the root succeeded", spin, i)
			}
			b := got[i]
			if whole := string(b) == "\x00\x00\x00\x00\x00\x00\x00\x00" || string(b) == "\x02\x02\x02\x02\x02\x02\x02\x02"; errs[1][i] == nil && !whole {
				t.Fatalf("spin %v, call %d: rank 1 got %v, neither root's buffer", spin, i, b)
			}
		}
	}
}
