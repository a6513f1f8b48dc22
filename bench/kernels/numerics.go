package kernels

import (
	"fmt"
	"math"
)

// The seeds of uniform, one per generated quantity, so that no two quantities
// share values. The C twin uses the same numbers.
const (
	seedA     = 1 // matmul's A, gauss's A
	seedB     = 2 // matmul's B
	seedX     = 3 // matmul's check vector, gauss's known solution
	seedWaves = 4 // fft2d's plane waves
)

// uniform is a deterministic number in [-1, 1) for element (i, j) of quantity
// seed: every rank generates its own share of an input without communication,
// and the C twin generates the same bits (splitmix64's finaliser of the key).
func uniform(seed, i, j int) float64 {
	z := uint64(seed)<<48 ^ uint64(i)<<24 ^ uint64(j)
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)*0x1p-52 - 1
}

// blockRows is the first row and the end of rank r's block when n rows are
// split over p ranks as evenly as they go: the first n%p ranks have one more.
func blockRows(n, p, r int) (lo, hi int) {
	q, extra := n/p, n%p
	lo = r*q + min(r, extra)
	hi = lo + q
	if r < extra {
		hi++
	}
	return lo, hi
}

// blocks is blockRows of every rank: each block's row count and first row,
// times width (elements per row), as the v-collectives take them.
func blocks(n, p, width int) (counts, displs []int) {
	counts, displs = make([]int, p), make([]int, p)
	for r := range p {
		lo, hi := blockRows(n, p, r)
		counts[r], displs[r] = (hi-lo)*width, lo*width
	}
	return counts, displs
}

// tooFar reports the first element of got farther than tol from want(i), as a
// check's error naming the kernel, the rank and the element; first is the
// global index of got[0].
func tooFar[T float64 | complex128](kernel string, rank int, got []T, first int, want func(i int) T, tol float64) error {
	for i, g := range got {
		w := want(first + i)
		if d := absDiff(g, w); !(d <= tol) {
			return fmt.Errorf("kernels: %s: rank %d: element %d is %v, want %v (off by %.3g, tolerance %.3g)",
				kernel, rank, first+i, g, w, d, tol)
		}
	}
	return nil
}

func absDiff[T float64 | complex128](a, b T) float64 {
	switch d := any(a - b).(type) {
	case float64:
		return math.Abs(d)
	case complex128:
		return math.Hypot(real(d), imag(d))
	}
	return math.NaN()
}
