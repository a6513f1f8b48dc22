package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	twins "github.com/weft-mpi/weft/bench"
	"github.com/weft-mpi/weft/bench/cluster"
	"github.com/weft-mpi/weft/bench/coll"
	"github.com/weft-mpi/weft/bench/fgmpi"
	"github.com/weft-mpi/weft/bench/kernels"
	"github.com/weft-mpi/weft/bench/p2p"
	"github.com/weft-mpi/weft/bench/threads"
	"github.com/weft-mpi/weft/internal/bench"
)

// suites are the suites weft bench knows, in the order "all" runs them: one
// line each.
var suites = []bench.Suite{
	p2p.Suite,
	threads.Suite,
	coll.Suite,
	fgmpi.Suite,
	kernels.Suite,
	cluster.Suite,
	p2p.EagerSweep,
}

const benchUsage = `Usage: weft bench SUITE... | all [options]
       weft bench list

Runs benchmark suites: Weft beside its C MPI twins (bench/peers, built with
mpicc.mpich and mpicc.openmpi when present), interleaved test by test, round
after round, each run in a fresh process. Results go to --out: SUITE.json
(every raw line), SUITE.md (the table of medians, weft over the best peer) and
SVG plots. Absent or failed peers are reported, never skipped silently.

Options:
  --quick          few, short tests: a smoke test, its figures not for quoting
  --rounds N       rounds of every test (default 3, or 1 with --quick)
  --out DIR        where results go (default ./weft-bench)
  --doc FILE       also replace each suite's section of FILE, between
                   <!-- bench:SUITE:begin --> and <!-- bench:SUITE:end -->
  --peers LIST     peers to run: mpich,openmpi (default) or none
  --timeout D      limit of one run of one implementation (default 2m)
  --quiet D        before each test, pause 1 s to measure the CPU others use and
                   wait, up to D, while it is 10% or more (default 0: never wait)

Exit status: 0 when every run of Weft succeeded (a peer's failure is reported,
not fatal), 1 when one did not, 2 for bad usage, 130 when interrupted (SIGINT
or SIGTERM end the run in progress first). See docs/benchmarks.md.
`

// benchOptions are weft bench's command line.
type benchOptions struct {
	suites  []bench.Suite
	quick   bool
	rounds  int
	out     string
	doc     string
	peers   []string
	timeout time.Duration
	quiet   time.Duration
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "list" {
		for _, s := range suites {
			fmt.Fprintf(stdout, "%-10s %s\n", s.Name, s.Title)
		}
		return 0
	}
	o, err := parseBench(args)
	if code, done := settled("bench", err, benchUsage, "weft bench SUITE... | all [options]", stdout, stderr); done {
		return code
	}
	// Runs are process groups of their own, out of reach of a terminal's
	// Ctrl-C: a signal here ends the run in progress, then weft bench.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cancel, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-sigs:
			close(cancel)
		case <-finished:
		}
	}()
	code := 0
	for _, s := range o.suites {
		res, err := bench.RunSuite(s, bench.Options{
			Quick: o.quick, Rounds: o.rounds, Timeout: o.timeout, Peers: o.peers, Quiet: o.quiet, Cancel: cancel,
			Twins: twins.Peers, Command: "weft bench " + strings.Join(args, " "), Progress: stderr,
		})
		if errors.Is(err, bench.ErrInterrupted) {
			fmt.Fprintf(stderr, "weft bench %s: interrupted; nothing written\n", s.Name)
			return 130
		}
		if err != nil {
			fmt.Fprintf(stderr, "weft bench %s: %v\n", s.Name, err)
			return 1
		}
		files, err := res.Write(o.out)
		if err == nil && o.doc != "" {
			err = res.UpdateDoc(o.doc, o.out)
			files = append(files, o.doc)
		}
		if err != nil {
			fmt.Fprintf(stderr, "weft bench %s: writing results: %v\n", s.Name, err)
			return 1
		}
		fmt.Fprintln(stdout, res.Markdown(o.out, nil))
		fmt.Fprintf(stderr, "weft bench %s: wrote %s\n", s.Name, strings.Join(files, ", "))
		if n := res.WeftFailures(); n > 0 {
			fmt.Fprintf(stderr, "weft bench %s: %d run(s) of Weft did not succeed\n", s.Name, n)
			code = 1
		}
	}
	return code
}

// parseBench reads weft bench's command line: suite names and options in any
// order.
func parseBench(args []string) (benchOptions, error) {
	o := benchOptions{}
	fs := flag.NewFlagSet("weft bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.quick, "quick", false, "")
	fs.IntVar(&o.rounds, "rounds", 0, "")
	fs.StringVar(&o.out, "out", "weft-bench", "")
	fs.StringVar(&o.doc, "doc", "", "")
	peers := fs.String("peers", "mpich,openmpi", "")
	fs.DurationVar(&o.timeout, "timeout", bench.DefaultTimeout, "")
	fs.DurationVar(&o.quiet, "quiet", 0, "")
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, err
		}
		if fs.NArg() == 0 {
			break
		}
		names, args = append(names, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(names) == 0:
		return o, errors.New("no suite given (weft bench list shows them)")
	case o.rounds < 0 || (o.rounds == 0 && isSet(fs, "rounds")):
		return o, fmt.Errorf("--rounds %d: want at least 1", o.rounds)
	case o.timeout <= 0:
		return o, fmt.Errorf("--timeout %v: want a positive duration", o.timeout)
	case o.quiet < 0:
		return o, fmt.Errorf("--quiet %v: want a duration of 0 or more", o.quiet)
	case o.out == "":
		return o, errors.New("--out: want a directory")
	}
	if *peers != "none" {
		o.peers = []string{}
		for _, p := range strings.Split(*peers, ",") {
			if p = strings.TrimSpace(p); p != "" {
				o.peers = append(o.peers, p)
			}
		}
		for _, p := range o.peers {
			if !slices.ContainsFunc(bench.DefaultPeers, func(s bench.PeerSpec) bool { return s.Name == p }) {
				return o, fmt.Errorf("--peers: unknown peer %q (want mpich, openmpi or none)", p)
			}
		}
	} else {
		o.peers = []string{}
	}
	for _, n := range names {
		if n == "all" {
			o.suites = append(o.suites, suites...)
			continue
		}
		s, ok := findSuite(n)
		if !ok {
			return o, fmt.Errorf("unknown suite %q (weft bench list shows them)", n)
		}
		o.suites = append(o.suites, s)
	}
	return o, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func findSuite(name string) (bench.Suite, bool) {
	for _, s := range suites {
		if s.Name == name {
			return s, true
		}
	}
	return bench.Suite{}, false
}
