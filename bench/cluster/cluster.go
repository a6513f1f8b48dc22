// Package cluster is the cluster suite of weft bench: the p2p suite's ping-pong
// and bandwidth and the coll suite's barrier, bcast and allreduce, with one proc
// per host on M hosts emulated by network namespaces joined by a bridge, each
// host's link shaped by tc's token bucket filter (1 Gbit/s by default). Its C
// twins are the p2p and coll suites' (bench/peers/p2p.c and coll.c), started by
// MPICH's Hydra and Open MPI's mpirun through an ssh-like wrapper that enters
// the namespaces.
package cluster

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/weft-mpi/weft/bench/coll"
	"github.com/weft-mpi/weft/bench/p2p"
	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/testnet/netns"
	"github.com/weft-mpi/weft/mpi"
)

// The environment variables that configure the suite (weft bench's own flags
// are the same for every suite).
const (
	EnvHosts = "WEFT_BENCH_HOSTS" // hosts of the collectives' tests, 2 to 16 (default 2)
	EnvRate  = "WEFT_BENCH_RATE"  // each host's link in tc's syntax (default 1gbit; none: unshaped)
	EnvDelay = "WEFT_BENCH_DELAY" // a Go duration: adds Weft-only rows with WEFT_NET_DELAY set to it
)

// Defaults of the settings.
const (
	DefaultHosts = 2
	DefaultRate  = "1gbit"
	maxHosts     = 16
)

// Suite is the cluster suite.
var Suite = bench.Suite{
	Name:  "cluster",
	Title: "Cluster: hosts emulated by network namespaces, links shaped by tc",
	About: "M hosts (" + EnvHosts + ", default 2) are network namespaces on this machine, each with " +
		"a veth pair to one bridge, addresses in an unused 10.77.X.0/24; both ends of each pair carry a " +
		"tc tbf qdisc of " + EnvRate + " (default 1gbit; none: unshaped), so that each host has a " +
		"full-duplex link of that rate. One proc per host: Weft through weft run --hosts NS,... " +
		"--rsh 'ip netns exec {host}' --launcher-addr BRIDGE; MPICH through mpiexec.mpich -launcher ssh " +
		"-launcher-exec WRAPPER -hosts ADDR:P,... (UCX over TCP on eth0); Open MPI through mpirun " +
		"--mca plm_rsh_agent WRAPPER --host ADDR:P,... with btl_tcp_if_include and oob_tcp_if_include " +
		"the subnet (no vader: the namespaces share one host name, so their orteds would share one session directory and crash). WRAPPER maps a host's address to its namespace and runs the command there as ssh " +
		"would. p2p rows are the p2p suite's pingpong and bw between 2 hosts (see p2p); coll rows the " +
		"coll suite's barrier, bcast and allreduce on M hosts of 4 ranks (Weft: procs of 4 ranks; the " +
		"peers: 4 processes per host), procs=M (see coll). This kernel has no sch_netem, so the links " +
		"add no latency of their own (a few µs through veth and bridge); " + EnvDelay + "=D adds " +
		"Weft-only rows with WEFT_NET_DELAY=D, Weft's in-process one-way delay on every message between " +
		"procs (TMPI's Fast Ethernet: about 100us). The hosts share this machine's CPUs, so Weft's " +
		"procs get each host's share (GOMAXPROCS = CPUs / M, and with more hosts than CPUs the " +
		"crowded-host poll budget, WEFT_NET_SPIN=20µs), as Weft gives procs of one host; the peers' " +
		"processes are single-threaded. Needs root and iproute2 (ip, tc); without them " +
		"every run fails saying so. The namespaces and bridge are removed at the end, also on failure " +
		"or interrupt.",
	Twin:    "p2p.c",
	Tests:   tests,
	Body:    body,
	Cluster: makeCluster,
	Plots: []bench.Plot{
		{File: "cluster-latency", Title: "Ping-pong between two hosts", Metric: "latency", X: "size",
			Where: map[string]string{"bench": "pingpong"}, Series: []string{"delay"}, LogX: true, LogY: true},
		{File: "cluster-bandwidth", Title: "Bandwidth between two hosts", Metric: "bandwidth", X: "size",
			Where: map[string]string{"bench": "bw"}, LogX: true},
	},
}

// settings are the suite's configuration from the environment.
type settings struct {
	hosts int
	rate  string // "" when unshaped
	delay time.Duration
}

// readSettings reads the environment; every error names its variable.
func readSettings() (settings, error) {
	st := settings{hosts: DefaultHosts, rate: DefaultRate}
	if v := os.Getenv(EnvHosts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > maxHosts {
			return st, fmt.Errorf("%s=%q: want a number of hosts from 2 to %d", EnvHosts, v, maxHosts)
		}
		st.hosts = n
	}
	if v := os.Getenv(EnvRate); v == "none" {
		st.rate = ""
	} else if v != "" {
		if _, err := netns.ParseRate(v); err != nil {
			return st, fmt.Errorf("%s=%q: %w (or none)", EnvRate, v, err)
		}
		st.rate = v
	}
	if v := os.Getenv(EnvDelay); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Second {
			return st, fmt.Errorf("%s=%q: want a duration above 0 and up to 1s, such as 100us", EnvDelay, v)
		}
		st.delay = d
	}
	return st, nil
}

// rateField is the rate as the rows show it.
func (st settings) rateField() string {
	if st.rate == "" {
		return "none"
	}
	return st.rate
}

// tests lists the runs. A bad environment gives the default tests, and
// makeCluster's error, the reason, fails every run.
func tests(quick bool) []bench.Test {
	st, err := readSettings()
	if err != nil {
		st = settings{hosts: DefaultHosts, rate: DefaultRate}
	}
	var ts []bench.Test
	div := 1
	if quick {
		div = 10
	}
	pick := func(full, short []int) []int {
		if quick {
			return short
		}
		return full
	}
	fields := func(bench string) []string {
		return []string{"suite", bench, "hosts", "2", "rate", st.rateField()}
	}
	p2pTest := func(name string, size, iters int) bench.Test {
		t := bench.Test{Args: []string{"-bench", name, "-iters", strconv.Itoa(max(iters/div, 2)), "-size", strconv.Itoa(size)},
			Ranks: 2, PerProc: 1, Hosts: 2, Fields: fields("p2p"), Lines: 1, Timeout: 20 * time.Second}
		if name == "pingpong" {
			t.Lines = 2
		}
		return t
	}
	for _, s := range pick([]int{8, 512, 4 << 10, 64 << 10, 1 << 20, 4 << 20}, []int{8}) {
		ts = append(ts, p2pTest("pingpong", s, roundTrips(s, st)))
	}
	for _, s := range pick([]int{64 << 10, 1 << 20}, []int{64 << 10}) {
		// About 256 MiB each, 40 MiB quick: windows of 64 messages.
		ts = append(ts, p2pTest("bw", s, max(256<<20/(64*s), 4)))
	}
	secs := "0.1"
	if quick {
		secs = "0.01"
	}
	m := strconv.Itoa(st.hosts)
	collTest := func(op string, size int) bench.Test {
		args := []string{"-op", op}
		if op != "barrier" {
			args = append(args, "-size", strconv.Itoa(size))
		}
		if op == "bcast" {
			args = append(args, "-root", "same")
		}
		args = append(args, "-procs", m, "-time", secs)
		return bench.Test{Args: args, Ranks: 4 * st.hosts, PerProc: 4, Hosts: st.hosts, Twin: "coll.c",
			Fields: []string{"suite", "coll", "hosts", m, "rate", st.rateField()}, Lines: 1, Timeout: 20 * time.Second}
	}
	ts = append(ts, collTest("barrier", 0), collTest("allreduce", 8))
	if !quick {
		ts = append(ts, collTest("bcast", 8), collTest("bcast", 64<<10), collTest("allreduce", 64<<10))
	}
	if st.delay > 0 {
		for _, s := range pick([]int{8, 4 << 10, 64 << 10}, []int{8}) {
			t := p2pTest("pingpong", s, min(roundTrips(s, st), int(2*time.Second/st.delay)))
			t.Weft, t.Env = true, []string{"WEFT_NET_DELAY=" + st.delay.String()}
			t.Fields = append(t.Fields, "delay", st.delay.String())
			ts = append(ts, t)
		}
	}
	return ts
}

// roundTrips is a ping-pong's iterations for size: 20,000 for small messages,
// about a second's worth at the rate for large ones.
func roundTrips(size int, st settings) int {
	bits := 1e9
	if st.rate != "" {
		bits, _ = netns.ParseRate(st.rate)
	}
	return min(20_000, max(20, int(bits/8/float64(2*max(size, 1)))))
}

// body is Weft's side: the p2p suite's body for -bench, the coll suite's for
// -op.
func body(c *mpi.Comm, args []string) error {
	switch {
	case len(args) > 0 && args[0] == "-bench":
		return p2p.Suite.Body(c, args)
	case len(args) > 0 && args[0] == "-op":
		return coll.Suite.Body(c, args)
	}
	return fmt.Errorf("cluster: want the p2p suite's -bench or the coll suite's -op first, got %q", args)
}
