package coll

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// comboRun is how many consecutive collectives the combo pattern keeps a root
// before it moves to the next rank (TMPI's "a couple of times").
const comboRun = 4

// growCap bounds how many times longer one calibration round may be than the one
// before, so that a noisy short round cannot start a very long one.
const growCap = 100

// maxSize bounds -size so that the twin's int counts of n blocks cannot overflow.
const maxSize = 1 << 24

// config is a run's flags.
type config struct {
	op    string
	size  int     // bytes per block (-size)
	root  string  // same, rotate or combo
	procs int     // the layout's procs: a label, the B of TMPI's AxB
	iters int     // timed iterations; 0: calibrate to reach secs
	secs  float64 // the least timed duration when calibrating (-time)
}

// parse reads a run's flags; every error names the flag at fault.
func parse(args []string) (config, error) {
	var cfg config
	fs := bench.Flags("coll")
	fs.StringVar(&cfg.op, "op", "barrier", "the collective")
	fs.IntVar(&cfg.size, "size", 8, "bytes per rank's buffer or block")
	fs.StringVar(&cfg.root, "root", "same", "root pattern of rooted collectives: same, rotate or combo")
	fs.IntVar(&cfg.procs, "procs", 1, "the layout's procs (a label: TMPI's B in AxB)")
	fs.IntVar(&cfg.iters, "iters", 0, "timed iterations (0: as many as -time needs)")
	fs.Float64Var(&cfg.secs, "time", 0.2, "least timed seconds when -iters is 0")
	if err := bench.Parse(fs, args); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	col, ok := collectives[cfg.op]
	switch {
	case !ok:
		return cfg, fmt.Errorf("coll: -op %q is not one of %v", cfg.op, opNames())
	case !slices.Contains([]string{"same", "rotate", "combo"}, cfg.root):
		return cfg, fmt.Errorf("coll: -root %q: want same, rotate or combo", cfg.root)
	case !col.rooted && cfg.root != "same":
		return cfg, fmt.Errorf("coll: -root %s: %s has no root", cfg.root, cfg.op)
	case cfg.procs < 1:
		return cfg, fmt.Errorf("coll: -procs %d: want at least 1", cfg.procs)
	case cfg.iters < 0:
		return cfg, fmt.Errorf("coll: -iters %d: want 0 (calibrate) or more", cfg.iters)
	case cfg.iters == 0 && !(cfg.secs > 0):
		return cfg, fmt.Errorf("coll: -time %v: want a positive number of seconds", cfg.secs)
	}
	switch {
	case cfg.op == "barrier" && set["size"]:
		return cfg, errors.New("coll: -size: barrier moves no data")
	case cfg.op == "barrier":
		cfg.size = 0
	case col.reduces && (cfg.size < 8 || cfg.size%8 != 0):
		return cfg, fmt.Errorf("coll: -size %d: %s reduces float64s, want a positive multiple of 8 bytes", cfg.size, cfg.op)
	case cfg.size < 1 || cfg.size > maxSize:
		return cfg, fmt.Errorf("coll: -size %d: want 1 to %d bytes", cfg.size, maxSize)
	}
	return cfg, nil
}

func opNames() []string {
	names := make([]string, 0, len(collectives))
	for name := range collectives {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// rootOf is the root of the i-th collective of a job of n ranks.
func rootOf(pattern string, i, n int) int {
	switch pattern {
	case "rotate":
		return i % n
	case "combo":
		return i / comboRun % n
	}
	return 0
}

// body is the suite's Body: it times the collective -op and rank 0 prints the
// mean time of one, the slowest rank's (see About).
func body(c *mpi.Comm, args []string) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	n := c.Size()
	if n%cfg.procs != 0 {
		return fmt.Errorf("coll: -procs %d does not divide the job's %d ranks", cfg.procs, n)
	}
	col := collectives[cfg.op]
	m := cfg.size
	if col.reduces {
		m /= 8
	}
	run := col.build(c, m)
	per, err := measure(c, cfg, func(i int) error { return run(i, rootOf(cfg.root, i, n)) })
	if err != nil || c.Rank() != 0 {
		return err
	}
	root := cfg.root
	if !col.rooted {
		root = "none"
	}
	bench.Report(os.Stdout, "coll", "time", per*1e6, "us",
		"op", cfg.op, "ranks", strconv.Itoa(n), "procs", strconv.Itoa(cfg.procs),
		"root", root, "size", strconv.Itoa(cfg.size))
	return nil
}

// measure runs rounds of the collective, each started by a barrier and timed on
// every rank, and returns the seconds per collective of the slowest rank in the
// last round. The first round (a tenth of -iters, or one collective) is a
// warm-up; then -iters when given, else rounds sized from the last one until a
// round lasts -time. Every rank takes the same decisions, from the same maximum.
// The iteration count runs on across rounds, so that roots keep their pattern.
func measure(c *mpi.Comm, cfg config, run func(i int) error) (float64, error) {
	n, i := max(cfg.iters/10, 1), 0
	for round := 0; ; round++ {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		start := mpi.Wtime()
		for range n {
			if err := run(i); err != nil {
				return 0, err
			}
			i++
		}
		took := []float64{mpi.Wtime() - start}
		if err := mpi.Allreduce(c, nil, took, mpi.Max); err != nil {
			return 0, err
		}
		switch {
		case round > 0 && (cfg.iters > 0 || took[0] >= cfg.secs):
			return took[0] / float64(n), nil
		case cfg.iters > 0:
			n = cfg.iters
		default: // aim 20% past -time; a round too short to measure grows by growCap
			n = int(min(float64(n)*cfg.secs/took[0]*1.2, float64(n*growCap))) + 1
		}
	}
}
