package kernels

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/weft-mpi/weft/mpi"
)

// fft2d is the forward 2D DFT of an n x n complex128 array split by blocks of
// rows, Stricker et al.'s transpose kernel: 1D FFTs of the local rows, a
// transpose by Alltoall (each rank sends a distinct block to every other), 1D
// FFTs of the rows again (the original columns), and a second transpose back
// to the rows. The input is a sum of plane waves, whose spectrum is known
// exactly: n^2 times each wave's amplitude at its frequency, zero elsewhere.
type fft2d struct {
	comm       *mpi.Comm
	n, m, lo   int            // the side, rows per rank, this rank's first row
	a          []complex128   // this rank's m rows
	send, recv []complex128   // the transpose's blocks, m x m per rank
	w          []complex128   // w[t] = exp(-2 pi i t / n)
	waves      [fftWaves]wave // the input
}

// wave is the input's plane wave amp * exp(2 pi i (u j + v k) / n).
type wave struct {
	u, v int
	amp  complex128
}

// fftWaves is how many plane waves make the input: more than one, so that a
// transform that moves or merges frequencies is caught.
const fftWaves = 3

// fftFit is fft2d's fit: radix 2, and equal blocks for Alltoall.
func fftFit(n, p int) error {
	if n&(n-1) != 0 {
		return fmt.Errorf("-n %d: fft2d's radix-2 FFT wants a power of two", n)
	}
	if n%p != 0 {
		return fmt.Errorf("-n %d: fft2d's transpose moves equal blocks, so the ranks must divide it (%d ranks)", n, p)
	}
	return nil
}

// fftFlops is the conventional 5 N log2 N of a complex FFT of N = n^2 points.
func fftFlops(cfg config) float64 {
	nn := float64(cfg.n) * float64(cfg.n)
	return 5 * nn * math.Log2(nn)
}

func newFFT2D(c *mpi.Comm, cfg config) instance {
	n, p := cfg.n, c.Size()
	m := n / p
	f := &fft2d{comm: c, n: n, m: m, lo: c.Rank() * m, a: make([]complex128, m*n),
		send: make([]complex128, m*n), recv: make([]complex128, m*n), w: make([]complex128, n)}
	for t := range n {
		s, co := math.Sincos(2 * math.Pi * float64(t) / float64(n))
		f.w[t] = complex(co, -s)
	}
	for i := range f.waves {
		f.waves[i] = wave{
			u:   int((uniform(seedWaves, i, 0) + 1) / 2 * float64(n)),
			v:   int((uniform(seedWaves, i, 1) + 1) / 2 * float64(n)),
			amp: complex(uniform(seedWaves, i, 2), uniform(seedWaves, i, 3)),
		}
	}
	return f
}

func (f *fft2d) reset() {
	n := f.n
	for i := range f.m {
		for k := range n {
			s := complex128(0)
			for _, wv := range f.waves {
				t := (wv.u*(f.lo+i) + wv.v*k) % n
				s += wv.amp * complex(real(f.w[t]), -imag(f.w[t]))
			}
			f.a[i*n+k] = s
		}
	}
}

func (f *fft2d) run() error {
	for range 2 {
		for i := range f.m {
			fft(f.a[i*f.n:(i+1)*f.n], f.w)
		}
		if err := f.transpose(); err != nil {
			return err
		}
	}
	return nil
}

// transpose makes this rank's rows the columns lo..lo+m of the array: block d
// of send is the rows' columns of rank d, and block s of recv, transposed,
// lands at columns s*m.. of the new rows.
func (f *fft2d) transpose() error {
	n, m := f.n, f.m
	for d := range f.comm.Size() {
		for i := range m {
			copy(f.send[(d*m+i)*m:(d*m+i+1)*m], f.a[i*n+d*m:i*n+d*m+m])
		}
	}
	if err := mpi.Alltoall(f.comm, f.send, f.recv); err != nil {
		return err
	}
	for s := range f.comm.Size() {
		for i := range m {
			blk := f.recv[(s*m+i)*m : (s*m+i+1)*m]
			for j, v := range blk {
				f.a[j*n+s*m+i] = v
			}
		}
	}
	return nil
}

// fft is the in-place radix-2 decimation-in-time FFT of x, len(x) a power of
// two dividing len(w), with twiddles w[t] = exp(-2 pi i t / len(w)).
func fft(x, w []complex128) {
	n := len(x)
	shift := 64 - bits.Len(uint(n)-1)
	for i := range n {
		if j := int(bits.Reverse64(uint64(i)) >> shift); i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		half, step := size/2, len(w)/size
		for start := 0; start < n; start += size {
			lo, hi := x[start:start+half], x[start+half:start+size]
			for k := range lo {
				t := w[k*step] * hi[k]
				hi[k] = lo[k] - t
				lo[k] += t
			}
		}
	}
}

// check compares every element of this rank's rows of the spectrum with the
// waves' amplitudes times n^2.
func (f *fft2d) check() error {
	nn := float64(f.n) * float64(f.n)
	return tooFar("fft2d: X", f.comm.Rank(), f.a, f.lo*f.n, func(i int) complex128 {
		s := complex128(0)
		for _, wv := range f.waves {
			if i == wv.u*f.n+wv.v {
				s += wv.amp * complex(nn, 0)
			}
		}
		return s
	}, 1e-9*nn)
}
