package coll

import (
	"fmt"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// step runs the i-th collective of a run, rooted at root when the collective has a
// root, and checks what it can of the result in O(Size()) time, so that a broken
// collective fails the run instead of producing a fast figure.
type step func(i, root int) error

// collective is one operation the suite measures.
type collective struct {
	rooted bool // takes a root (-root applies)
	// reduces marks a reduction: its elements are float64, so -size must be a
	// positive multiple of 8; the others move bytes.
	reduces bool
	// build prepares rank c.Rank()'s buffers for m elements per block (bytes or
	// float64s) and returns its step.
	build func(c *mpi.Comm, m int) step
}

// collectives are the measured operations by their -op name, the names the C twin
// takes too.
var collectives = map[string]collective{
	"barrier":              {build: barrier},
	"bcast":                {rooted: true, build: bcast},
	"reduce":               {rooted: true, reduces: true, build: reduce},
	"allreduce":            {reduces: true, build: allreduce},
	"gather":               {rooted: true, build: gather(false)},
	"gatherv":              {rooted: true, build: gather(true)},
	"scatter":              {rooted: true, build: scatter(false)},
	"scatterv":             {rooted: true, build: scatter(true)},
	"allgather":            {build: allgather(false)},
	"allgatherv":           {build: allgather(true)},
	"alltoall":             {build: alltoall(false)},
	"alltoallv":            {build: alltoall(true)},
	"reduce_scatter_block": {reduces: true, build: reduceScatterBlock},
	"scan":                 {reduces: true, build: scan(false)},
	"exscan":               {reduces: true, build: scan(true)},
}

// mark is the byte rank (or block) j contributes: never 0, so a cleared byte
// that stays cleared is caught.
func mark(j int) byte { return byte(j%255 + 1) }

// stamp is the byte a broadcast root writes for iteration i; it changes every
// iteration, so a stale buffer is caught.
func stamp(i int) byte { return mark(i) }

// tri is 1 + 2 + ... + k, the sum of the values ranks 0..k-1 contribute.
func tri(k int) float64 { return float64(k * (k + 1) / 2) }

// wrong is the error of a result check: the rank, the collective and the element.
func wrong(c *mpi.Comm, what string, at int, got, want any) error {
	return fmt.Errorf("coll: rank %d: %s: element %d is %v, want %v", c.Rank(), what, at, got, want)
}

// clearBlocks zeroes the first and last byte of each of the n blocks of m bytes of buf.
func clearBlocks(buf []byte, n, m int) {
	for j := range n {
		buf[j*m], buf[j*m+m-1] = 0, 0
	}
}

// checkBlocks checks that block j of the n blocks of m bytes of buf starts and
// ends with mark(j*stride + base), as the C twin's check_blocks does (with a
// function for the mark instead, the checks of an 8-byte Bcast of 4 ranks took a
// fifth of its time).
func checkBlocks(c *mpi.Comm, what string, buf []byte, n, m, stride, base int) error {
	for j := range n {
		w := mark(j*stride + base)
		for _, at := range [2]int{j * m, j*m + m - 1} {
			if buf[at] != w {
				return wrong(c, what, at, buf[at], w)
			}
		}
	}
	return nil
}

// checkEnds checks that the first and last element of v are want.
func checkEnds(c *mpi.Comm, what string, v []float64, want float64) error {
	for _, at := range []int{0, len(v) - 1} {
		if v[at] != want {
			return wrong(c, what, at, v[at], want)
		}
	}
	return nil
}

// filled returns m elements of v.
func filled[T byte | float64](m int, v T) []T {
	s := bench.Buffer[T](m)
	for i := range s {
		s[i] = v
	}
	return s
}

// blocked returns n blocks of m bytes, block j filled with v(j).
func blocked(n, m int, v func(j int) byte) []byte {
	s := bench.Buffer[byte](n * m)[:0]
	for j := range n {
		s = append(s, filled(m, v(j))...)
	}
	return s
}

// even returns the counts and displacements of n blocks of m elements laid end
// to end, the v-variants' arguments for the layout of the plain collectives.
func even(n, m int) (counts, displs []int) {
	counts, displs = make([]int, n), make([]int, n)
	for j := range n {
		counts[j], displs[j] = m, j*m
	}
	return counts, displs
}

func barrier(c *mpi.Comm, _ int) step {
	return func(int, int) error { return c.Barrier() }
}

func bcast(c *mpi.Comm, m int) step {
	buf := bench.Buffer[byte](m)
	return func(i, root int) error {
		if c.Rank() == root {
			buf[0], buf[m-1] = stamp(i), stamp(i)
		}
		if err := mpi.Bcast(c, buf, root); err != nil {
			return err
		}
		return checkBlocks(c, "bcast", buf, 1, m, 0, i)
	}
}

// Every reduction sums float64s: rank r contributes r+1 in every element.

func reduce(c *mpi.Comm, m int) step {
	send, recv := filled(m, float64(c.Rank()+1)), bench.Buffer[float64](m)
	return func(_, root int) error {
		recv[0], recv[m-1] = 0, 0
		if err := mpi.Reduce(c, send, recv, mpi.Sum, root); err != nil || c.Rank() != root {
			return err
		}
		return checkEnds(c, "reduce", recv, tri(c.Size()))
	}
}

func allreduce(c *mpi.Comm, m int) step {
	send, recv := filled(m, float64(c.Rank()+1)), bench.Buffer[float64](m)
	return func(int, int) error {
		recv[0], recv[m-1] = 0, 0
		if err := mpi.Allreduce(c, send, recv, mpi.Sum); err != nil {
			return err
		}
		return checkEnds(c, "allreduce", recv, tri(c.Size()))
	}
}

func reduceScatterBlock(c *mpi.Comm, m int) step {
	send, recv := filled(c.Size()*m, float64(c.Rank()+1)), bench.Buffer[float64](m)
	return func(int, int) error {
		recv[0], recv[m-1] = 0, 0
		if err := mpi.ReduceScatterBlock(c, send, recv, mpi.Sum); err != nil {
			return err
		}
		return checkEnds(c, "reduce_scatter_block", recv, tri(c.Size()))
	}
}

// scan builds Scan, or Exscan when exclusive; rank 0's Exscan result is
// undefined and goes unchecked.
func scan(exclusive bool) func(c *mpi.Comm, m int) step {
	return func(c *mpi.Comm, m int) step {
		r := c.Rank()
		send, recv := filled(m, float64(r+1)), bench.Buffer[float64](m)
		return func(int, int) error {
			recv[0], recv[m-1] = 0, 0
			if !exclusive {
				if err := mpi.Scan(c, send, recv, mpi.Sum); err != nil {
					return err
				}
				return checkEnds(c, "scan", recv, tri(r+1))
			}
			if err := mpi.Exscan(c, send, recv, mpi.Sum); err != nil || r == 0 {
				return err
			}
			return checkEnds(c, "exscan", recv, tri(r))
		}
	}
}

// The data movers send m bytes per block: rank r's send block is mark(r), block j
// of a root's scatter buffer mark(j), and block d of rank s's alltoall buffer
// mark(s*Size()+d). Each builder makes the plain collective, or its v-variant
// with the same blocks when v.

func gather(v bool) func(c *mpi.Comm, m int) step {
	return func(c *mpi.Comm, m int) step {
		n := c.Size()
		send, recv := filled(m, mark(c.Rank())), bench.Buffer[byte](n*m)
		counts, displs := even(n, m)
		return func(_, root int) error {
			clearBlocks(recv, n, m)
			var err error
			if v {
				err = mpi.Gatherv(c, send, recv, counts, displs, root)
			} else {
				err = mpi.Gather(c, send, recv, root)
			}
			if err != nil || c.Rank() != root {
				return err
			}
			return checkBlocks(c, "gather", recv, n, m, 1, 0)
		}
	}
}

func scatter(v bool) func(c *mpi.Comm, m int) step {
	return func(c *mpi.Comm, m int) step {
		n := c.Size()
		send, recv := blocked(n, m, mark), bench.Buffer[byte](m)
		counts, displs := even(n, m)
		return func(_, root int) error {
			clearBlocks(recv, 1, m)
			var err error
			if v {
				err = mpi.Scatterv(c, send, counts, displs, recv, root)
			} else {
				err = mpi.Scatter(c, send, recv, root)
			}
			if err != nil {
				return err
			}
			return checkBlocks(c, "scatter", recv, 1, m, 0, c.Rank())
		}
	}
}

func allgather(v bool) func(c *mpi.Comm, m int) step {
	return func(c *mpi.Comm, m int) step {
		n := c.Size()
		send, recv := filled(m, mark(c.Rank())), bench.Buffer[byte](n*m)
		counts, displs := even(n, m)
		return func(int, int) error {
			clearBlocks(recv, n, m)
			var err error
			if v {
				err = mpi.Allgatherv(c, send, recv, counts, displs)
			} else {
				err = mpi.Allgather(c, send, recv)
			}
			if err != nil {
				return err
			}
			return checkBlocks(c, "allgather", recv, n, m, 1, 0)
		}
	}
}

func alltoall(v bool) func(c *mpi.Comm, m int) step {
	return func(c *mpi.Comm, m int) step {
		n, r := c.Size(), c.Rank()
		send := blocked(n, m, func(d int) byte { return mark(r*n + d) })
		recv := bench.Buffer[byte](n * m)
		counts, displs := even(n, m)
		return func(int, int) error {
			clearBlocks(recv, n, m)
			var err error
			if v {
				err = mpi.Alltoallv(c, send, counts, displs, recv, counts, displs)
			} else {
				err = mpi.Alltoall(c, send, recv)
			}
			if err != nil {
				return err
			}
			return checkBlocks(c, "alltoall", recv, n, m, n, r)
		}
	}
}
