// Package kernels is the application kernels suite of weft bench: TMPI's
// macro-benchmarks (Tang and Yang, Figs. 14-15: matrix multiplication and
// Gaussian elimination, MFLOPS against the number of ranks) and Stricker et
// al.'s 2D-FFT (a transpose by all-to-all) and SOR stencil (halo exchange), on
// 1 to 16 ranks in one proc. Every run checks its numerical result, so a
// broken kernel fails instead of looking fast. Its C twin is
// bench/peers/kernels.c.
package kernels

import (
	"os"
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Suite is the kernels suite.
var Suite = bench.Suite{
	Name:  "kernels",
	Title: "Application kernels: TMPI Figs. 14-15, Stricker's 2D-FFT and SOR",
	About: "Four kernels of n x n float64 (complex128 for the FFT) on 1 to 16 ranks, Weft's all " +
		"goroutines of one proc, the peers one process per rank (gauss on 16 ranks is Weft's " +
		"alone: MPICH's 16 polling processes on 2 cores take minutes over its 2n collectives). matmul: C = A B with A and C " +
		"split by blocks of rows and the blocks of B passed round the ring of ranks by " +
		"Isend/Irecv while each is used, 2n^3 flops. gauss: Gaussian elimination with partial " +
		"pivoting of A x = b, rows dealt round-robin, each step an Allreduce (MaxLoc) for the " +
		"pivot and a Bcast of the pivot row, then back substitution on rank 0, 2n^3/3 flops. " +
		"fft2d: forward 2D FFT of rows split by blocks, radix-2 1D FFTs, transposed by Alltoall " +
		"and back, 10 n^2 log2 n flops. sor: iters red-black SOR sweeps (omega 1.5) of a grid " +
		"of n x n interior points split by rows, halo rows swapped by Sendrecv before each " +
		"colour, 6 flops per point update. Inputs are generated on every rank from a hash of " +
		"the indices, the same bits in the twin. Each test makes reps runs of the kernel (the " +
		"first also warms up), each from the same input, started after a barrier and timed by " +
		"the slowest rank (Allreduce of the maximum); time is the fastest and mflops its rate " +
		"(iter, for sor, the time of one sweep). Every run's result is checked: " +
		"matmul by Freivalds' test (C x against A (B x)), gauss against the known solution b " +
		"was built from, fft2d against the exact spectrum of its input (a sum of three plane " +
		"waves), sor against the closed form of red-black SOR of a harmonic function plus an " +
		"eigenmode.",
	Twin:  "kernels.c",
	Tests: tests,
	Body:  func(c *mpi.Comm, args []string) error { return run(c, args, os.Stdout) },
	Plots: plots(),
}

// A plan is one kernel's runs: n (and sor's sweeps) and the rank counts, in
// quick and full runs. Full sizes take 15 to 40 ms a run on one rank here,
// but gauss, which is smaller and stops at 8 ranks for the peers: MPICH's
// processes poll while they wait, so once they outnumber the cores each of
// gauss's 2n collectives waits for descheduled ranks (about 25 ms on 8 ranks
// on 2 cores), and 16 ranks would take minutes a run; Weft alone runs it on 16.
type plan struct {
	quick, full  int   // n
	iters        int   // sor's sweeps (0: none)
	quickRanks   []int // the quick run's rank counts
	ranks        []int // the full run's
	weftOnlyFrom int   // ranks from which the peers sit out (0: never)
}

var plans = map[string]plan{
	"matmul": {quick: 96, full: 512, quickRanks: []int{1, 3, 4}, ranks: []int{1, 2, 3, 4, 8, 16}},
	"gauss":  {quick: 64, full: 256, quickRanks: []int{1, 3, 4}, ranks: []int{1, 2, 3, 4, 8, 16}, weftOnlyFrom: 16},
	"fft2d":  {quick: 128, full: 1024, quickRanks: []int{1, 2, 4}, ranks: []int{1, 2, 4, 8, 16}},
	"sor":    {quick: 96, full: 1024, iters: 20, quickRanks: []int{1, 3, 4}, ranks: []int{1, 2, 3, 4, 8, 16}},
}

// tests lists each kernel's runs: two reps each when full, one of a small
// problem when quick (a smoke test, and a check of uneven row blocks).
func tests(quick bool) []bench.Test {
	var ts []bench.Test
	for _, k := range kernelNames() {
		pl := plans[k]
		n, reps, ranks := pl.full, "2", pl.ranks
		if quick {
			n, reps, ranks = pl.quick, "1", pl.quickRanks
		}
		for _, p := range ranks {
			args := []string{"-kernel", k, "-n", strconv.Itoa(n), "-reps", reps}
			if pl.iters > 0 {
				args = append(args, "-iters", strconv.Itoa(pl.iters))
			}
			weft := pl.weftOnlyFrom > 0 && p >= pl.weftOnlyFrom
			ts = append(ts, bench.Test{Args: args, Ranks: p, PerProc: p, Weft: weft})
		}
	}
	return ts
}

// plots are TMPI's Fig. 15 for each kernel: MFLOPS against ranks.
func plots() []bench.Plot {
	var ps []bench.Plot
	for _, k := range kernelNames() {
		ps = append(ps, bench.Plot{
			File: "kernels-" + k, Title: k + ": MFLOPS against ranks in one proc", Metric: "mflops", X: "ranks",
			Where: map[string]string{"kernel": k}, Series: []string{"n"}, LogX: true,
		})
	}
	return ps
}
