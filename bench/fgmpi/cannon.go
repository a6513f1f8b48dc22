package fgmpi

import (
	"fmt"
	"io"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Tags of Cannon's two streams of blocks.
const (
	tagA = 1
	tagB = 2
)

// The matrices are A[i][k] = i+k and B[k][j] = k-2j, whose product has the
// closed form in product. Every entry of every partial sum is an integer of
// magnitude below 4n^3 < 2^53, so the product is exact in float64 and each
// entry can be compared for equality. The form is neither symmetric nor
// blind to pairing the wrong blocks: C[i][j] moves with both i and j, and
// pairing A's column block k with B's row block k' != k changes the sum of
// k*k' (the rearrangement inequality).
func entryA(i, k int) float64 { return float64(i + k) }
func entryB(k, j int) float64 { return float64(k - 2*j) }

// product is C[i][j] = sum over k of (i+k)(k-2j) = S2 + (i-2j)S1 - 2nij, with
// S1 = n(n-1)/2 and S2 = (n-1)n(2n-1)/6.
func product(n, i, j int) float64 {
	s1, s2 := n*(n-1)/2, (n-1)*n*(2*n-1)/6
	return float64(s2 + (i-2*j)*s1 - 2*n*i*j)
}

// grid is one rank's place in Cannon's q x q grid of b x b blocks.
type grid struct {
	c             *mpi.Comm
	n, q, b       int
	row, col      int
	a, bm, cm, tm []float64 // its blocks of A, B, C, and room for the next A or B
}

func newGrid(c *mpi.Comm, n, q int) *grid {
	b := n / q
	g := &grid{c: c, n: n, q: q, b: b, row: c.Rank() / q, col: c.Rank() % q}
	g.a, g.bm, g.cm, g.tm = make([]float64, b*b), make([]float64, b*b), make([]float64, b*b), make([]float64, b*b)
	for i := range g.tm {
		g.tm[i] = 0 // touch its pages before the timing
	}
	return g
}

// at is the rank at grid position (row, col), both taken modulo q.
func (g *grid) at(row, col int) int {
	q := g.q
	return (row%q+q)%q*q + (col%q+q)%q
}

// fill sets this rank's blocks of A and B from their formulas and clears C.
func (g *grid) fill() {
	b := g.b
	for ii := range b {
		for kk := range b {
			g.a[ii*b+kk] = entryA(g.row*b+ii, g.col*b+kk)
			g.bm[ii*b+kk] = entryB(g.row*b+ii, g.col*b+kk)
			g.cm[ii*b+kk] = 0
		}
	}
}

// shift sends *blk to rank dest and puts the block from rank src in its
// place; it does nothing when dest is this rank (then src is too).
func (g *grid) shift(blk *[]float64, dest, src, tag int) error {
	if dest == g.c.Rank() {
		return nil
	}
	st, err := mpi.Sendrecv(g.c, *blk, dest, tag, g.tm, src, tag)
	if err != nil {
		return err
	}
	if got := mpi.GetCount[float64](st); got != len(g.tm) {
		return fmt.Errorf("fgmpi: rank %d: cannon: a block of %d elements from rank %d, want %d", g.c.Rank(), got, src, len(g.tm))
	}
	*blk, g.tm = g.tm, *blk
	return nil
}

// multiply is Cannon's algorithm: skew A's block row i left by i and B's
// block column j up by j, then q times multiply the blocks in hand and pass
// A one step left and B one step up (no pass after the last multiply).
func (g *grid) multiply() error {
	r, c := g.row, g.col
	if err := g.shift(&g.a, g.at(r, c-r), g.at(r, c+r), tagA); err != nil {
		return err
	}
	if err := g.shift(&g.bm, g.at(r-c, c), g.at(r+c, c), tagB); err != nil {
		return err
	}
	for step := range g.q {
		multiplyAdd(g.cm, g.a, g.bm, g.b)
		if step == g.q-1 {
			break
		}
		if err := g.shift(&g.a, g.at(r, c-1), g.at(r, c+1), tagA); err != nil {
			return err
		}
		if err := g.shift(&g.bm, g.at(r-1, c), g.at(r+1, c), tagB); err != nil {
			return err
		}
	}
	return nil
}

// check compares every entry of this rank's block of C with the closed form.
func (g *grid) check() error {
	b := g.b
	for ii := range b {
		for jj := range b {
			i, j := g.row*b+ii, g.col*b+jj
			if got, want := g.cm[ii*b+jj], product(g.n, i, j); got != want {
				return fmt.Errorf("fgmpi: rank %d: cannon: C[%d][%d] is %g, want %g", g.c.Rank(), i, j, got, want)
			}
		}
	}
	return nil
}

// multiplyAdd is c += a*b for b x b row-major blocks: the plain i-k-j loop,
// with no cache blocking of its own (as FG-MPI's Experiment A), so that the
// block size the decomposition chooses is what decides how well the caches
// serve it. The twin's loop is the same.
func multiplyAdd(c, a, bm []float64, b int) {
	for i := range b {
		crow := c[i*b : i*b+b]
		for k, aik := range a[i*b : i*b+b] {
			brow := bm[k*b : k*b+b]
			brow = brow[:len(crow)]
			j := 0
			for ; j+4 <= len(crow); j += 4 {
				crow[j] += aik * brow[j]
				crow[j+1] += aik * brow[j+1]
				crow[j+2] += aik * brow[j+2]
				crow[j+3] += aik * brow[j+3]
			}
			for ; j < len(crow); j++ {
				crow[j] += aik * brow[j]
			}
		}
	}
}

// makespan runs fn between two barriers and returns the slowest rank's time
// from leaving the first to leaving the second. Each rank's time of its own
// fn alone would miss the job's length when ranks outnumber cores: a rank
// scheduled late starts late and finds its blocks waiting.
func makespan(c *mpi.Comm, fn func() error) (float64, error) {
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	start := mpi.Wtime()
	err := fn()
	if err == nil {
		err = c.Barrier()
	}
	took := []float64{mpi.Wtime() - start}
	if err == nil {
		err = mpi.Allreduce(c, nil, took, mpi.Max)
	}
	return took[0], err
}

// cannon times -reps multiplies of order -n on the job's q x q ranks, each
// checked in full, and rank 0 reports the mean time of one (see makespan)
// and its rate (2n^3 flops).
func cannon(c *mpi.Comm, cf config, q int, out io.Writer) error {
	g := newGrid(c, cf.n, q)
	total := 0.0
	for range cf.reps {
		g.fill()
		took, err := makespan(c, g.multiply)
		if err != nil {
			return err
		}
		if err := g.check(); err != nil {
			return err
		}
		total += took
	}
	if c.Rank() != 0 {
		return nil
	}
	secs := total / float64(cf.reps)
	row := []string{"n", itoa(cf.n), "ranks", itoa(c.Size()), "procs", itoa(cf.procs)}
	bench.Report(out, "cannon", "time", secs*1e3, "ms", row...)
	bench.Report(out, "cannon", "rate", 2*float64(cf.n)*float64(cf.n)*float64(cf.n)/secs/1e6, "MFLOPS", row...)
	return nil
}
