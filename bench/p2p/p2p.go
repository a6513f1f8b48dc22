// Package p2p is the point-to-point suite of weft bench: OSU-style latency,
// bandwidth, bidirectional bandwidth and message rate, and TMPI's one-way
// send-recv, between ranks of one process and between processes over TCP.
// Its C twin, bench/peers/p2p.c, takes the same flags and prints the same
// result lines, so that the runner sets Weft beside MPICH and Open MPI
// measured in the same run.
package p2p

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// window is how many messages bw and bibw keep in flight, as OSU's tests do.
const window = 64

// Suite is the p2p suite.
var Suite = bench.Suite{
	Name:  "p2p",
	Title: "Point-to-point: Weft beside MPICH and Open MPI",
	About: "Two ranks (msgrate: K pairs of ranks, rank i sending to rank i+K). " +
		"pingpong: blocking Send and Recv, one-way latency and size over it; " +
		"bw: 64 Isend (Irecv) in flight, then Waitall into an array of statuses and the receiver's 4-byte acknowledgement, as OSU's osu_bw; " +
		"bibw: the same in both directions at once, as osu_bibw; " +
		"msgrate: zero-byte messages, a reply every 256; " +
		"oneway: a sender that keeps sending to one receiver (TMPI's one-way send-recv, Figs. 11-12), time per send and transfer rate. " +
		"path shm: Weft's ranks in one process, the peers' processes on shared memory; " +
		"path procs: Weft's ranks in processes of their own (weft run) on one host, through shared-memory rings, the peers as for shm; " +
		"path tcp: Weft's ranks in processes of their own (weft run) over TCP (WEFT_NET_UNIX=false), the peers on their TCP paths " +
		"(MPICH: MPIR_CVAR_NOLOCAL=1, UCX over TCP; Open MPI: the tcp BTL). " +
		"2 cores: more than 2 busy-polling ranks oversubscribe them, which the C MPIs pay for heavily.",
	Twin:  "p2p.c",
	Tests: tests,
	Body:  body,
	Plots: []bench.Plot{
		{File: "p2p-latency", Title: "Ping-pong one-way latency", Metric: "latency", X: "size",
			Where: map[string]string{"bench": "pingpong"}, Series: []string{"path"}, LogX: true, LogY: true},
		{File: "p2p-bandwidth", Title: "Bandwidth inside one host (shared memory)", Metric: "bandwidth", X: "size",
			Where: map[string]string{"path": "shm"}, Series: []string{"bench"}, LogX: true, LogY: true},
		{File: "p2p-bandwidth-tcp", Title: "Bandwidth between processes over TCP", Metric: "bandwidth", X: "size",
			Where: map[string]string{"path": "tcp"}, Series: []string{"bench"}, LogX: true, LogY: true},
		{File: "p2p-oneway", Title: "One-way send-recv: time per send (TMPI Figs. 11-12)", Metric: "time", X: "size",
			Where: map[string]string{"bench": "oneway"}, Series: []string{"path"}, LogX: true, LogY: true},
	},
}

const (
	kib = 1 << 10
	mib = 1 << 20
)

// tests are the runs of the suite. Iteration counts move about 2 GB or take
// about a second a run on this machine; quick divides them by 20.
func tests(quick bool) []bench.Test {
	var ts []bench.Test
	div := 1
	if quick {
		div = 20
	}
	add := func(path, name string, size, iters int, extra ...string) {
		t := bench.Test{Args: []string{"-bench", name, "-iters", strconv.Itoa(max(iters/div, 2))},
			Ranks: 2, Fields: []string{"path", path}}
		if name == "msgrate" {
			t.Ranks = 2 * size
			t.Args = append(t.Args, "-pairs", strconv.Itoa(size))
		} else {
			t.Args = append(t.Args, "-size", strconv.Itoa(size))
		}
		if path == "procs" {
			t.PerProc = max(t.Ranks/2, 1)
		}
		if path == "tcp" {
			// Weft: one proc per rank, or 2 procs for msgrate's pairs, over
			// TCP as the peers are, not over the Unix sockets of one host.
			t.TCP, t.PerProc, t.Lines = true, max(t.Ranks/2, 1), 2
			t.Env = []string{"WEFT_NET_UNIX=false"}
			if name != "pingpong" {
				t.Lines = 1
			}
		}
		ts = append(ts, t)
	}
	sizes := func(full, short []int) []int {
		if quick {
			return short
		}
		return full
	}
	for _, s := range sizes([]int{1, 8, 64, 512, 4 * kib, 32 * kib, 256 * kib, mib, 4 * mib}, []int{8, mib}) {
		add("shm", "pingpong", s, roundTrips(s))
	}
	for _, s := range sizes([]int{8, 512, 4 * kib, 64 * kib, mib, 4 * mib}, []int{64 * kib}) {
		add("shm", "bw", s, windows(s))
	}
	for _, s := range sizes([]int{8, 4 * kib, 64 * kib, 4 * mib}, []int{64 * kib}) {
		add("shm", "bibw", s, windows(s)/2)
	}
	for _, s := range sizes([]int{8, 512, 4 * kib, 64 * kib, mib, 4 * mib}, []int{8}) {
		add("shm", "oneway", s, 2*roundTrips(s))
	}
	for _, k := range sizes([]int{1, 2, 4}, []int{1}) {
		add("shm", "msgrate", k, []int{0, 500_000, 100_000, 0, 20_000}[k])
	}
	for _, s := range sizes([]int{8, 4 * kib, 64 * kib, mib, 4 * mib}, []int{8}) {
		add("procs", "pingpong", s, roundTrips(s)/2)
	}
	for _, s := range sizes([]int{64 * kib, 4 * mib}, []int{64 * kib}) {
		add("procs", "bw", s, windows(s)/2)
	}
	if !quick {
		add("procs", "msgrate", 4, 50_000)
	}
	for _, s := range sizes([]int{8, 4 * kib, 64 * kib, mib, 4 * mib}, []int{8}) {
		add("tcp", "pingpong", s, roundTrips(s)/4)
	}
	for _, s := range sizes([]int{64 * kib, 4 * mib}, []int{64 * kib}) {
		add("tcp", "bw", s, windows(s)/2)
	}
	if !quick {
		add("tcp", "bibw", 4*mib, windows(4*mib)/2)
		for _, s := range []int{8, mib} {
			add("tcp", "oneway", s, roundTrips(s)/2)
		}
		add("tcp", "msgrate", 4, 50_000)
	}
	return ts
}

// roundTrips is a ping-pong's iterations for size: 100,000 for small
// messages, about 2 GB each way for large ones.
func roundTrips(size int) int {
	return int(min(100_000, max(200, (1<<31)/max(int64(size), 1))))
}

// windows is bw's windows of 64 for size: at most 5,000, about 2 GB.
func windows(size int) int {
	return int(min(5_000, max(8, (1<<31)/(window*max(int64(size), 1)))))
}

// config is one run's flags, the same as the C twin's.
type config struct {
	bench        string
	size, iters  int
	pairs, ranks int
	out          io.Writer
}

func parse(args []string) (config, error) {
	var c config
	fs := bench.Flags("p2p")
	fs.StringVar(&c.bench, "bench", "pingpong", "pingpong, bw, bibw, msgrate or oneway")
	fs.IntVar(&c.size, "size", 8, "message bytes")
	fs.IntVar(&c.iters, "iters", 0, "iterations (required)")
	fs.IntVar(&c.pairs, "pairs", 1, "msgrate: sender-receiver pairs")
	if err := bench.Parse(fs, args); err != nil {
		return c, err
	}
	switch {
	case c.iters < 1:
		return c, errors.New("p2p: -iters N (at least 1) is required")
	case c.size < 0:
		return c, fmt.Errorf("p2p: -size %d: want 0 or more bytes", c.size)
	case c.pairs < 1:
		return c, fmt.Errorf("p2p: -pairs %d: want at least 1", c.pairs)
	}
	c.ranks = 2
	switch c.bench {
	case "msgrate":
		c.ranks = 2 * c.pairs
	case "pingpong", "bw", "bibw", "oneway":
	default:
		return c, fmt.Errorf("p2p: unknown -bench %q (want pingpong, bw, bibw, msgrate or oneway)", c.bench)
	}
	c.out = os.Stdout
	return c, nil
}

// body is Weft's side: every rank runs it; rank 0 prints the results.
func body(c *mpi.Comm, args []string) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	return cfg.run(c)
}

func (cfg config) run(c *mpi.Comm) error {
	if c.Size() != cfg.ranks {
		return fmt.Errorf("p2p: -bench %s needs %d ranks, the job has %d", cfg.bench, cfg.ranks, c.Size())
	}
	switch cfg.bench {
	case "pingpong":
		return cfg.pingpong(c)
	case "bw":
		return cfg.bandwidth(c, false)
	case "bibw":
		return cfg.bandwidth(c, true)
	case "oneway":
		return cfg.oneway(c)
	}
	return cfg.msgrate(c)
}

// report prints a result line of rank 0.
func (cfg config) report(c *mpi.Comm, metric string, value float64, unit string) {
	if c.Rank() != 0 {
		return
	}
	if cfg.bench == "msgrate" {
		bench.Report(cfg.out, cfg.bench, metric, value, unit, "pairs", strconv.Itoa(cfg.pairs))
		return
	}
	bench.Report(cfg.out, cfg.bench, metric, value, unit, "size", strconv.Itoa(cfg.size))
}

// barrier synchronises all ranks of c through rank 0 with point-to-point
// messages, as the C twin's MPI_Barrier does, whatever the collectives cost.
func barrier(c *mpi.Comm) error {
	const tag = 1 << 20
	var none []byte
	if c.Rank() != 0 {
		if err := mpi.Send(c, none, 0, tag); err != nil {
			return err
		}
		_, err := mpi.Recv(c, none, 0, tag)
		return err
	}
	for r := 1; r < c.Size(); r++ {
		if _, err := mpi.Recv(c, none, mpi.AnySource, tag); err != nil {
			return err
		}
	}
	for r := 1; r < c.Size(); r++ {
		if err := mpi.Send(c, none, r, tag); err != nil {
			return err
		}
	}
	return nil
}

// timed runs test(iters/10) as an untimed warm-up, then test(iters) between
// barriers, and returns its seconds.
func timed(c *mpi.Comm, iters int, test func(n int) error) (float64, error) {
	if err := test(max(iters/10, 1)); err != nil {
		return 0, err
	}
	if err := barrier(c); err != nil {
		return 0, err
	}
	start := mpi.Wtime()
	if err := test(iters); err != nil {
		return 0, err
	}
	if err := barrier(c); err != nil {
		return 0, err
	}
	return mpi.Wtime() - start, nil
}

// RoundTrips makes n blocking round trips of buf between ranks 0 and 1 of c,
// rank 0 sending first: the ping-pong of this suite and of mpi's Go benchmarks.
func RoundTrips(c *mpi.Comm, buf []byte, n int) error {
	peer := 1 - c.Rank()
	for range n {
		if c.Rank() == 0 {
			if err := mpi.Send(c, buf, peer, 0); err != nil {
				return err
			}
			if _, err := mpi.Recv(c, buf, peer, 0); err != nil {
				return err
			}
			continue
		}
		if _, err := mpi.Recv(c, buf, peer, 0); err != nil {
			return err
		}
		if err := mpi.Send(c, buf, peer, 0); err != nil {
			return err
		}
	}
	return nil
}

func (cfg config) pingpong(c *mpi.Comm) error {
	buf := bench.Buffer[byte](cfg.size)
	secs, err := timed(c, cfg.iters, func(n int) error { return RoundTrips(c, buf, n) })
	if err != nil {
		return err
	}
	oneWay := secs / float64(2*cfg.iters)
	cfg.report(c, "latency", oneWay*1e6, "us")
	cfg.report(c, "bandwidth", float64(cfg.size)/oneWay/1e9, "GB/s")
	return nil
}

// bandwidth streams windows of messages from rank 0 to rank 1 (both ways at
// once when bi), each window completed by WaitallInto and, one way, acknowledged by
// the receiver as in osu_bw; it reports the bytes moved per second in all.
func (cfg config) bandwidth(c *mpi.Comm, bi bool) error {
	sends, recvs := make([][]byte, window), make([][]byte, window)
	arena := bench.Buffer[byte](2 * window * cfg.size)
	for i := range window {
		sends[i], arena = arena[:cfg.size:cfg.size], arena[cfg.size:]
		recvs[i], arena = arena[:cfg.size:cfg.size], arena[cfg.size:]
	}
	reqs, sts := make([]*mpi.Request, 0, 2*window), make([]mpi.Status, 2*window) // a status array, as the twin's
	var ack [4]byte
	peer := 1 - c.Rank()
	secs, err := timed(c, cfg.iters, func(n int) error {
		for range n {
			reqs = reqs[:0]
			for w := range window {
				var r *mpi.Request
				var err error
				if bi || c.Rank() == 1 {
					if r, err = mpi.Irecv(c, recvs[w], peer, 0); err != nil {
						return err
					}
					reqs = append(reqs, r)
				}
				if bi || c.Rank() == 0 {
					if r, err = mpi.Isend(c, sends[w], peer, 0); err != nil {
						return err
					}
					reqs = append(reqs, r)
				}
			}
			if err := mpi.WaitallInto(sts, reqs...); err != nil {
				return err
			}
			if bi {
				continue
			}
			// osu_bw's acknowledgement: the sender starts a window once the
			// receiver has had the last.
			var err error
			if c.Rank() == 0 {
				_, err = mpi.Recv(c, ack[:], peer, 1)
			} else {
				err = mpi.Send(c, ack[:], peer, 1)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	bytes := float64(cfg.size) * window * float64(cfg.iters)
	if bi {
		bytes *= 2
	}
	cfg.report(c, "bandwidth", bytes/secs/1e9, "GB/s")
	return nil
}

// oneway is TMPI's one-way send-recv: rank 0 keeps sending to rank 1 with
// blocking sends; the time per send is the pipeline's cost per message.
func (cfg config) oneway(c *mpi.Comm) error {
	buf := bench.Buffer[byte](cfg.size)
	secs, err := timed(c, cfg.iters, func(n int) error {
		for range n {
			var err error
			if c.Rank() == 0 {
				err = mpi.Send(c, buf, 1, 0)
			} else {
				_, err = mpi.Recv(c, buf, 0, 0)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	per := secs / float64(cfg.iters)
	cfg.report(c, "time", per*1e6, "us")
	cfg.report(c, "bandwidth", float64(cfg.size)/per/1e9, "GB/s")
	return nil
}

func (cfg config) msgrate(c *mpi.Comm) error {
	k := cfg.pairs
	sender := c.Rank() < k
	peer := (c.Rank() + k) % c.Size()
	secs, err := timed(c, cfg.iters, func(n int) error { return ratePair(c, sender, peer, 0, n) })
	if err != nil {
		return err
	}
	cfg.report(c, "rate", float64(cfg.iters*k)/secs/1e6, "Mmsg/s")
	return nil
}

// ratePair sends n zero-byte messages from one sender to one receiver with
// tag; the receiver answers every 256th so that the sender never runs more
// than 256 ahead.
func ratePair(c *mpi.Comm, sender bool, peer, tag, n int) error {
	var none []byte
	for i := 1; i <= n; i++ {
		if sender {
			if err := mpi.Send(c, none, peer, tag); err != nil {
				return err
			}
			if i%256 == 0 {
				if _, err := mpi.Recv(c, none, peer, tag); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := mpi.Recv(c, none, peer, tag); err != nil {
			return err
		}
		if i%256 == 0 {
			if err := mpi.Send(c, none, peer, tag); err != nil {
				return err
			}
		}
	}
	return nil
}
