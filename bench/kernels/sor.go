package kernels

import (
	"math"

	"github.com/weft-mpi/weft/mpi"
)

// sor is red-black successive over-relaxation of Laplace's equation on a
// square grid of n x n interior points, split by blocks of rows, with a halo
// row above and below each block that Sendrecv refreshes before each colour's
// half-sweep (Stricker et al.'s SOR: a 5-point stencil, neighbours only).
//
// The run is checked exactly, not against a second run: the grid starts as
// e(x, y) = x^2 - y^2 + xy, which the 5-point stencil leaves unchanged, plus
// phi = sin(pi x) sin(2 pi y), whose average over the four neighbours is
// mu * phi. The red points' share of phi maps to the black points' and back,
// so after k sweeps the grid is e + a_k phi on red points and e + b_k phi on
// black ones, for two scalars that the check iterates alongside.
type sor struct {
	comm      *mpi.Comm
	n, iters  int
	lo, rows  int       // this rank's first interior row (from 1) and their count
	u         []float64 // rows+2 rows of n+2: the halo above, the rows, the halo below
	up, down  int       // the neighbouring ranks, or ProcNull at the grid's edges
	mu, omega float64
}

// Red-black SOR's constants: omega, and the flops of one point's update,
// (1-omega) u + omega/4 (4 neighbours): 3 additions, 2 products, 1 addition.
const (
	sorOmega = 1.5
	sorFlops = 6
)

// Tags of the halo exchange: rows going up, rows going down.
const (
	tagUp = 1 + iota
	tagDown
)

func newSOR(c *mpi.Comm, cfg config) instance {
	n, p, r := cfg.n, c.Size(), c.Rank()
	lo, hi := blockRows(n, p, r)
	s := &sor{comm: c, n: n, iters: cfg.iters, lo: lo + 1, rows: hi - lo,
		u: make([]float64, (hi-lo+2)*(n+2)), up: r - 1, down: r + 1, omega: sorOmega}
	if r == 0 {
		s.up = mpi.ProcNull
	}
	if r == p-1 {
		s.down = mpi.ProcNull
	}
	h := 1 / float64(n+1)
	s.mu = (math.Cos(math.Pi*h) + math.Cos(2*math.Pi*h)) / 2
	return s
}

// exact is the harmonic part of the grid at row i, column j (from 0, the
// boundary's); mode is the part SOR damps.
func (s *sor) exact(i, j int) float64 {
	h := 1 / float64(s.n+1)
	x, y := float64(i)*h, float64(j)*h
	return x*x - y*y + x*y
}

func (s *sor) mode(i, j int) float64 {
	h := 1 / float64(s.n+1)
	return math.Sin(math.Pi*float64(i)*h) * math.Sin(2*math.Pi*float64(j)*h)
}

func (s *sor) reset() {
	w := s.n + 2
	for l := range s.rows + 2 {
		i := s.lo - 1 + l
		for j := range w {
			s.u[l*w+j] = s.exact(i, j)
			if i > 0 && i <= s.n && j > 0 && j <= s.n {
				s.u[l*w+j] += s.mode(i, j)
			}
		}
	}
}

func (s *sor) run() error {
	c1, c2 := 1-s.omega, s.omega/4
	for range s.iters {
		for colour := range 2 {
			if err := s.exchange(); err != nil {
				return err
			}
			relax(s.u, s.n+2, s.lo, colour, c1, c2)
		}
	}
	return nil
}

// exchange sends the first row up and the last down, and fills the halos
// from the neighbours' (the edges' halos are the fixed boundary).
func (s *sor) exchange() error {
	w := s.n + 2
	first, last := s.u[w:2*w], s.u[s.rows*w:(s.rows+1)*w]
	above, below := s.u[:w], s.u[(s.rows+1)*w:]
	if _, err := mpi.Sendrecv(s.comm, first, s.up, tagUp, below, s.down, tagUp); err != nil {
		return err
	}
	_, err := mpi.Sendrecv(s.comm, last, s.down, tagDown, above, s.up, tagDown)
	return err
}

// relax updates the points of one colour (colour 0, red: row + column even)
// in the rows of u between its halos; u is w wide and its first row below the
// halo is the grid's row lo.
func relax(u []float64, w, lo, colour int, c1, c2 float64) {
	for l := 1; l < len(u)/w-1; l++ {
		above, mid, below := u[(l-1)*w:l*w], u[l*w:(l+1)*w], u[(l+1)*w:(l+2)*w]
		for j := 1 + (lo+l+colour)%2; j < w-1; j += 2 {
			mid[j] = c1*mid[j] + c2*(above[j]+below[j]+mid[j-1]+mid[j+1])
		}
	}
}

// check compares this rank's rows with e + a_k phi (red) and e + b_k phi (black).
func (s *sor) check() error {
	a, b := 1.0, 1.0
	for range s.iters {
		a = (1-s.omega)*a + s.omega*s.mu*b
		b = (1-s.omega)*b + s.omega*s.mu*a
	}
	w := s.n + 2
	return tooFar("sor: u", s.comm.Rank(), s.u[w:(s.rows+1)*w], s.lo*w, func(at int) float64 {
		i, j := at/w, at%w
		if j == 0 || j == w-1 {
			return s.exact(i, j)
		}
		if (i+j)%2 == 0 {
			return s.exact(i, j) + a*s.mode(i, j)
		}
		return s.exact(i, j) + b*s.mode(i, j)
	}, 1e-9)
}
