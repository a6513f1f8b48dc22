// Package bench runs Weft's benchmark suites beside their C MPI twins, in the
// same invocation, and reports medians and ratios (weft bench).
//
// A suite pairs a Weft body (Go, run by every rank) with an optional C twin in
// bench/peers that takes the same arguments and prints the same result lines,
// so that each figure Weft publishes stands beside the peers' figures from the
// same run. A result line is space-separated key=value pairs:
//
//	bench=pingpong impl=weft size=8 metric=latency value=0.190 unit=us
//
// bench, impl, metric, value and unit are always present; every other key
// (size, pairs, mode, root, ranks, ...) is part of the row the value belongs to.
// The runner files each line under the implementation it ran, whatever impl
// the line names, and ignores every other line of output.
package bench

import (
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// Suite is one family of experiments: its tests and both sides of each.
type Suite struct {
	Name  string // the command line's name for it: p2p, threads, coll, ...
	Title string // the heading of its report
	About string // what its tests measure and how, a paragraph for the report
	Twin  string // the C twin's file name in bench/peers ("" when none)
	// Tests lists the runs, fewer and shorter ones when quick (a smoke test
	// that must finish in seconds; its figures are not for publishing).
	Tests func(quick bool) []Test
	// Body is Weft's side of a test: every rank of the job calls it with the
	// test's Args and prints its result lines (normally rank 0 alone) to
	// stdout with impl=weft.
	Body func(c *mpi.Comm, args []string) error
	// Plots names the curves worth drawing from the suite's result lines.
	Plots []Plot
	// Cluster makes the hosts that the tests with Hosts above 1 run on, once
	// per invocation, before the first such test: hosts is the most any test
	// wants. The runner closes it at the end, also on failure or interrupt.
	// Its error fails every run across hosts, with the error as the reason.
	Cluster func(hosts int) (*Cluster, error)
}

// Cluster is a set of hosts that this machine starts processes on through a
// command (network namespaces, for the cluster suite).
type Cluster struct {
	// Names are the hosts as weft run's --hosts gives them to Rsh's {host};
	// Addrs the same hosts' addresses, which the peers' launchers take as host
	// names (and Exec maps back).
	Names, Addrs []string
	Rsh          string // weft run's --rsh, with {host}
	LauncherAddr string // weft run's --launcher-addr: this machine on the hosts' network
	// Exec is an ssh-like program: Exec [-options] ADDR WORDS... runs the
	// words, joined by spaces, with sh on the host of address ADDR (Hydra's
	// -launcher-exec, Open MPI's plm_rsh_agent).
	Exec   string
	Subnet string // the hosts' network in CIDR form, for the peers' choice of interface
	// Env holds NAME=VALUE settings for Weft's runs across the hosts.
	Env []string
	// Across is the launch line of peer (mpich, openmpi), up to the rank
	// count, for one process on each host of c, or why that peer cannot run
	// across these hosts. Its leading NAME=VALUE words go to the environment.
	// perHost is the processes each host runs.
	Across func(peer string, c *Cluster, perHost int) ([]string, error)
	Note   string       // what a reader of the progress should know of the hosts
	Close  func() error // removes the hosts
}

// first is c limited to its first n hosts.
func (c *Cluster) first(n int) *Cluster {
	d := *c
	d.Names, d.Addrs = c.Names[:n], c.Addrs[:n]
	return &d
}

// Test is one run of the Weft body and of each peer's twin with the same
// arguments and the same number of ranks.
type Test struct {
	Args  []string // flags given alike to the Weft body and the C twin
	Ranks int      // ranks in the job
	// PerProc is Weft's ranks per OS process: 0 or Ranks runs the whole job
	// in one process without a launcher; otherwise Ranks/PerProc processes
	// are started by weft run. The peers always run Ranks processes.
	PerProc int
	// Hosts, when above 1, spreads the processes over that many hosts of the
	// suite's Cluster, one process per host: Weft's Ranks/PerProc processes
	// (which must be Hosts) through weft run --hosts and --rsh, each peer's
	// Ranks through its PeerSpec.Across.
	Hosts int
	// Twin is this test's C twin in bench/peers when it is not the suite's
	// (a suite that reuses other suites' tests).
	Twin string
	// Weft restricts the test to Weft (no twin has it, or the peers cannot
	// run it here, for example 65,536 ranks); the report says so.
	Weft bool
	// Timeout bounds one run of one implementation (0: the runner's default).
	Timeout time.Duration
	// Fields are key, value pairs the runner puts before the printed row
	// fields of every result line of this test, so that runs with alike Args
	// land in rows of their own (path=tcp beside path=shm, limit=65536).
	Fields []string
	// Env holds NAME=VALUE settings for Weft's side of the test (a tunable
	// under study, for example WEFT_NET_EAGER_LIMIT=16384).
	Env []string
	// TCP starts the peers on their TCP paths, as if each process were on a
	// host of its own (MPICH: UCX over TCP, no shared memory; Open MPI: the
	// tcp BTL). Weft's side says so in Env (WEFT_NET_UNIX=false): its procs of
	// one host otherwise talk over Unix domain sockets.
	TCP bool
	// Lines is how many result lines one run prints. A peer's run that has
	// printed them and has not exited 3 s later is ended and its results are
	// kept (MPICH with UCX over TCP hangs in MPI_Finalize from 6 processes
	// on, openucx/ucx#8738). Weft's runs, and every run when 0, must exit by
	// themselves.
	Lines int
}

// Plot is one figure drawn from result lines: metric against the numeric
// field X, a curve per implementation and per distinct value of the Series
// fields, for lines whose fields match Where.
type Plot struct {
	File   string            // the SVG's base name, for example "p2p-latency"
	Title  string            // its caption
	Metric string            // the metric on the Y axis, for example "latency"
	X      string            // the field on the X axis, for example "size" or "ranks"
	Where  map[string]string // only lines with these fields
	Series []string          // fields that split the curves beyond impl
	LogX   bool              // a logarithmic X axis (message sizes, rank counts)
	LogY   bool              // a logarithmic Y axis
	// Only keeps the plot's lines out of the table: a curve of many points
	// (one per iteration, say) that a table would drown in.
	Only bool
}

// tableLines are the lines that go into the suite's table: all but those of
// its plots marked Only.
func (s Suite) tableLines(lines []Line) []Line {
	var kept []Line
next:
	for _, l := range lines {
		for _, p := range s.Plots {
			if p.Only && l.Metric == p.Metric && l.matches(p.Where) {
				continue next
			}
		}
		kept = append(kept, l)
	}
	return kept
}
