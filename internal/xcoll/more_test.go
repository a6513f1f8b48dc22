package xcoll

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
)

// pat is byte i of the block that rank from sends rank to.
func pat(from, to, i int) byte { return byte(from*31 + to*7 + i) }

func patBlock(from, to, count int) []byte {
	b := make([]byte, count)
	for i := range b {
		b[i] = pat(from, to, i)
	}
	return b
}

// vcount is the uneven count of the block between from and to, zero for some.
func vcount(from, to int) int { return (from + 2*to) % 3 * 2 }

// vlayout lays blocks of counts out in reverse order with a gap of one byte
// after each, returning the displacements and the buffer's length.
func vlayout(counts []int) ([]int, int) {
	displs, at := make([]int, len(counts)), 0
	for j := len(counts) - 1; j >= 0; j-- {
		displs[j], at = at, at+counts[j]+1
	}
	return displs, at
}

func TestMoreCollectives(t *testing.T) {
	inLayouts(t, layouts, func(c *Comm, r, n int) error {
		for _, root := range []int{0, n - 1, 1} {
			// Scatter, blocks of 3 bytes.
			p := coll.Part{Recv: make([]byte, 4)}
			if r == root {
				for j := range n {
					p.Send = append(p.Send, patBlock(root, j, 3)...)
				}
				p.SendBlock = 3
			}
			if err := c.Scatter(r, &p, 1, root); err != nil {
				return err
			}
			if !bytes.Equal(p.Recv[:3], patBlock(root, r, 3)) || p.Recv[3] != 0 {
				return fmt.Errorf("Scatter from %d: %v", root, p.Recv)
			}
			// Scatterv and Gatherv, uneven counts.
			counts := make([]int, n)
			for j := range n {
				counts[j] = vcount(root, j)
			}
			displs, length := vlayout(counts)
			p = coll.Part{Recv: make([]byte, counts[r])}
			if r == root {
				p.Send, p.SendCounts, p.SendDispls = make([]byte, length), counts, displs
				for j := range n {
					copy(p.Send[displs[j]:], patBlock(root, j, counts[j]))
				}
			}
			if err := c.Scatterv(r, &p, 1, root); err != nil {
				return err
			}
			if !bytes.Equal(p.Recv, patBlock(root, r, counts[r])) {
				return fmt.Errorf("Scatterv from %d: %v", root, p.Recv)
			}
			p = coll.Part{Send: patBlock(r, root, counts[r])}
			if r == root {
				p.Recv, p.RecvCounts, p.RecvDispls = make([]byte, length), counts, displs
			}
			if err := c.Gatherv(r, &p, 1, root); err != nil {
				return err
			}
			for j := 0; r == root && j < n; j++ {
				if got := p.Recv[displs[j] : displs[j]+counts[j]]; !bytes.Equal(got, patBlock(j, root, counts[j])) {
					return fmt.Errorf("Gatherv to %d: block %d is %v", root, j, got)
				}
			}
		}
		// Allgatherv: rank j sends vcount(j, 0) bytes.
		counts := make([]int, n)
		for j := range n {
			counts[j] = vcount(j, 0)
		}
		displs, length := vlayout(counts)
		p := coll.Part{Send: patBlock(r, 0, counts[r]), Recv: make([]byte, length), RecvCounts: counts, RecvDispls: displs}
		if err := c.Allgatherv(r, &p, 1); err != nil {
			return err
		}
		for j := range n {
			if got := p.Recv[displs[j] : displs[j]+counts[j]]; !bytes.Equal(got, patBlock(j, 0, counts[j])) {
				return fmt.Errorf("Allgatherv: block %d is %v", j, got)
			}
		}
		// Alltoall, blocks of 2 bytes, and Alltoallv.
		p = coll.Part{Recv: make([]byte, 2*n), SendBlock: 2, RecvBlock: 2}
		for j := range n {
			p.Send = append(p.Send, patBlock(r, j, 2)...)
		}
		if err := c.Alltoall(r, &p, 1); err != nil {
			return err
		}
		for j := range n {
			if got := p.Recv[2*j : 2*j+2]; !bytes.Equal(got, patBlock(j, r, 2)) {
				return fmt.Errorf("Alltoall: block %d is %v", j, got)
			}
		}
		sc, rc := make([]int, n), make([]int, n)
		for j := range n {
			sc[j], rc[j] = vcount(r, j), vcount(j, r)
		}
		sd, sl := vlayout(sc)
		rd, rl := vlayout(rc)
		p = coll.Part{Send: make([]byte, sl), Recv: make([]byte, rl), SendCounts: sc, SendDispls: sd, RecvCounts: rc, RecvDispls: rd}
		for j := range n {
			copy(p.Send[sd[j]:], patBlock(r, j, sc[j]))
		}
		if err := c.Alltoallv(r, &p, 1); err != nil {
			return err
		}
		for j := range n {
			if got := p.Recv[rd[j] : rd[j]+rc[j]]; !bytes.Equal(got, patBlock(j, r, rc[j])) {
				return fmt.Errorf("Alltoallv: block %d is %v", j, got)
			}
		}
		// Scan, Exscan, ReduceScatterBlock with firstFn: the first byte
		// is the lowest rank's, the second counts the ranks folded.
		got := []byte{99, 99}
		if err := c.Scan(r, &coll.Part{Send: []byte{byte(r), 1}, Recv: got}, 2, firstFn); err != nil {
			return err
		}
		if !bytes.Equal(got, []byte{0, byte(r + 1)}) {
			return fmt.Errorf("Scan: %v, want [0 %d]", got, r+1)
		}
		got = []byte{99, 99}
		if err := c.Exscan(r, &coll.Part{Send: []byte{byte(r), 1}, Recv: got}, 2, firstFn); err != nil {
			return err
		}
		if want := []byte{0, byte(r)}; r == 0 && !bytes.Equal(got, []byte{99, 99}) || r > 0 && !bytes.Equal(got, want) {
			return fmt.Errorf("Exscan: %v", got)
		}
		send := make([]byte, 0, 2*n)
		for j := range n {
			send = append(send, byte(r*10+j), 1)
		}
		if err := c.ReduceScatterBlock(r, &coll.Part{Send: send, Recv: got, SendBlock: 2}, 2, firstFn); err != nil {
			return err
		}
		if !bytes.Equal(got, []byte{byte(r), byte(n)}) {
			return fmt.Errorf("ReduceScatterBlock: %v, want [%d %d]", got, r, n)
		}
		// ReduceScatter: block j has j%3 elements of two bytes (some none),
		// one after the other; each element is (10r+j, 1) on rank r.
		counts, displs, total := make([]int, n), make([]int, n), 0
		send = send[:0]
		for j := range n {
			counts[j], displs[j] = 2*(j%3), total
			total += counts[j]
			for range j % 3 {
				send = append(send, byte(r*10+j), 1)
			}
		}
		got = slices.Repeat([]byte{99}, counts[r]+1)
		if err := c.ReduceScatter(r, &coll.Part{Send: send, Recv: got, SendCounts: counts, SendDispls: displs}, 2, firstFn); err != nil {
			return err
		}
		if want := append(slices.Repeat([]byte{byte(r), byte(n)}, r%3), 99); !bytes.Equal(got, want) {
			return fmt.Errorf("ReduceScatter: %v, want %v", got, want)
		}
		return nil
	})
}

// classOf returns the class of err, 0 if it is not an *errs.Error of rank r.
func classOf(err error, r int) errs.Class {
	var e *errs.Error
	if !errors.As(err, &e) || e.Rank != r {
		return 0
	}
	return e.Class
}

// moreMismatch: lengths that disagree between ranks in the collectives of more.go
// are errors of the ranks that find them, as in one proc (TestMismatch).
func moreMismatch(c *Comm, r, n int) error {
	procOf := c.procOf
	// The last rank's Alltoall blocks are longer: every rank gets a
	// Count error, since every proc gets a block from it.
	m := 2
	if r == n-1 {
		m = 3
	}
	p := coll.Part{Send: make([]byte, m*n), Recv: make([]byte, m*n), SendBlock: m, RecvBlock: m}
	if err := c.Alltoall(r, &p, 1); classOf(err, r) != errs.Count {
		return fmt.Errorf("Alltoall with rank %d's blocks longer: %v, want a Count error", n-1, err)
	}
	// Scan: on the channel proc index 0 finds it and tells everybody. In host
	// mode a proc reads only the sends of the ranks up to its last, so only the
	// last rank's proc must find it; the others may not be told.
	err := c.Scan(r, &coll.Part{Send: make([]byte, m), Recv: make([]byte, m)}, 1, firstFn)
	if classOf(err, r) != errs.Count && (!hosted || procOf[r] == procOf[n-1] || err != nil) {
		return fmt.Errorf("Scan with rank %d's length differing: %v, want a Count error", n-1, err)
	}
	// ReduceScatter: the last rank counts its own block one element longer
	// (the same total): its proc finds it; the others may not be told.
	counts, displs := make([]int, n), make([]int, n)
	for j := range n {
		counts[j], displs[j] = 2, 2*j
	}
	if r == n-1 && n > 1 {
		counts[n-2], counts[n-1], displs[n-1] = 1, 3, 2*n-3
	}
	err = c.ReduceScatter(r, &coll.Part{Send: make([]byte, 2*n), Recv: make([]byte, 3), SendCounts: counts, SendDispls: displs}, 1, firstFn)
	if cl := classOf(err, r); procOf[r] == procOf[n-1] && cl != errs.Count || err != nil && cl != errs.Count {
		return fmt.Errorf("ReduceScatter with rank %d's counts differing: %v, want a Count error", n-1, err)
	}
	// Gatherv: the root's proc finds that the last rank sends too much (the
	// senders are not told).
	root := 0
	for j := range n {
		counts[j], displs[j] = 2, 2*j
	}
	p = coll.Part{Send: make([]byte, m)}
	if r == root {
		p.Recv, p.RecvCounts, p.RecvDispls = make([]byte, 2*n), counts, displs
	}
	err = c.Gatherv(r, &p, 1, root)
	if cl := classOf(err, r); procOf[r] == procOf[root] && cl != errs.Truncate || err != nil && cl != errs.Truncate {
		return fmt.Errorf("Gatherv with rank %d sending too much: %v, want a Truncate error", n-1, err)
	}
	// Scatter into a receive buffer too short on the last rank.
	p = coll.Part{Recv: make([]byte, 2)}
	if r == n-1 {
		p.Recv = p.Recv[:1]
	}
	if r == root {
		p.Send, p.SendBlock = make([]byte, 2*n), 2
	}
	err = c.Scatter(r, &p, 1, root)
	if cl := classOf(err, r); r == n-1 && cl != errs.Truncate || err != nil && cl != errs.Truncate {
		return fmt.Errorf("Scatter into a short buffer on rank %d: %v, want a Truncate error", n-1, err)
	}
	return nil
}

// TestDisagree: ranks that call different collectives, or name different roots,
// get errors instead of hanging when a message of the other call reaches a
// leader, or when ranks of one proc disagree; the communicator goes on working.
func TestDisagree(t *testing.T) {
	inModes(t, func(t *testing.T) {
		for _, procOf := range layouts {
			n := len(procOf)
			first := procOf[0]
			t.Run(fmt.Sprint(procOf), func(t *testing.T) {
				noErrors(t, runLeaving(t, procOf, true, func(c *Comm, r int) error {
					// The ranks of rank 0's proc call Barrier, the others Alltoall.
					var err error
					if procOf[r] == first {
						err = c.Barrier(r)
					} else {
						err = c.Alltoall(r, &coll.Part{Send: make([]byte, n), Recv: make([]byte, n), SendBlock: 1, RecvBlock: 1}, 1)
					}
					if classOf(err, r) != errs.Arg {
						return fmt.Errorf("Barrier against Alltoall: %v, want an Arg error", err)
					}
					// A rank names itself the root of a Gatherv, the others rank 0:
					// the ranks of its proc learn it from their leader, which may be
					// the dissenter itself (its call then waits for nobody).
					leader := slices.Index(procOf, procOf[n-1])
					for _, odd := range []int{n - 1, leader} {
						alone := len(slices.DeleteFunc(slices.Clone(procOf), func(p int) bool { return p != procOf[odd] })) == 1
						if odd == 0 || odd == leader && odd == n-1 || alone {
							continue // no disagreement, done already, or alone in its proc
						}
						root := 0
						if r == odd {
							root = odd
						}
						p := coll.Part{Send: []byte{1}}
						if r == root {
							p.Recv, p.RecvCounts, p.RecvDispls = make([]byte, n), slices1(n), iota1(n)
						}
						err = c.Gatherv(r, &p, 1, root)
						if procOf[r] == procOf[odd] && classOf(err, r) != errs.Root {
							return fmt.Errorf("Gatherv with rank %d naming another root: %v, want a Root error", odd, err)
						}
					}
					return c.Barrier(r)
				}))
			})
		}
	})
}

// slices1 returns n counts of 1; iota1 their displacements 0..n-1.
func slices1(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func iota1(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
