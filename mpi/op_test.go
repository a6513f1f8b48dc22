package mpi_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// locValue is the value of element i of rank r's pairs in the MinLoc and MaxLoc
// checks: few distinct values, so that many ranks tie.
func locValue(r, i int) int { return (r*5 + i*3) % 4 }

// locIndex is the index of element i of rank r's pairs: not in rank order, so that
// the lowest index is not always the lowest rank's.
func locIndex(r, i, n int) int { return (n-r)*10 + i%3 }

// wantLoc is the reference of MinLoc (want -1) or MaxLoc (+1) over ranks lo..hi of
// element i: the least (greatest) value, and among the ranks holding it the lowest index.
func wantLoc(lo, hi, i, n, want int) (int, int) {
	bv, bi := locValue(lo, i), locIndex(lo, i, n)
	for r := lo + 1; r <= hi; r++ {
		v, x := locValue(r, i), locIndex(r, i, n)
		if (want < 0 && v < bv) || (want > 0 && v > bv) || (v == bv && x < bi) {
			bv, bi = v, x
		}
	}
	return bv, bi
}

// checkLoc runs MinLoc and MaxLoc through Reduce (rotating roots), Allreduce (in
// place too), Scan, ReduceScatterBlock and Iallreduce on pairs of type P, made by
// mk and read by get, and compares with wantLoc.
func checkLoc[P mpi.LocPair](t *testing.T, mk func(v, i int) P, get func(P) (int, int)) {
	for _, n := range icollRanks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			mustRun(t, n, func(c *mpi.Comm) error { return locSuite(c, mk, get) })
		})
	}
}

// checkLocPairs is locSuite on Pair[float64, int], for the suite across procs.
func checkLocPairs(c *mpi.Comm) error {
	return locSuite(c, func(v, i int) mpi.Pair[float64, int] { return mpi.Pair[float64, int]{Value: float64(v), Index: i} },
		func(p mpi.Pair[float64, int]) (int, int) { return int(p.Value), p.Index })
}

// locSuite is checkLoc's work on one communicator.
func locSuite[P mpi.LocPair](c *mpi.Comm, mk func(v, i int) P, get func(P) (int, int)) error {
	me, n := c.Rank(), c.Size()
	for _, m := range []int{0, 1, 7, 1000} {
		mine := make([]P, n*m)
		for i := range mine {
			mine[i] = mk(locValue(me, i), locIndex(me, i, n))
		}
		for _, o := range []struct {
			op   mpi.Op
			want int
		}{{mpi.MinLoc, -1}, {mpi.MaxLoc, +1}} {
			check := func(what string, got []P, lo, hi, off int) error {
				for i, p := range got {
					v, x := get(p)
					if wv, wx := wantLoc(lo, hi, off+i, n, o.want); v != wv || x != wx {
						return fmt.Errorf("%s %v of %d: element %d is (%d, %d), want (%d, %d)", what, o.op, m, i, v, x, wv, wx)
					}
				}
				return nil
			}
			root := m % n
			got := make([]P, n*m)
			if err := mpi.Reduce(c, mine, got, o.op, root); err != nil {
				return err
			}
			if me == root {
				if err := check("Reduce", got, 0, n-1, 0); err != nil {
					return err
				}
			}
			if err := mpi.Allreduce(c, mine, got, o.op); err != nil {
				return err
			}
			if err := check("Allreduce", got, 0, n-1, 0); err != nil {
				return err
			}
			inPlace := append([]P(nil), mine...)
			if err := mpi.Allreduce(c, nil, inPlace, o.op); err != nil {
				return err
			}
			if err := check("Allreduce in place", inPlace, 0, n-1, 0); err != nil {
				return err
			}
			if err := mpi.Scan(c, mine, got, o.op); err != nil {
				return err
			}
			if err := check("Scan", got, 0, me, 0); err != nil {
				return err
			}
			block := make([]P, m)
			if err := mpi.ReduceScatterBlock(c, mine, block, o.op); err != nil {
				return err
			}
			if err := check("ReduceScatterBlock", block, 0, n-1, me*m); err != nil {
				return err
			}
			req, err := mpi.Iallreduce(c, mine, got, o.op)
			if err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
			if err := check("Iallreduce", got, 0, n-1, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestMinLocMaxLoc(t *testing.T) {
	t.Run("float64,int", func(t *testing.T) {
		for _, n := range icollRanks {
			t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) { mustRun(t, n, checkLocPairs) })
		}
	})
	t.Run("float32,int32", func(t *testing.T) { // MPI_FLOAT_INT
		checkLoc(t, func(v, i int) mpi.Pair[float32, int32] {
			return mpi.Pair[float32, int32]{Value: float32(v), Index: int32(i)}
		},
			func(p mpi.Pair[float32, int32]) (int, int) { return int(p.Value), int(p.Index) })
	})
	t.Run("int32,int32", func(t *testing.T) { // MPI_2INT
		checkLoc(t, func(v, i int) mpi.Pair[int32, int32] { return mpi.Pair[int32, int32]{Value: int32(v), Index: int32(i)} },
			func(p mpi.Pair[int32, int32]) (int, int) { return int(p.Value), int(p.Index) })
	})
	t.Run("int16,int32", func(t *testing.T) { // MPI_SHORT_INT
		checkLoc(t, func(v, i int) mpi.Pair[int16, int32] { return mpi.Pair[int16, int32]{Value: int16(v), Index: int32(i)} },
			func(p mpi.Pair[int16, int32]) (int, int) { return int(p.Value), int(p.Index) })
	})
}

// TestLocNaN: MinLoc orders values as cmp.Compare does, a NaN below every number;
// MaxLoc then never picks a NaN over a number.
func TestLocNaN(t *testing.T) {
	mustRun(t, 2, func(c *mpi.Comm) error {
		mine := []mpi.Pair[float64, int]{{Value: 1, Index: 5}}
		if c.Rank() == 1 {
			mine[0] = mpi.Pair[float64, int]{Value: math.NaN(), Index: 7}
		}
		lo, hi := make([]mpi.Pair[float64, int], 1), make([]mpi.Pair[float64, int], 1)
		if err := mpi.Allreduce(c, mine, lo, mpi.MinLoc); err != nil {
			return err
		}
		if err := mpi.Allreduce(c, mine, hi, mpi.MaxLoc); err != nil {
			return err
		}
		if !math.IsNaN(lo[0].Value) || lo[0].Index != 7 || hi[0] != (mpi.Pair[float64, int]{Value: 1, Index: 5}) {
			return fmt.Errorf("MinLoc %v (want NaN at 7), MaxLoc %v (want 1 at 5)", lo[0], hi[0])
		}
		return nil
	})
}

// TestOpDomains: MinLoc and MaxLoc only on pairs, the other predefined ops never on
// pairs (ErrOp, naming the op and the type); a NewOp on pairs works.
func TestOpDomains(t *testing.T) {
	mustRun(t, 2, func(c *mpi.Comm) error {
		pairs := []mpi.Pair[int32, int32]{{Value: int32(c.Rank()), Index: 1}}
		got := make([]mpi.Pair[int32, int32], 1)
		for _, op := range []mpi.Op{mpi.Sum, mpi.Prod, mpi.Min, mpi.Max, mpi.Land, mpi.Band} {
			err := mpi.Allreduce(c, pairs, got, op)
			if e, werr := wantClass(err, mpi.ErrOp); werr != nil {
				return fmt.Errorf("%v on pairs: %w", op, werr)
			} else if e.Op != "Allreduce" || e.Rank != c.Rank() {
				return fmt.Errorf("%v on pairs: %v", op, e)
			}
		}
		for _, op := range []mpi.Op{mpi.MinLoc, mpi.MaxLoc} {
			if err := mpi.Allreduce(c, []float64{1}, make([]float64, 1), op); !errors.Is(err, mpi.ErrOp) {
				return fmt.Errorf("%v on float64: %v, want ErrOp", op, err)
			}
			if _, err := mpi.Ireduce(c, []int{1}, make([]int, 1), op, 0); !errors.Is(err, mpi.ErrOp) {
				return fmt.Errorf("Ireduce %v on int: %v, want ErrOp", op, err)
			}
		}
		// A user op on pairs: the sum of values, the index of rank 0's pair.
		sumv := mpi.NewOp(func(in, inout []mpi.Pair[int32, int32]) {
			for i := range inout {
				inout[i] = mpi.Pair[int32, int32]{Value: in[i].Value + inout[i].Value, Index: in[i].Index}
			}
		}, false)
		pairs[0].Index = int32(10 + c.Rank())
		if err := mpi.Allreduce(c, pairs, got, sumv); err != nil {
			return err
		}
		if got[0] != (mpi.Pair[int32, int32]{Value: 1, Index: 10}) {
			return fmt.Errorf("NewOp on pairs: %v, want {1 10}", got[0])
		}
		if mpi.MinLoc.String() != "MinLoc" || !mpi.MaxLoc.Commutative() {
			return fmt.Errorf("MinLoc is %q, MaxLoc commutative %v", mpi.MinLoc, mpi.MaxLoc.Commutative())
		}
		return nil
	})
}
