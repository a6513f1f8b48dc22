package kernels

import "github.com/weft-mpi/weft/mpi"

// matmul is C = A B of n x n float64s, A, B and C split by blocks of rows. Rank
// r owns rows lo..hi of A and of C and block r of B's rows; the blocks of B go
// round the ring of ranks (each passed on while it is being used) so that each
// rank meets all of them, multiplies its rows of A by it, and never holds more
// than two. TMPI's MM moves its matrices by point-to-point messages too.
type matmul struct {
	comm       *mpi.Comm
	n, lo, hi  int
	a, c       []float64 // this rank's rows of A and C
	own        []float64 // this rank's block of B
	cur, next  []float64 // the block of B in use and the one arriving, room for the largest
	counts     []int     // elements of each rank's block (of B's rows, or of y in check)
	displs     []int     // first element of each rank's block
	x, y, ownY []float64 // check: the vector x, B x, and this rank's part of B x
}

// matmulTag is the tag of the blocks of B going round.
const matmulTag = 1

func newMatmul(c *mpi.Comm, cfg config) instance {
	n, p := cfg.n, c.Size()
	m := &matmul{comm: c, n: n}
	m.lo, m.hi = blockRows(n, p, c.Rank())
	rows := m.hi - m.lo
	m.counts, m.displs = blocks(n, p, n)
	most := (n + p - 1) / p * n
	m.a, m.c, m.own = make([]float64, rows*n), make([]float64, rows*n), make([]float64, rows*n)
	m.cur, m.next = make([]float64, most), make([]float64, most)
	for i := range rows {
		for j := range n {
			m.a[i*n+j] = uniform(seedA, m.lo+i, j)
			m.own[i*n+j] = uniform(seedB, m.lo+i, j)
		}
	}
	m.x, m.y, m.ownY = make([]float64, n), make([]float64, n), make([]float64, rows)
	for j := range n {
		m.x[j] = uniform(seedX, j, 0)
	}
	return m
}

func (m *matmul) reset() {
	clear(m.c)
	copy(m.cur, m.own)
}

func (m *matmul) run() error {
	p, r, n := m.comm.Size(), m.comm.Rank(), m.n
	for s := range p {
		k := (r - s + p) % p // whose block of B cur holds
		var reqs []*mpi.Request
		if s < p-1 {
			from := (k - 1 + p) % p // the block the left neighbour holds now
			rq, err := mpi.Irecv(m.comm, m.next[:m.counts[from]], (r-1+p)%p, matmulTag)
			if err != nil {
				return err
			}
			sq, err := mpi.Isend(m.comm, m.cur[:m.counts[k]], (r+1)%p, matmulTag)
			if err != nil {
				return err
			}
			reqs = []*mpi.Request{rq, sq}
		}
		multiplyAdd(m.c, m.a, m.cur[:m.counts[k]], n, m.displs[k]/n)
		if _, err := mpi.Waitall(reqs...); err != nil {
			return err
		}
		m.cur, m.next = m.next, m.cur
	}
	return nil
}

// multiplyAdd adds A[:, first:first+rows] b to c, for b the rows first..
// of B; a and c have n columns. The i-k-j order streams rows of b and c.
func multiplyAdd(c, a, b []float64, n, first int) {
	rows := len(b) / n
	for i := range len(c) / n {
		ci := c[i*n : (i+1)*n]
		for k := range rows {
			aik := a[i*n+first+k]
			bk := b[k*n : (k+1)*n]
			bk = bk[:len(ci)]
			for j := range ci {
				ci[j] += aik * bk[j]
			}
		}
	}
}

// check is Freivalds': C x must equal A (B x) for the random x, computed from
// this rank's rows of A and C and from all of B x, which the ranks assemble from
// their own blocks of B. Its cost is O(n^2 / p), against the O(n^3 / p) it checks.
func (m *matmul) check() error {
	n := m.n
	for i := range m.ownY {
		m.ownY[i] = dot(m.own[i*n:(i+1)*n], m.x)
	}
	ys, yd := blocks(n, m.comm.Size(), 1)
	if err := mpi.Allgatherv(m.comm, m.ownY, m.y, ys, yd); err != nil {
		return err
	}
	cx := make([]float64, m.hi-m.lo)
	for i := range cx {
		cx[i] = dot(m.c[i*n:(i+1)*n], m.x)
	}
	tol := 1e-11 * float64(n) * float64(n)
	return tooFar("matmul: C x", m.comm.Rank(), cx, m.lo, func(i int) float64 {
		return dot(m.a[(i-m.lo)*n:(i-m.lo+1)*n], m.y)
	}, tol)
}

func dot(u, v []float64) float64 {
	s := 0.0
	for i, x := range u {
		s += x * v[i]
	}
	return s
}
