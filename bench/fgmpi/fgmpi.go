package fgmpi

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Bounds of the flags: maxSize keeps the twin's int counts and the pools in
// memory; maxN keeps the closed-form product exact in float64 (see product)
// and the matrices within a few GiB.
const (
	maxSize = 64 << 20
	maxN    = 8192
)

// config is one run's flags, the same as the C twin's.
type config struct {
	bench string // collocated or cannon
	// collocated
	size  int // message bytes
	iters int // timed round trips
	pool  int // bytes of each of a rank's two buffer pools
	// cannon
	n     int // matrix order
	procs int // the layout's procs (O), checked against the job
	reps  int // timed multiplies
}

// onlyFor names the bench each specific flag belongs to, so that a flag of
// the other one is refused rather than silently ignored.
var onlyFor = map[string]string{
	"size": "collocated", "iters": "collocated", "pool": "collocated",
	"n": "cannon", "procs": "cannon", "reps": "cannon",
}

// parse reads a run's flags; every error names the flag at fault.
func parse(args []string) (config, error) {
	var cf config
	fs := bench.Flags("fgmpi")
	fs.StringVar(&cf.bench, "bench", "collocated", "collocated or cannon")
	fs.IntVar(&cf.size, "size", 8, "collocated: message bytes")
	fs.IntVar(&cf.iters, "iters", 1000, "collocated: timed round trips")
	fs.IntVar(&cf.pool, "pool", 32<<20, "collocated: bytes of each buffer pool messages are picked from")
	fs.IntVar(&cf.n, "n", 1024, "cannon: matrix order")
	fs.IntVar(&cf.procs, "procs", 1, "cannon: the job's procs (FG-MPI's O)")
	fs.IntVar(&cf.reps, "reps", 1, "cannon: timed multiplies")
	if err := bench.Parse(fs, args); err != nil {
		return cf, err
	}
	if cf.bench != "collocated" && cf.bench != "cannon" {
		return cf, fmt.Errorf("fgmpi: -bench %q: want collocated or cannon", cf.bench)
	}
	var wrong error
	fs.Visit(func(f *flag.Flag) {
		if b, ok := onlyFor[f.Name]; ok && b != cf.bench && wrong == nil {
			wrong = fmt.Errorf("fgmpi: -%s is a flag of -bench %s, not of %s", f.Name, b, cf.bench)
		}
	})
	if wrong != nil {
		return cf, wrong
	}
	switch {
	case cf.size < 1 || cf.size > maxSize:
		return cf, fmt.Errorf("fgmpi: -size %d: want 1 to %d bytes", cf.size, maxSize)
	case cf.iters < 1:
		return cf, fmt.Errorf("fgmpi: -iters %d: want at least 1", cf.iters)
	case cf.pool < 1 || cf.pool > 1<<30:
		return cf, fmt.Errorf("fgmpi: -pool %d: want 1 to %d bytes", cf.pool, 1<<30)
	case cf.n < 1 || cf.n > maxN:
		return cf, fmt.Errorf("fgmpi: -n %d: want a matrix order of 1 to %d", cf.n, maxN)
	case cf.procs < 1:
		return cf, fmt.Errorf("fgmpi: -procs %d: want at least 1", cf.procs)
	case cf.reps < 1:
		return cf, fmt.Errorf("fgmpi: -reps %d: want at least 1", cf.reps)
	}
	return cf, nil
}

// run is the suite's Body with its output given: it checks the job against
// the flags, runs the bench, and rank 0 writes the result lines to out.
func run(c *mpi.Comm, args []string, out io.Writer) error {
	cf, err := parse(args)
	if err != nil {
		return err
	}
	perProc, err := ranksPerProc(c)
	if err != nil {
		return err
	}
	if cf.bench == "collocated" {
		if c.Size() != 2 || perProc != 2 {
			return fmt.Errorf("fgmpi: collocated needs 2 ranks in one proc, the job has %d in procs of %d", c.Size(), perProc)
		}
		return collocated(c, cf, out)
	}
	q := gridSide(c.Size())
	switch {
	case q == 0:
		return fmt.Errorf("fgmpi: cannon needs a square number of ranks, the job has %d", c.Size())
	case cf.n%q != 0:
		return fmt.Errorf("fgmpi: -n %d: cannon on %dx%d ranks needs an order divisible by %d", cf.n, q, q, q)
	case c.Size() != cf.procs*perProc:
		return fmt.Errorf("fgmpi: -procs %d: the job's %d ranks are in procs of %d, so %d procs",
			cf.procs, c.Size(), perProc, c.Size()/perProc)
	}
	return cannon(c, cf, q, out)
}

// ranksPerProc is the ranks every proc of the job hosts, an error when the
// procs differ (the rows claim P ranks in each of O procs).
func ranksPerProc(c *mpi.Comm) (int, error) {
	local, err := c.SplitType(mpi.SplitProc, c.Rank())
	if err != nil {
		return 0, err
	}
	lo, hi := []int{local.Size()}, []int{local.Size()}
	err = errors.Join(local.Free(), mpi.Allreduce(c, nil, lo, mpi.Min), mpi.Allreduce(c, nil, hi, mpi.Max))
	if err != nil {
		return 0, err
	}
	if lo[0] != hi[0] {
		return 0, fmt.Errorf("fgmpi: the job's procs host from %d to %d ranks; want the same in each", lo[0], hi[0])
	}
	return lo[0], nil
}

// gridSide is q when ranks is q*q, else 0.
func gridSide(ranks int) int {
	q := 0
	for (q+1)*(q+1) <= ranks {
		q++
	}
	if q*q != ranks {
		return 0
	}
	return q
}

// itoa shortens the row fields' conversions.
func itoa(v int) string { return strconv.Itoa(v) }
