package mpi_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// moreSizes are the block lengths of the tests of coll_more.go.
var moreSizes = []int{0, 1, 7, 1000}

// block is the block that rank src sends as its block blk: values that differ with
// both, so that a block put in the wrong place is seen.
func block[T mpi.Elem](conv func(int) T, src, blk, m int) []T {
	v := make([]T, m)
	for i := range v {
		v[i] = conv((src*131 + blk*17 + i) % 251)
	}
	return v
}

// concat joins the blocks f(0), ..., f(n-1); never nil (nil would mean in place).
func concat[T any](n int, f func(j int) []T) []T {
	all := []T{}
	for j := range n {
		all = append(all, f(j)...)
	}
	return all
}

// wantBlocks checks got against want and that the tail of got past want is zero.
func wantBlocks[T mpi.Elem](what string, got, want []T) error {
	var zero T
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		return fmt.Errorf("%s: got %v..., want %v...", what, head(got), head(want))
	}
	for i, v := range got[len(want):] {
		if v != zero {
			return fmt.Errorf("%s: element %d past the result was written", what, len(want)+i)
		}
	}
	return nil
}

// checkMoves runs Gather, Scatter (roots 0, the last and rotating), Allgather and
// Alltoall, in place and not, and compares with the blocks they must deliver.
func checkMoves[T mpi.Elem](t *testing.T, conv func(int) T) {
	for _, n := range collSizes {
		for _, m := range moreSizes {
			t.Run(fmt.Sprintf("ranks=%d/len=%d", n, m), func(t *testing.T) {
				mustRun(t, n, func(c *mpi.Comm) error {
					r := c.Rank()
					mine := block(conv, r, 0, m)
					for call, root := range []int{0, n - 1, 1 % n, 2 % n} {
						// Gather, into a receive buffer one longer than needed.
						gathered := concat(n, func(j int) []T { return block(conv, j, 0, m) })
						var recv []T
						if r == root {
							recv = make([]T, n*m+1)
						}
						if err := mpi.Gather(c, mine, recv, root); err != nil {
							return err
						}
						if r == root {
							if err := wantBlocks(fmt.Sprintf("Gather root %d call %d", root, call), recv, gathered); err != nil {
								return err
							}
						}
						// Gather in place at the root.
						send := mine
						recv = nil
						if r == root {
							send, recv = nil, make([]T, n*m)
							copy(recv[root*m:], mine)
						}
						if err := mpi.Gather(c, send, recv, root); err != nil {
							return err
						}
						if r == root {
							if err := wantBlocks(fmt.Sprintf("Gather in place root %d", root), recv, gathered); err != nil {
								return err
							}
						}
						// Scatter, into a receive buffer one longer than needed.
						var all []T
						if r == root {
							all = concat(n, func(j int) []T { return block(conv, root, j, m) })
						}
						orig := slices.Clone(all)
						got := make([]T, m+1)
						if err := mpi.Scatter(c, all, got, root); err != nil {
							return err
						}
						if err := wantBlocks(fmt.Sprintf("Scatter root %d call %d", root, call), got, block(conv, root, r, m)); err != nil {
							return err
						}
						if !slices.Equal(all, orig) {
							return fmt.Errorf("Scatter modified the send buffer")
						}
						// Scatter in place at the root.
						got = make([]T, m)
						if r == root {
							got = nil
						}
						if err := mpi.Scatter(c, all, got, root); err != nil {
							return err
						}
						if r != root {
							if err := wantBlocks(fmt.Sprintf("Scatter in place root %d", root), got, block(conv, root, r, m)); err != nil {
								return err
							}
						} else if !slices.Equal(all, orig) {
							return fmt.Errorf("Scatter in place modified the send buffer")
						}
					}
					// Allgather, and in place.
					want := concat(n, func(j int) []T { return block(conv, j, 0, m) })
					recv := make([]T, n*m+1)
					if err := mpi.Allgather(c, mine, recv); err != nil {
						return err
					}
					if err := wantBlocks("Allgather", recv, want); err != nil {
						return err
					}
					recv = make([]T, n*m)
					copy(recv[r*m:], mine)
					if err := mpi.Allgather(c, nil, recv); err != nil {
						return err
					}
					if err := wantBlocks("Allgather in place", recv, want); err != nil {
						return err
					}
					// Alltoall: block j of rank i is block(i, j); rank r receives block(j, r) from j.
					send := concat(n, func(j int) []T { return block(conv, r, j, m) })
					want = concat(n, func(j int) []T { return block(conv, j, r, m) })
					recv = make([]T, n*m+1)
					if err := mpi.Alltoall(c, send, recv); err != nil {
						return err
					}
					if err := wantBlocks("Alltoall", recv, want); err != nil {
						return err
					}
					if err := mpi.Alltoall(c, nil, send); err != nil {
						return err
					}
					return wantBlocks("Alltoall in place", send, want)
				})
			})
		}
	}
}

func TestMovesInt32(t *testing.T)   { checkMoves(t, func(v int) int32 { return int32(v) - 100 }) }
func TestMovesFloat64(t *testing.T) { checkMoves(t, func(v int) float64 { return float64(v) + 0.25 }) }
func TestMovesUint8(t *testing.T)   { checkMoves(t, func(v int) uint8 { return uint8(v) + 1 }) }
func TestMovesCelsius(t *testing.T) { checkMoves(t, func(v int) celsius { return celsius(v) * 0.5 }) }

// checkScans runs Scan, Exscan and ReduceScatterBlock with op, in place and not,
// and compares with refReduce on the prefixes and blocks; 5000 elements of 8 bytes
// are cut into columns (see internal/coll's scanColumns).
func checkScans[T mpi.Elem](t *testing.T, conv func(int) T, o namedOp[T]) {
	for _, n := range collSizes {
		for _, m := range append(moreSizes[:len(moreSizes):len(moreSizes)], 5000) {
			t.Run(fmt.Sprintf("%v/ranks=%d/len=%d", o.op, n, m), func(t *testing.T) {
				xs := make([][]T, n)
				for r := range xs {
					xs[r] = contrib(conv, r, 1, m)
				}
				// ReduceScatterBlock: n blocks of m per rank.
				ys := make([][]T, n)
				for r := range ys {
					ys[r] = contrib(conv, r, 2, n*m)
				}
				whole := refReduce(ys, o.ref)
				mustRun(t, n, func(c *mpi.Comm) error {
					r := c.Rank()
					scan := refReduce(xs[:r+1], o.ref)
					orig := slices.Clone(xs[r])
					recv := make([]T, m+1)
					if err := mpi.Scan(c, xs[r], recv, o.op); err != nil {
						return err
					}
					if err := wantBlocks("Scan", recv, scan); err != nil {
						return err
					}
					inplace := slices.Clone(xs[r])
					if err := mpi.Scan(c, nil, inplace, o.op); err != nil {
						return err
					}
					if err := wantBlocks("Scan in place", inplace, scan); err != nil {
						return err
					}
					var ex []T // rank 0's recv is left as it was: zero
					if r > 0 {
						ex = refReduce(xs[:r], o.ref)
					}
					recv = make([]T, m+1)
					if err := mpi.Exscan(c, xs[r], recv, o.op); err != nil {
						return err
					}
					if err := wantBlocks("Exscan", recv, ex); err != nil {
						return err
					}
					inplace = slices.Clone(xs[r])
					if err := mpi.Exscan(c, nil, inplace, o.op); err != nil {
						return err
					}
					if r == 0 {
						ex = xs[0]
					}
					if err := wantBlocks("Exscan in place", inplace, ex); err != nil {
						return err
					}
					if !slices.Equal(xs[r], orig) {
						return fmt.Errorf("Scan or Exscan modified the send buffer")
					}
					mine := whole[r*m : (r+1)*m]
					recv = make([]T, m+1)
					if err := mpi.ReduceScatterBlock(c, ys[r], recv, o.op); err != nil {
						return err
					}
					if err := wantBlocks("ReduceScatterBlock", recv, mine); err != nil {
						return err
					}
					inplace = slices.Clone(ys[r])
					if err := mpi.ReduceScatterBlock(c, nil, inplace, o.op); err != nil {
						return err
					}
					if !slices.Equal(inplace[:m], mine) {
						return fmt.Errorf("ReduceScatterBlock in place: got %v..., want %v...", head(inplace), head(mine))
					}
					return nil
				})
			})
		}
	}
}

func TestScanInt64(t *testing.T) {
	conv := func(v int) int64 { return int64(v) - 2 }
	for _, o := range intOps[int64]()[:4] { // Sum, Prod, Min, Max
		checkScans(t, conv, o)
	}
}

func TestScanFloat32(t *testing.T) {
	checkScans(t, func(v int) float32 { return float32(v) * 0.5 }, floatOps[float32]()[0])
}

func TestScanBool(t *testing.T) {
	checkScans(t, func(v int) bool { return v%2 == 1 }, namedOp[bool]{mpi.Lxor, func(a, b bool) bool { return a != b }})
}

// TestScanNonCommutative: Scan, Exscan and ReduceScatterBlock multiply 2x2 integer
// matrices (packed as four int16 in an int64), right only in rank order.
func TestScanNonCommutative(t *testing.T) {
	conv := func(v int) int64 { return matPack([4]int64{1, int64(v), int64(v % 2), 1 + int64(v%3)}) }
	checkScans(t, conv, namedOp[int64]{matOp, matMul}) // refReduce's order: x0 (x1 (... xr))
	// And an explicit check that the order is not reversed.
	mustRun(t, 3, func(c *mpi.Comm) error {
		x := []int64{matPack([4]int64{1, int64(c.Rank() + 1), 0, 1 + int64(c.Rank())})}
		recv := make([]int64, 1)
		if err := mpi.Scan(c, x, recv, matOp); err != nil {
			return err
		}
		a := matPack([4]int64{1, 1, 0, 1})
		b := matPack([4]int64{1, 2, 0, 2})
		cc := matPack([4]int64{1, 3, 0, 3})
		want := []int64{a, matMul(a, b), matMul(matMul(a, b), cc)}[c.Rank()]
		if c.Rank() == 2 && matMul(matMul(a, b), cc) == matMul(matMul(cc, b), a) {
			return fmt.Errorf("the test matrices commute")
		}
		if recv[0] != want {
			return fmt.Errorf("Scan on rank %d: product out of rank order", c.Rank())
		}
		return nil
	})
}

func TestCollMoreErrors(t *testing.T) {
	// Local errors: every rank makes the same mistake.
	mustRun(t, 3, func(c *mpi.Comm) error {
		one := []float64{1}
		for i, e := range []error{
			check(mpi.Gather(c, one, make([]float64, 3), 3), mpi.ErrRoot),
			check(mpi.Scatter(c, one, one, -1), mpi.ErrRoot),
			check(mpi.Gather(c, one, make([]float64, 2), c.Rank()), mpi.ErrCount),
			check(mpi.Gather(c, nil, make([]float64, 4), c.Rank()), mpi.ErrCount),
			check(mpi.Scatter(c, make([]float64, 4), make([]float64, 2), c.Rank()), mpi.ErrCount),
			check(mpi.Scatter(c, make([]float64, 6), make([]float64, 1), c.Rank()), mpi.ErrCount),
			check(mpi.Allgather(c, []float64{1, 2}, make([]float64, 5)), mpi.ErrCount),
			check(mpi.Alltoall(c, make([]float64, 4), make([]float64, 4)), mpi.ErrCount),
			check(mpi.Alltoall(c, make([]float64, 6), make([]float64, 5)), mpi.ErrCount),
			check(mpi.Scan(c, []float64{1, 2}, one, mpi.Sum), mpi.ErrCount),
			check(mpi.Exscan(c, []float64{1}, one, mpi.Band), mpi.ErrOp),
			check(mpi.Scan(c, []bool{true}, make([]bool, 1), mpi.Sum), mpi.ErrOp),
			check(mpi.ReduceScatterBlock(c, make([]float64, 6), one, mpi.Sum), mpi.ErrCount),
			check(mpi.ReduceScatterBlock(c, make([]float64, 4), make([]float64, 2), mpi.Sum), mpi.ErrCount),
			check(mpi.ReduceScatterBlock(c, make([]complex128, 3), make([]complex128, 1), mpi.Max), mpi.ErrOp),
			check(mpi.ReduceScatterBlock(c, make([]float64, 3), make([]float64, 1), mpi.Op{}), mpi.ErrOp),
		} {
			if e != nil {
				return fmt.Errorf("case %d: %w", i, e)
			}
		}
		big := make([]int32, 12)
		if e := check(mpi.Allgather(c, big[0:2], big), mpi.ErrBuffer); e != nil {
			return e
		}
		if e := check(mpi.Alltoall(c, big[:6], big[3:9]), mpi.ErrBuffer); e != nil {
			return e
		}
		// The short receive buffer's error names both lengths.
		err := mpi.Allgather(c, []float64{1, 2}, make([]float64, 5))
		if e, _ := wantClass(err, mpi.ErrCount); e == nil || !strings.Contains(e.Detail, "5") || !strings.Contains(e.Detail, "6") {
			return fmt.Errorf("Allgather short recv: %v", err)
		}
		// An op not defined on the type is found before the collective starts: no
		// rank folds with it (which would fail too, but naming a panic).
		err = mpi.Exscan(c, []float64{1}, one, mpi.Band)
		if e, _ := wantClass(err, mpi.ErrOp); e == nil || !strings.Contains(e.Detail, "Band is not defined on float64") {
			return fmt.Errorf("Exscan with Band on float64: %v", err)
		}
		return c.Barrier() // the communicator still works
	})
	// Disagreements between ranks are found inside the collective: on every rank
	// of a large one; in a small one, on every rank that reads what the mistake
	// touches (the others may have left before it came: a Gather's non-roots, a
	// Scatter's root and its other receivers, the ranks of a Scan before it).
	mustRun(t, 3, func(c *mpi.Comm) error {
		r := c.Rank()
		mayLeave := func(err error, class mpi.Class, leaves bool) error {
			if leaves && err == nil {
				return nil
			}
			return check(err, class)
		}
		bad := mpi.NewOp(func(in, inout []int64) { panic("bad op") }, true)
		for i, e := range []error{
			// Rank 2 sends more than the root expects, then fewer.
			mayLeave(mpi.Gather(c, make([]int32, 2+r/2), make([]int32, 12), 0), mpi.ErrTruncate, r != 0),
			mayLeave(mpi.Gather(c, make([]int32, 2-r/2), make([]int32, 6), 0), mpi.ErrCount, r != 0),
			// Rank 1's receive buffer is too short for its block: its mistake alone.
			mayLeave(mpi.Scatter(c, make([]int32, 6), make([]int32, 2-r%2), 0), mpi.ErrTruncate, r != 1),
			check(mpi.Allgather(c, make([]int32, 1+r%2), make([]int32, 6)), mpi.ErrCount),
			check(mpi.Alltoall(c, make([]int32, 3*(1+r%2)), make([]int32, 6)), mpi.ErrCount),
			// Rank 2 has more: the ranks before it need nothing of it.
			mayLeave(mpi.Scan(c, make([]int32, 1+r/2), make([]int32, 2), mpi.Sum), mpi.ErrCount, r != 2),
			mayLeave(mpi.Exscan(c, make([]int32, 1+r/2), make([]int32, 2), mpi.Sum), mpi.ErrCount, r != 2),
			check(mpi.ReduceScatterBlock(c, make([]int32, 3*(1+r%2)), make([]int32, 2), mpi.Sum), mpi.ErrCount),
			mayLeave(mpi.Gather(c, make([]int32, 1), make([]int32, 3), r%2), mpi.ErrRoot, r == 2),
			mayLeave(mpi.Scan(c, make([]int64, 1), make([]int64, 1), bad), mpi.ErrOp, r == 0),
			// Large: every rank waits for the others, and learns.
			check(mpi.Gather(c, make([]int32, 1024+r/2), make([]int32, 3072), 0), mpi.ErrTruncate),
			check(mpi.Scatter(c, make([]int32, 3072), make([]int32, 1024-r%2), 0), mpi.ErrTruncate),
			check(mpi.Scan(c, make([]int32, 1024+r/2), make([]int32, 1025), mpi.Sum), mpi.ErrCount),
			check(mpi.Scan(c, make([]int64, 1024), make([]int64, 1024), bad), mpi.ErrOp),
		} {
			if e != nil {
				return fmt.Errorf("case %d: %w", i, e)
			}
		}
		// Different collectives: every rank of the episode fails but a small
		// Gather's non-root (2), which may have left before rank 1 came.
		var err error
		if r == 1 {
			err = mpi.Allgather(c, make([]int32, 1), make([]int32, 3))
		} else {
			err = mpi.Gather(c, make([]int32, 1), make([]int32, 3), 0)
		}
		if err == nil && r != 2 {
			return fmt.Errorf("Gather against Allgather succeeded")
		}
		return c.Barrier()
	})
}

// vSizes are the communicator sizes of the tests of the v-variants.
var vSizes = []int{1, 3, 4}

// vCount is the uneven count of rank j's block (zero for some j).
func vCount(j int) int { return (5*j + 2) % 4 }

// vPairCount is the count of the block rank i sends to rank j in Alltoallv; with sym,
// it is the same both ways (for in place).
func vPairCount(i, j int, sym bool) int {
	if sym {
		return (i + j + 1) % 3
	}
	return (3*i + 5*j + 1) % 4
}

// vLayout places blocks of the counts in a shuffled order, one unused element before
// each, and returns the displacements and the length of the buffer (one past the end).
func vLayout(counts []int, seed uint64) ([]int, int) {
	displs := make([]int, len(counts))
	at := 0
	for _, j := range rand.New(rand.NewPCG(seed, 7)).Perm(len(counts)) {
		at++
		displs[j] = at
		at += counts[j]
	}
	return displs, at + 1
}

// vPlace is the naive reference: a buffer of length n holding block(j) at displs[j], zero elsewhere.
func vPlace[T any](n int, displs []int, block func(j int) []T) []T {
	buf := make([]T, n)
	for j, d := range displs {
		copy(buf[d:], block(j))
	}
	return buf
}

// checkVMoves runs Gatherv, Scatterv (roots 0, the last and 1), Allgatherv and
// Alltoallv, in place and not, with uneven counts and shuffled displacements, and
// compares with vPlace.
func checkVMoves[T mpi.Elem](t *testing.T, conv func(int) T) {
	for _, n := range vSizes {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			counts := make([]int, n)
			for j := range counts {
				counts[j] = vCount(j)
			}
			mustRun(t, n, func(c *mpi.Comm) error {
				r := c.Rank()
				mine := block(conv, r, 0, counts[r])
				for _, root := range []int{0, n - 1, 1 % n} {
					displs, size := vLayout(counts, uint64(root))
					gathered := vPlace(size, displs, func(j int) []T { return block(conv, j, 0, counts[j]) })
					// Gatherv; counts, displs and recv are nil away from the root.
					var recv []T
					var cs, ds []int
					if r == root {
						recv, cs, ds = make([]T, size), counts, displs
					}
					if err := mpi.Gatherv(c, mine, recv, cs, ds, root); err != nil {
						return err
					}
					if r == root && !slices.Equal(recv, gathered) {
						return fmt.Errorf("Gatherv root %d: got %v, want %v", root, recv, gathered)
					}
					// Gatherv in place.
					send := mine
					if r == root {
						send, recv = nil, make([]T, size)
						copy(recv[displs[root]:], mine)
					}
					if err := mpi.Gatherv(c, send, recv, cs, ds, root); err != nil {
						return err
					}
					if r == root && !slices.Equal(recv, gathered) {
						return fmt.Errorf("Gatherv in place root %d: got %v, want %v", root, recv, gathered)
					}
					// Scatterv, into a receive buffer one longer than needed.
					var all []T
					if r == root {
						all = vPlace(size, displs, func(j int) []T { return block(conv, root, j, counts[j]) })
					}
					orig := slices.Clone(all)
					got := make([]T, counts[r]+1)
					if err := mpi.Scatterv(c, all, cs, ds, got, root); err != nil {
						return err
					}
					if err := wantBlocks(fmt.Sprintf("Scatterv root %d", root), got, block(conv, root, r, counts[r])); err != nil {
						return err
					}
					// Scatterv in place.
					got = make([]T, counts[r])
					if r == root {
						got = nil
					}
					if err := mpi.Scatterv(c, all, cs, ds, got, root); err != nil {
						return err
					}
					if r != root {
						if err := wantBlocks(fmt.Sprintf("Scatterv in place root %d", root), got, block(conv, root, r, counts[r])); err != nil {
							return err
						}
					}
					if !slices.Equal(all, orig) {
						return fmt.Errorf("Scatterv modified the send buffer")
					}
				}
				// Allgatherv: every rank places the blocks its own way.
				displs, size := vLayout(counts, uint64(10+r))
				want := vPlace(size, displs, func(j int) []T { return block(conv, j, 0, counts[j]) })
				recv := make([]T, size)
				if err := mpi.Allgatherv(c, mine, recv, counts, displs); err != nil {
					return err
				}
				if !slices.Equal(recv, want) {
					return fmt.Errorf("Allgatherv: got %v, want %v", recv, want)
				}
				recv = make([]T, size)
				copy(recv[displs[r]:], mine)
				if err := mpi.Allgatherv(c, nil, recv, counts, displs); err != nil {
					return err
				}
				if !slices.Equal(recv, want) {
					return fmt.Errorf("Allgatherv in place: got %v, want %v", recv, want)
				}
				// Alltoallv: rank r sends block(r, j) to j and receives block(j, r) from j.
				for _, sym := range []bool{false, true} {
					sc, rc := make([]int, n), make([]int, n)
					for j := range n {
						sc[j], rc[j] = vPairCount(r, j, sym), vPairCount(j, r, sym)
					}
					sd, ssize := vLayout(sc, uint64(20+r))
					rd, rsize := vLayout(rc, uint64(30+r))
					send := vPlace(ssize, sd, func(j int) []T { return block(conv, r, j, sc[j]) })
					orig := slices.Clone(send)
					want := vPlace(rsize, rd, func(j int) []T { return block(conv, j, r, rc[j]) })
					recv := make([]T, rsize)
					if err := mpi.Alltoallv(c, send, sc, sd, recv, rc, rd); err != nil {
						return err
					}
					if !slices.Equal(recv, want) {
						return fmt.Errorf("Alltoallv (sym %v): got %v, want %v", sym, recv, want)
					}
					if !slices.Equal(send, orig) {
						return fmt.Errorf("Alltoallv modified the send buffer")
					}
					if sym { // in place: recv holds the blocks to send where they are received
						recv = vPlace(rsize, rd, func(j int) []T { return block(conv, r, j, rc[j]) })
						if err := mpi.Alltoallv(c, nil, nil, nil, recv, rc, rd); err != nil {
							return err
						}
						if !slices.Equal(recv, want) {
							return fmt.Errorf("Alltoallv in place: got %v, want %v", recv, want)
						}
					}
				}
				return nil
			})
		})
	}
}

func TestMovesVInt32(t *testing.T) {
	checkVMoves(t, func(v int) int32 { return int32(v) - 100 })
}
func TestMovesVFloat64(t *testing.T) {
	checkVMoves(t, func(v int) float64 { return float64(v) + 0.25 })
}
func TestMovesVUint8(t *testing.T) {
	checkVMoves(t, func(v int) uint8 { return uint8(v) + 1 })
}
func TestMovesVCelsius(t *testing.T) {
	checkVMoves(t, func(v int) celsius { return celsius(v) * 0.5 })
}

// TestCollMoreVErrors: the v-variants' checks of counts and displacements, local and
// between ranks.
func TestCollMoreVErrors(t *testing.T) {
	// check wants class and a detail naming every one of words.
	check := func(err error, class mpi.Class, words ...string) error {
		e, err2 := wantClass(err, class)
		if err2 != nil {
			return err2
		}
		for _, w := range words {
			if !strings.Contains(e.Detail, w) {
				return fmt.Errorf("error %v does not name %q", err, w)
			}
		}
		return nil
	}
	// Local errors: every rank makes the same mistake, and the communicator still works.
	mustRun(t, 3, func(c *mpi.Comm) error {
		r := c.Rank()
		one, six := []float64{1}, make([]float64, 6)
		ok3, okd := []int{1, 1, 1}, []int{0, 2, 4}
		for i, e := range []error{
			check(mpi.Gatherv(c, one, six, ok3, okd, 3), mpi.ErrRoot),
			check(mpi.Gatherv(c, one, six, []int{1, 1}, okd, r), mpi.ErrArg, "2 receive counts", "3 ranks"),
			check(mpi.Gatherv(c, one, six, ok3, []int{0, 1, 2, 3}, r), mpi.ErrArg, "4 receive displacements"),
			check(mpi.Gatherv(c, one, six, []int{1, -2, 1}, okd, r), mpi.ErrCount, "block 1", "-2"),
			check(mpi.Gatherv(c, one, six, ok3, []int{0, -1, 4}, r), mpi.ErrArg, "block 1", "-1"),
			check(mpi.Gatherv(c, one, six, []int{1, 1, 3}, okd, r), mpi.ErrArg, "block 2", "displacement 4", "count 3", "6 elements"),
			check(mpi.Gatherv(c, one, six, []int{1, 0, 1}, []int{0, 9, 6}, r), mpi.ErrArg, "block 1", "displacement 9"),
			check(mpi.Gatherv(c, one, six, []int{1, 2, 1}, []int{4, 0, 1}, r), mpi.ErrBuffer, "blocks 1", "and 2", "count 2"),
			check(mpi.Gatherv(c, six[:1], six, ok3, okd, r), mpi.ErrBuffer),
			check(mpi.Scatterv(c, six, ok3, []int{0, 2, 6}, one, r), mpi.ErrArg, "send block 2", "displacement 6"),
			check(mpi.Scatterv(c, six, []int{1, 1, -1}, okd, one, r), mpi.ErrCount, "block 2", "-1"),
			check(mpi.Scatterv(c, six, []int{2, 2, 2}, okd, one, r), mpi.ErrCount, "1 elements", "2"),
			check(mpi.Scatterv(c, six, ok3, okd, six[5:], r), mpi.ErrBuffer),
			check(mpi.Scatterv(c, six, ok3, okd, nil, -1), mpi.ErrRoot),
			check(mpi.Allgatherv(c, one, six, ok3, nil), mpi.ErrArg, "0 receive displacements"),
			check(mpi.Allgatherv(c, one, six, ok3, []int{0, 3, 3}), mpi.ErrBuffer, "blocks 1", "and 2"),
			check(mpi.Allgatherv(c, six[2:3], six, ok3, okd), mpi.ErrBuffer),
			check(mpi.Alltoallv(c, six, ok3, okd, make([]float64, 3), ok3, []int{0, 1, 3}), mpi.ErrArg, "receive block 2"),
			check(mpi.Alltoallv(c, six, []int{1, 1, 7}, okd, make([]float64, 3), ok3, []int{0, 1, 2}), mpi.ErrArg, "send block 2", "count 7"),
			check(mpi.Alltoallv(c, six, ok3, okd, make([]float64, 3), []int{1, 1}, []int{0, 1}), mpi.ErrArg, "2 receive counts"),
			check(mpi.Alltoallv(c, six, ok3, okd, six, ok3, []int{0, 1, 2}), mpi.ErrBuffer),
			check(mpi.Alltoallv(c, nil, nil, nil, make([]float64, 3), ok3, []int{0, 1, 1}), mpi.ErrBuffer, "blocks 1"),
		} {
			if e != nil {
				return fmt.Errorf("case %d: %w", i, e)
			}
		}
		// Overlapping send blocks are fine (they are only read).
		got := make([]float64, 1)
		if err := mpi.Scatterv(c, []float64{5, 6}, ok3, []int{1, 1, 1}, got, 0); err != nil || got[0] != 6 {
			return fmt.Errorf("Scatterv with overlapping send blocks: %v, got %v", err, got)
		}
		return c.Barrier()
	})
	// Disagreements between ranks are found inside the collective: on every rank
	// that waits for the others in these small ones (see TestCollMoreErrors).
	mustRun(t, 3, func(c *mpi.Comm) error {
		r := c.Rank()
		ok3, okd := []int{1, 1, 1}, []int{0, 1, 2}
		mayLeave := func(err error, class mpi.Class, leaves bool) error {
			if leaves && err == nil {
				return nil
			}
			return check(err, class)
		}
		big, bigd := []int{1024, 1024, 1024}, []int{0, 1024, 2048}
		for i, e := range []error{
			// Rank 2 sends more than the root expects, then fewer.
			mayLeave(mpi.Gatherv(c, make([]int32, 1+r/2), make([]int32, 3), ok3, okd, 0), mpi.ErrTruncate, r != 0),
			mayLeave(mpi.Gatherv(c, make([]int32, 1-r/2), make([]int32, 3), ok3, okd, 0), mpi.ErrCount, r != 0),
			// Rank 1's receive buffer is too short for its block: its mistake alone.
			mayLeave(mpi.Scatterv(c, make([]int32, 6), []int{2, 2, 2}, []int{0, 2, 4}, make([]int32, 2-r%2), 0), mpi.ErrTruncate, r != 1),
			check(mpi.Allgatherv(c, make([]int32, 1+r%2), make([]int32, 3), ok3, okd), mpi.ErrTruncate),
			// Rank 1 expects two elements from each rank.
			check(mpi.Alltoallv(c, make([]int32, 3), ok3, okd, make([]int32, 6), []int{1 + r%2, 1 + r%2, 1 + r%2}, []int{0, 2, 4}), mpi.ErrCount),
			// Different roots.
			mayLeave(mpi.Gatherv(c, make([]int32, 1), make([]int32, 3), ok3, okd, r%2), mpi.ErrRoot, r == 2),
			// Large: every rank waits for the others, and learns.
			check(mpi.Gatherv(c, make([]int32, 1024+r/2), make([]int32, 3072), big, bigd, 0), mpi.ErrTruncate),
			check(mpi.Scatterv(c, make([]int32, 3072), big, bigd, make([]int32, 1024-r%2), 0), mpi.ErrTruncate),
		} {
			if e != nil {
				return fmt.Errorf("case %d: %w", i, e)
			}
		}
		// Different collectives: every rank of the episode fails.
		var err error
		if r == 1 {
			err = mpi.Allgatherv(c, make([]int32, 1), make([]int32, 3), ok3, okd)
		} else {
			err = mpi.Gatherv(c, make([]int32, 1), make([]int32, 3), ok3, okd, 0)
		}
		if err == nil && r != 2 { // a small Gatherv's non-root may have left first
			return fmt.Errorf("Gatherv against Allgatherv succeeded")
		}
		return c.Barrier()
	})
}

// TestSmallExchangesPipeline: in small Gathers, Scatters and Scans the ranks that
// need nothing from the others (a Gather's non-roots, a Scatter's root, rank 0 of
// a Scan) leave at once, having copied what the others read of them, so they run
// calls ahead of ranks that have not made them yet; they then reuse their buffers
// and counts, and the late ranks still get every value.
func TestSmallExchangesPipeline(t *testing.T) {
	const ahead = 5
	// token holds the late ranks until every early rank is done.
	token := func(c *mpi.Comm, early func(r int) bool) error {
		for r := range c.Size() {
			var err error
			switch {
			case early(c.Rank()) && !early(r):
				err = mpi.Send(c, []byte{1}, r, 9)
			case !early(c.Rank()) && early(r):
				_, err = mpi.Recv(c, make([]byte, 1), r, 9)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	mustRun(t, 3, func(c *mpi.Comm) error {
		r, n := c.Rank(), c.Size()
		// Gather and Gatherv to root 0.
		if r != 0 {
			send := make([]int64, r)
			for i := range ahead {
				for j := range send {
					send[j] = int64(100*i + 10*r + j)
				}
				if err := mpi.Gather(c, send[:1], nil, 0); err != nil {
					return err
				}
				if err := mpi.Gatherv(c, send, nil, nil, nil, 0); err != nil {
					return err
				}
			}
			clear(send)
		}
		if err := token(c, func(r int) bool { return r != 0 }); err != nil {
			return err
		}
		if r == 0 {
			for i := range ahead {
				got := make([]int64, n)
				if err := mpi.Gather(c, []int64{int64(100 * i)}, got, 0); err != nil {
					return err
				}
				if want := []int64{int64(100 * i), int64(100*i + 10), int64(100*i + 20)}; !slices.Equal(got, want) {
					return fmt.Errorf("Gather %d got %v, want %v", i, got, want)
				}
				gotv := make([]int64, 3)
				if err := mpi.Gatherv(c, nil, gotv, []int{0, 1, 2}, []int{0, 0, 1}, 0); err != nil {
					return err
				}
				if want := []int64{int64(100*i + 10), int64(100*i + 20), int64(100*i + 21)}; !slices.Equal(gotv, want) {
					return fmt.Errorf("Gatherv %d got %v, want %v", i, gotv, want)
				}
			}
		}
		// Scatter and Scatterv from root 2, whose buffer and counts change after each call.
		if r == 2 {
			send := make([]int64, n)
			counts, displs := []int{1, 2, 0}, []int{2, 0, 0}
			for i := range ahead {
				for j := range send {
					send[j] = int64(100*i + j)
				}
				if err := mpi.Scatter(c, send, make([]int64, 1), 2); err != nil {
					return err
				}
				if err := mpi.Scatterv(c, send, counts, displs, nil, 2); err != nil {
					return err
				}
				clear(send)
				counts[0], counts[1], displs[0] = 9, 9, 9
				counts[0], counts[1], displs[0] = 1, 2, 2
			}
			counts[0], counts[1] = 0, 0
		}
		if err := token(c, func(r int) bool { return r == 2 }); err != nil {
			return err
		}
		if r != 2 {
			for i := range ahead {
				got := make([]int64, 1)
				if err := mpi.Scatter(c, nil, got, 2); err != nil {
					return err
				}
				if got[0] != int64(100*i+r) {
					return fmt.Errorf("Scatter %d got %v, want %d", i, got, 100*i+r)
				}
				gotv := make([]int64, 1+r)
				if err := mpi.Scatterv(c, nil, nil, nil, gotv, 2); err != nil {
					return err
				}
				want := []int64{int64(100*i + 2)}
				if r == 1 {
					want = []int64{int64(100 * i), int64(100*i + 1)}
				}
				if !slices.Equal(gotv, want) {
					return fmt.Errorf("Scatterv %d got %v, want %v", i, gotv, want)
				}
			}
		}
		// Scan: rank 0 runs ahead.
		if r == 0 {
			send := make([]int64, 1)
			for i := range ahead {
				send[0] = int64(i)
				if err := mpi.Scan(c, send, make([]int64, 1), mpi.Sum); err != nil {
					return err
				}
			}
			send[0] = -1
		}
		if err := token(c, func(r int) bool { return r == 0 }); err != nil {
			return err
		}
		if r != 0 {
			for i := range ahead {
				got := make([]int64, 1)
				if err := mpi.Scan(c, []int64{int64(10 * r)}, got, mpi.Sum); err != nil {
					return err
				}
				if want := int64(i + 10*r*(r+1)/2); got[0] != want {
					return fmt.Errorf("Scan %d on rank %d got %d, want %d", i, r, got[0], want)
				}
			}
		}
		return nil
	})
}

// TestVCountsFromCallToCall: the rank's memory for its byte counts serves every
// v-collective call (blocksOf), so each call's must stay what the collective reads
// while other ranks still read it: 300 rounds of two Alltoallv, a Scatterv and
// two Allgatherv whose counts change every call (small ones: ranks leave as soon as
// they have their blocks), and Igatherv calls issued before the next blocking one,
// each rank checking every block it gets.
func TestVCountsFromCallToCall(t *testing.T) {
	for _, n := range []int{2, 4, 65} { // 65: above keptBlocksRanks, each call's own
		mustRun(t, n, func(c *mpi.Comm) error {
			me := c.Rank()
			// count is how many elements rank from sends rank to in call i; value
			// is element k of that block.
			count := func(i, from, to int) int { return (i + 2*from + to) % 4 }
			value := func(i, from, to, k int) int32 { return int32(i*10000 + from*1000 + to*100 + k) }
			layout := func(counts []int) ([]int, int) {
				displs, at := make([]int, len(counts)), 0
				for j, m := range counts {
					displs[j], at = at, at+m
				}
				return displs, at
			}
			for i := range 300 {
				for _, call := range []int{2 * i, 2*i + 1} { // two in a row: the send counts' memory serves both
					sc, rc := make([]int, n), make([]int, n)
					for j := range n {
						sc[j], rc[j] = count(call, me, j), count(call, j, me)
					}
					sd, slen := layout(sc)
					rd, rlen := layout(rc)
					send, recv := make([]int32, slen), make([]int32, rlen)
					for j := range n {
						for k := range sc[j] {
							send[sd[j]+k] = value(call, me, j, k)
						}
					}
					if err := mpi.Alltoallv(c, send, sc, sd, recv, rc, rd); err != nil {
						return fmt.Errorf("call %d: Alltoallv: %w", call, err)
					}
					for j := range n {
						for k := range rc[j] {
							if got, want := recv[rd[j]+k], value(call, j, me, k); got != want {
								return fmt.Errorf("call %d: Alltoallv: element %d from rank %d is %d, want %d", call, k, j, got, want)
							}
						}
					}
				}
				root := i % n
				counts := make([]int, n) // the root's blocks, one to each rank
				for j := range n {
					counts[j] = count(i, root, j)
				}
				displs, total := layout(counts)
				var all []int32
				if me == root {
					all = make([]int32, total)
					for j := range n {
						for k := range counts[j] {
							all[displs[j]+k] = value(i, root, j, k)
						}
					}
				}
				mine := make([]int32, 3)
				if err := mpi.Scatterv(c, all, counts, displs, mine, root); err != nil {
					return fmt.Errorf("call %d: Scatterv: %w", i, err)
				}
				for k := range counts[me] {
					if got, want := mine[k], value(i, root, me, k); got != want {
						return fmt.Errorf("call %d: Scatterv: element %d is %d, want %d", i, k, got, want)
					}
				}
				// Allgatherv of each rank's Scatterv block: every rank gets the root's buffer.
				got := make([]int32, total)
				if err := mpi.Allgatherv(c, mine[:counts[me]], got, counts, displs); err != nil {
					return fmt.Errorf("call %d: Allgatherv: %w", i, err)
				}
				if me == root && !slices.Equal(got, all) {
					return fmt.Errorf("call %d: Allgatherv: got %v, want %v", i, got, all)
				}
				// Igatherv back to the root, issued before the next call's counts are made.
				back := make([]int32, total)
				req, err := mpi.Igatherv(c, mine[:counts[me]], back, counts, displs, root)
				if err != nil {
					return fmt.Errorf("call %d: Igatherv: %w", i, err)
				}
				// Meanwhile, the same blocks placed the other way round: other byte displacements.
				flipped := make([]int, n)
				for j := range n {
					flipped[j] = total - displs[j] - counts[j]
				}
				if err := mpi.Allgatherv(c, mine[:counts[me]], got, counts, flipped); err != nil {
					return fmt.Errorf("call %d: second Allgatherv: %w", i, err)
				}
				for j := range n {
					for k := range counts[j] {
						if g, want := got[flipped[j]+k], value(i, root, j, k); g != want {
							return fmt.Errorf("call %d: second Allgatherv: element %d of rank %d's block is %d, want %d", i, k, j, g, want)
						}
					}
				}
				if _, err := req.Wait(); err != nil {
					return fmt.Errorf("call %d: Igatherv: %w", i, err)
				}
				if me == root && !slices.Equal(back, all) {
					return fmt.Errorf("call %d: Igatherv: got %v, want %v", i, back, all)
				}
			}
			return nil
		})
	}
}
