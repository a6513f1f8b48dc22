package kernels

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// maxN bounds -n at Stricker's 4096 x 4096: the twin counts a rank's share
// of an array in ints, and Weft's one process holds every rank's (fft2d:
// three n x n complex128 arrays, 768 MiB at 4096).
const maxN = 4096

// config is a run's flags, the C twin's too.
type config struct {
	kernel string
	n      int // the order of the matrices, the side of the FFT array or of the grid's interior
	iters  int // sor's sweeps
	reps   int // timed runs; the first also warms up
}

// instance is one rank's share of one kernel's problem. Its methods are
// collective: every rank calls each of them in turn.
type instance interface {
	// reset (untimed) restores the input, so that every run computes the same thing.
	reset()
	// run is the timed kernel.
	run() error
	// check (untimed) verifies what run computed and returns an error naming
	// the element at fault, so that a wrong result fails the run.
	check() error
}

// kernel is one of the suite's kernels.
type kernel struct {
	// fit says why n does not suit p ranks, or returns nil.
	fit func(n, p int) error
	// setup builds rank c's share of the problem of cfg.
	setup func(c *mpi.Comm, cfg config) instance
	// flops is the floating-point operations of one run, the conventional count.
	flops func(cfg config) float64
}

// kernels are the suite's kernels by their -kernel name.
var kernels = map[string]kernel{
	"matmul": {fit: rowsFit, setup: newMatmul, flops: func(cf config) float64 { return 2 * cube(cf.n) }},
	"gauss":  {fit: rowsFit, setup: newGauss, flops: func(cf config) float64 { return 2 * cube(cf.n) / 3 }},
	"fft2d":  {fit: fftFit, setup: newFFT2D, flops: fftFlops},
	"sor": {fit: rowsFit, setup: newSOR, flops: func(cf config) float64 {
		return sorFlops * float64(cf.n) * float64(cf.n) * float64(cf.iters)
	}},
}

func cube(n int) float64 { return float64(n) * float64(n) * float64(n) }

func kernelNames() []string { return slices.Sorted(maps.Keys(kernels)) }

// rowsFit is the fit of the kernels that split rows unevenly: every rank needs one.
func rowsFit(n, p int) error {
	if n < p {
		return fmt.Errorf("-n %d: want at least one row per rank (%d ranks)", n, p)
	}
	return nil
}

// parse reads a run's flags; every error names the flag at fault.
func parse(args []string) (config, error) {
	var cfg config
	fs := bench.Flags("kernels")
	fs.StringVar(&cfg.kernel, "kernel", "", fmt.Sprintf("the kernel: %v", kernelNames()))
	fs.IntVar(&cfg.n, "n", 256, "matrix order, FFT side or grid side")
	fs.IntVar(&cfg.iters, "iters", 10, "sor: red-black sweeps per run")
	fs.IntVar(&cfg.reps, "reps", 2, "timed runs, of which the fastest counts")
	if err := bench.Parse(fs, args); err != nil {
		return cfg, err
	}
	iters := false
	fs.Visit(func(f *flag.Flag) { iters = iters || f.Name == "iters" })
	_, ok := kernels[cfg.kernel]
	switch {
	case !ok:
		return cfg, fmt.Errorf("kernels: -kernel %q is not one of %v", cfg.kernel, kernelNames())
	case cfg.n < 2 || cfg.n > maxN:
		return cfg, fmt.Errorf("kernels: -n %d: want 2 to %d", cfg.n, maxN)
	case iters && cfg.kernel != "sor":
		return cfg, fmt.Errorf("kernels: -iters: only sor iterates, not %s", cfg.kernel)
	case cfg.iters < 1:
		return cfg, fmt.Errorf("kernels: -iters %d: want at least 1", cfg.iters)
	case cfg.reps < 1:
		return cfg, fmt.Errorf("kernels: -reps %d: want at least 1", cfg.reps)
	}
	return cfg, nil
}

// row is the fields of cfg's result lines on p ranks before the metric.
func (cfg config) row(p int) []string {
	r := []string{"kernel", cfg.kernel, "ranks", strconv.Itoa(p), "n", strconv.Itoa(cfg.n)}
	if cfg.kernel == "sor" {
		r = append(r, "iters", strconv.Itoa(cfg.iters))
	}
	return r
}

// run is the suite's Body, printing to out: -reps timed runs of the kernel,
// each from the same input and each checked; rank 0 prints the fastest. There
// is no separate warm-up, because with 8 MPICH processes on 2 cores one run of
// gauss takes seconds: the first timed run warms up, and the full tests ask
// for two.
func run(c *mpi.Comm, args []string, out io.Writer) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	k := kernels[cfg.kernel]
	if err := k.fit(cfg.n, c.Size()); err != nil {
		return fmt.Errorf("kernels: %s: %w", cfg.kernel, err)
	}
	in := k.setup(c, cfg)
	best := math.Inf(1)
	for range cfg.reps {
		in.reset()
		secs, err := timed(c, in.run)
		if err != nil {
			return err
		}
		if err := in.check(); err != nil {
			return err
		}
		best = min(best, secs)
	}
	if c.Rank() != 0 {
		return nil
	}
	row := cfg.row(c.Size())
	bench.Report(out, "kernels", "time", best*1e3, "ms", row...)
	bench.Report(out, "kernels", "mflops", k.flops(cfg)/best/1e6, "MFLOPS", row...)
	if cfg.kernel == "sor" {
		bench.Report(out, "kernels", "iter", best/float64(cfg.iters)*1e6, "us", row...)
	}
	return nil
}

// timed runs f after a barrier and returns the seconds of the slowest rank.
func timed(c *mpi.Comm, f func() error) (float64, error) {
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	start := mpi.Wtime()
	if err := f(); err != nil {
		return 0, err
	}
	took := []float64{mpi.Wtime() - start}
	if err := mpi.Allreduce(c, nil, took, mpi.Max); err != nil {
		return 0, err
	}
	return took[0], nil
}
