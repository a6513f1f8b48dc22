package kernels

import (
	"fmt"
	"math"

	"github.com/weft-mpi/weft/mpi"
)

// gauss solves A x = b, n x n, by Gaussian elimination with partial pivoting,
// rows dealt round-robin (row g on rank g mod p) so that the shrinking active
// part stays spread over all ranks. Each step agrees on the pivot row (the
// largest magnitude in the column: Allreduce of MaxLoc), its owner broadcasts
// it (TMPI's GE is Bcast-bound), and every rank eliminates the column from its
// rows not yet used as pivots. Rows stay where they are; rank 0 keeps the
// broadcast pivot rows, the upper triangular system, and substitutes back.
type gauss struct {
	comm  *mpi.Comm
	n     int
	rows  []float64 // this rank's rows g = rank, rank+p, ... of [A | b], n+1 wide
	init  []float64 // the same before elimination
	used  []bool    // which local rows have been pivots
	pivot []float64 // the step's pivot row, n+1 wide
	u     []float64 // rank 0: pivot row k in row k, n+1 wide
	x     []float64 // rank 0: the solution
}

func newGauss(c *mpi.Comm, cfg config) instance {
	n, p, r := cfg.n, c.Size(), c.Rank()
	w := n + 1
	local := (n - r + p - 1) / p
	g := &gauss{comm: c, n: n, init: make([]float64, local*w), rows: make([]float64, local*w),
		used: make([]bool, local), pivot: make([]float64, w)}
	for l := range local {
		row := g.init[l*w : (l+1)*w]
		b := 0.0
		for j := range n {
			row[j] = uniform(seedA, l*p+r, j)
			b += row[j] * known(j)
		}
		row[n] = b
	}
	if r == 0 {
		g.u, g.x = make([]float64, n*w), make([]float64, n)
	}
	return g
}

// known is the solution the right-hand side is built from.
func known(i int) float64 { return uniform(seedX, i, 0) }

func (g *gauss) reset() {
	copy(g.rows, g.init)
	clear(g.used)
}

func (g *gauss) run() error {
	n, p, r, w := g.n, g.comm.Size(), g.comm.Rank(), g.n+1
	best := []mpi.Pair[float64, int32]{{}}
	for k := range n {
		best[0] = mpi.Pair[float64, int32]{Value: -1, Index: 0}
		for l, used := range g.used {
			if v := math.Abs(g.rows[l*w+k]); !used && v > best[0].Value {
				best[0] = mpi.Pair[float64, int32]{Value: v, Index: int32(l*p + r)}
			}
		}
		if err := mpi.Allreduce(g.comm, nil, best, mpi.MaxLoc); err != nil {
			return err
		}
		if best[0].Value == 0 {
			return fmt.Errorf("kernels: gauss: the matrix is singular (column %d)", k)
		}
		piv, owner := g.pivot[k:], int(best[0].Index)%p
		if owner == r {
			l := int(best[0].Index) / p
			copy(piv, g.rows[l*w+k:(l+1)*w])
			g.used[l] = true
		}
		if err := mpi.Bcast(g.comm, piv, owner); err != nil {
			return err
		}
		if g.u != nil {
			copy(g.u[k*w+k:(k+1)*w], piv)
		}
		for l, used := range g.used {
			if !used {
				eliminate(g.rows[l*w+k:(l+1)*w], piv)
			}
		}
	}
	if g.u != nil {
		backSubstitute(g.u, g.x)
	}
	return nil
}

// eliminate subtracts the multiple of pivot row piv that clears row's first
// element; both start at the pivot's column.
func eliminate(row, piv []float64) {
	f := row[0] / piv[0]
	piv = piv[:len(row)]
	for j := 1; j < len(row); j++ {
		row[j] -= f * piv[j]
	}
}

// backSubstitute solves the upper triangular u (n rows of n+1, the last
// column the right-hand side) into x.
func backSubstitute(u, x []float64) {
	n := len(x)
	for k := n - 1; k >= 0; k-- {
		row := u[k*(n+1) : (k+1)*(n+1)]
		s := row[n]
		for j := k + 1; j < n; j++ {
			s -= row[j] * x[j]
		}
		x[k] = s / row[k]
	}
}

// check compares rank 0's solution with the known one.
func (g *gauss) check() error {
	if g.x == nil {
		return nil
	}
	return tooFar("gauss: x", 0, g.x, 0, known, 1e-8)
}
