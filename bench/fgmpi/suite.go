// Package fgmpi is the FG-MPI suite of weft bench (Kamal and Wagner's FG-MPI
// paper): the cost of a message between two ranks of one proc set against the
// plain copy it must make (section III-B, Table I), and over-decomposition of
// Cannon's blocked matrix multiply, a fixed matrix on a fixed number of procs
// O with P ranks in each (Tables III-IV). Its C twin, bench/peers/fgmpi.c,
// runs the same with one rank per process.
package fgmpi

import (
	"os"
	"strconv"
	"time"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Suite is the fgmpi suite.
var Suite = bench.Suite{
	Name:  "fgmpi",
	Title: "FG-MPI: collocated messaging cost, over-decomposition of Cannon's multiply",
	About: "collocated (FG-MPI III-B, Table I): two ranks of one proc (the peers: two processes on " +
		"one host) ping-pong messages of size bytes, each sent from and received into a slot picked " +
		"at random from pools of 32 MiB, so that caches do not flatter small messages; message is the " +
		"one-way time, copy the time of a plain copy (Go's copy(), the twin's memcpy) of the same size " +
		"between slots picked the same way, and overhead their difference: what the runtime adds to the " +
		"one copy a collocated message needs. Every message and copy is stamped and checked. " +
		"cannon (FG-MPI Tables III-IV): Cannon's algorithm multiplies two n x n matrices on a q x q grid " +
		"of ranks (square blocks, skew then q multiply-and-shift steps, Sendrecv), with the plain i-k-j " +
		"loop on each block and no cache blocking of its own, so that the block size the decomposition " +
		"picks decides how well the caches serve it. ranks = P x O: Weft runs O procs (procs) of P ranks; " +
		"the peers cannot put several ranks in one process, so they run ranks processes, and only up to " +
		"16 (beyond, their rows are Weft-only). time is one multiply (the mean of -reps), from leaving " +
		"a barrier to leaving the next on the slowest rank; rate is 2n^3 flops over it. A[i][k] = i+k and B[k][j] = k-2j, whose product has a " +
		"closed form that is exact in float64: every entry of C is checked against it.",
	Twin:  "fgmpi.c",
	Tests: tests,
	Body:  func(c *mpi.Comm, args []string) error { return run(c, args, os.Stdout) },
	Plots: []bench.Plot{
		{File: "fgmpi-overhead", Title: "Collocated message minus a plain copy (FG-MPI III-B)", Metric: "overhead",
			X: "size", Where: map[string]string{"bench": "collocated"}, LogX: true, LogY: true},
		{File: "fgmpi-message", Title: "Collocated message, one way (FG-MPI Table I)", Metric: "message",
			X: "size", Where: map[string]string{"bench": "collocated"}, LogX: true, LogY: true},
		{File: "fgmpi-cannon-rate", Title: "Cannon's multiply over-decomposed: rate against ranks = P x O",
			Metric: "rate", X: "ranks", Where: map[string]string{"bench": "cannon"}, Series: []string{"procs"}, LogX: true},
		{File: "fgmpi-cannon-time", Title: "Cannon's multiply over-decomposed: time against ranks = P x O",
			Metric: "time", X: "ranks", Where: map[string]string{"bench": "cannon"}, Series: []string{"procs"}, LogX: true},
	},
}

// peerRanks is the most processes a peer runs: beyond, 2 cores shared by
// busy-polling processes make their figures noise, and starting them slow.
const peerRanks = 16

// tests lists the suite's runs. Round trips move about 512 MiB each way (at
// least 100, at most 20,000); the multiplies are of order 1024 (256 when
// quick), on O = 1 proc and on O = 2 (the cores here, as FG-MPI sets O).
func tests(quick bool) []bench.Test {
	var ts []bench.Test
	sizes := []int{8, 64, 512, 1 << 10, 8 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}
	div, n, reps := 1, 1024, 2
	layouts := [][2]int{{1, 1}, {4, 1}, {16, 1}, {64, 1}, {256, 1}, {1024, 1}, {4, 2}, {16, 2}, {64, 2}, {256, 2}, {1024, 2}}
	if quick {
		sizes, div, n, reps = []int{8, 32 << 10, 1 << 20}, 10, 256, 1
		layouts = [][2]int{{1, 1}, {4, 1}, {64, 1}, {16, 2}}
	}
	for _, s := range sizes {
		iters := min(20000, max(100, (512<<20)/s)) / div
		ts = append(ts, bench.Test{Ranks: 2,
			Args: []string{"-bench", "collocated", "-size", strconv.Itoa(s), "-iters", strconv.Itoa(iters)}})
	}
	for _, l := range layouts {
		ranks, procs := l[0], l[1]
		t := bench.Test{Ranks: ranks, PerProc: ranks / procs, Weft: ranks > peerRanks,
			Args: []string{"-bench", "cannon", "-n", strconv.Itoa(n), "-procs", strconv.Itoa(procs), "-reps", strconv.Itoa(reps)}}
		if ranks >= 256 {
			t.Timeout = 3 * time.Minute
		}
		ts = append(ts, t)
	}
	return ts
}
