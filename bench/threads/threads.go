// Package threads is the threads suite of weft bench: the eight tests of Thakur
// and Gropp's suite for multithreaded MPI communication, each run with processes
// (mode P: every stream is a single-threaded rank of its own) and with threads
// (mode T: the streams are goroutines of one rank, which needs ThreadMultiple),
// and OSU's latency_mt. Its C twin is bench/peers/threads.c, where mode P calls
// MPI_Init and mode T MPI_Init_thread(MPI_THREAD_MULTIPLE) with POSIX threads.
package threads

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Suite is the threads suite.
var Suite = bench.Suite{
	Name:  "threads",
	Title: "Multithreaded communication (Thakur & Gropp)",
	About: "Thakur and Gropp's eight tests of multithreaded MPI, each with processes (P: one " +
		"single-threaded rank per stream; the peers call MPI_Init) and with threads (T: goroutines " +
		"of one rank; the peers call MPI_Init_thread(MPI_THREAD_MULTIPLE) and use POSIX threads). " +
		"overhead: ping-pong latency of one pair, the cost of MULTIPLE. bw, latency, msgrate: pairs " +
		"streaming 1 MiB messages, ping-ponging 8 bytes, or sending zero-byte messages with a reply " +
		"every 256 (Table 1's 1P-1P, 1T-1T, 4P-4P, 4T-4T). shortlong: one sender's 8-byte ping-pongs " +
		"(timed one by one) while another sender moves a long message. overlap: a halo exchange with " +
		"four grid neighbours around a computation of fixed length; T adds a thread blocked in a " +
		"receive, which lets a library that progresses only inside calls overlap; overlap is the " +
		"share of the shorter of communication and computation that was hidden. allreduce: " +
		"concurrent Allreduce on separate communicators. hidden: workers compute while one " +
		"thread or rank per node runs Allreduce; compute is their speed then against their speed " +
		"alone. latency_mt: OSU's, one sender and several receiving threads. Times are rank 0's " +
		"between barriers, after an untimed warm-up of a tenth of the iterations.",
	Twin:  "threads.c",
	Tests: tests,
	Body:  func(c *mpi.Comm, args []string) error { return run(c, args, os.Stdout) },
	Plots: []bench.Plot{
		{File: "threads-overhead", Title: "Ping-pong latency with one single-threaded (P) or MULTIPLE (T) pair",
			Metric: "latency", X: "size", Where: map[string]string{"test": "overhead"}, Series: []string{"mode"}, LogX: true},
		{File: "threads-bw", Title: "Concurrent bandwidth of pairs of processes (P) or threads (T)",
			Metric: "bandwidth", X: "pairs", Where: map[string]string{"test": "bw"}, Series: []string{"mode"}},
		{File: "threads-latency", Title: "Concurrent latency of pairs of processes (P) or threads (T)",
			Metric: "latency", X: "pairs", Where: map[string]string{"test": "latency"}, Series: []string{"mode"}},
		{File: "threads-msgrate", Title: "Message rate of pairs of processes (P) or threads (T)",
			Metric: "rate", X: "pairs", Where: map[string]string{"test": "msgrate"}, Series: []string{"mode"}},
		{File: "threads-shortlong", Title: "Short-message round trips while a long message moves",
			Metric: "short", X: "iter", Where: map[string]string{"test": "shortlong"}, Series: []string{"mode"}, Only: true},
		{File: "threads-allreduce", Title: "Concurrent Allreduce on separate communicators",
			Metric: "time", X: "comms", Where: map[string]string{"test": "allreduce"}, Series: []string{"mode"}},
	},
}

// config is one test's arguments, the same flags as the C twin's.
type config struct {
	test    string
	mode    string // "P" or "T"
	size    int    // message bytes (the long message in shortlong)
	iters   int
	pairs   int      // bw, latency, msgrate
	threads int      // latency_mt: receiving goroutines
	comms   int      // allreduce: concurrent communicators
	workers int      // hidden: computing goroutines or ranks per node
	work    int      // overlap: microseconds of computation per iteration
	row     []string // the result lines' fields before the metric
}

// A kind is one test: its ranks, its defaults, its row and its body.
type kind struct {
	size, iters int
	ranks       func(cf *config) int
	row         func(cf *config) []string // the fields after test and mode
	body        func(c *mpi.Comm, cf *config, out io.Writer) error
}

// twoRanks is the job of a test between two nodes: k streams per node need 2k
// ranks with processes, 2 with threads.
func twoRanks(k func(*config) int) func(*config) int {
	return func(cf *config) int {
		if cf.mode == "P" {
			return 2 * k(cf)
		}
		return 2
	}
}

func pairsOf(cf *config) int { return cf.pairs }

func pairsRow(cf *config) []string {
	return []string{"pairs", strconv.Itoa(cf.pairs), "size", strconv.Itoa(cf.size)}
}

func sizeRow(cf *config) []string { return []string{"size", strconv.Itoa(cf.size)} }

var kinds = map[string]kind{
	"overhead": {size: 8, iters: 20000, ranks: func(*config) int { return 2 }, row: sizeRow, body: pingpong},
	"latency":  {size: 8, iters: 10000, ranks: twoRanks(pairsOf), row: pairsRow, body: pingpong},
	"bw":       {size: 1 << 20, iters: 200, ranks: twoRanks(pairsOf), row: pairsRow, body: bandwidth},
	"msgrate":  {size: 0, iters: 100000, ranks: twoRanks(pairsOf), row: pairsRow, body: msgrate},
	"shortlong": {size: 8 << 20, iters: 400, body: shortLong, row: sizeRow,
		ranks: shortLongRanks},
	"overlap": {size: 64 << 10, iters: 200, body: overlap, ranks: func(*config) int { return 0 },
		row: func(cf *config) []string {
			return []string{"size", strconv.Itoa(cf.size), "work", strconv.Itoa(cf.work)}
		}},
	"allreduce": {size: 8, iters: 2000, ranks: twoRanks(func(cf *config) int { return cf.comms }), body: concurrentAllreduce,
		row: func(cf *config) []string {
			return []string{"comms", strconv.Itoa(cf.comms), "size", strconv.Itoa(cf.size)}
		}},
	"hidden": {size: 64 << 10, iters: 200, body: hidden,
		ranks: twoRanks(func(cf *config) int { return cf.workers + 1 }),
		row: func(cf *config) []string {
			return []string{"workers", strconv.Itoa(cf.workers), "size", strconv.Itoa(cf.size)}
		}},
	"latency_mt": {size: 8, iters: 20000, ranks: func(*config) int { return 2 }, body: latencyMT,
		row: func(cf *config) []string {
			return []string{"threads", strconv.Itoa(cf.threads), "size", strconv.Itoa(cf.size)}
		}},
}

// maxStreams bounds -pairs, -threads, -comms and -workers (the C twin's thread table).
const maxStreams = 64

// parse reads args as the C twin does and fills in the test's defaults.
func parse(args []string) (*config, error) {
	cf := &config{}
	fs := bench.Flags("threads")
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range kinds {
			if !yield(n) {
				return
			}
		}
	})
	fs.StringVar(&cf.test, "test", "", fmt.Sprintf("the test: %v", names))
	fs.StringVar(&cf.mode, "mode", "", "P (processes) or T (threads); latency_mt is T only")
	fs.IntVar(&cf.size, "size", -1, "message bytes (-1: the test's default)")
	fs.IntVar(&cf.iters, "iters", 0, "iterations (0: the test's default)")
	fs.IntVar(&cf.pairs, "pairs", 1, "bw, latency, msgrate: concurrent pairs")
	fs.IntVar(&cf.threads, "threads", 2, "latency_mt: receiving threads")
	fs.IntVar(&cf.comms, "comms", 2, "allreduce: concurrent communicators")
	fs.IntVar(&cf.workers, "workers", 1, "hidden: computing threads or ranks per node")
	fs.IntVar(&cf.work, "work", 100, "overlap: microseconds of computation per iteration")
	if err := bench.Parse(fs, args); err != nil {
		return nil, err
	}
	k, ok := kinds[cf.test]
	if !ok {
		return nil, fmt.Errorf("threads: -test %q: want one of %v", cf.test, names)
	}
	switch {
	case cf.mode == "" && cf.test == "latency_mt":
		cf.mode = "T"
	case cf.mode == "":
		cf.mode = "P"
	case cf.mode != "P" && cf.mode != "T":
		return nil, fmt.Errorf("threads: -mode %q: want P (processes) or T (threads)", cf.mode)
	case cf.mode == "P" && cf.test == "latency_mt":
		return nil, errors.New("threads: -mode P: latency_mt runs threads only (mode T)")
	}
	if cf.size == -1 {
		cf.size = k.size
	}
	if cf.iters == 0 {
		cf.iters = k.iters
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"pairs", cf.pairs}, {"threads", cf.threads}, {"comms", cf.comms}, {"workers", cf.workers}} {
		if f.v < 1 || f.v > maxStreams {
			return nil, fmt.Errorf("threads: -%s %d: want 1 to %d", f.name, f.v, maxStreams)
		}
	}
	switch {
	case cf.size < 0:
		return nil, fmt.Errorf("threads: -size %d: want a number of bytes (or -1 for the default)", cf.size)
	case cf.iters < 1:
		return nil, fmt.Errorf("threads: -iters %d: want at least 1", cf.iters)
	case cf.work < 0 || cf.work == 0 && cf.test == "overlap":
		return nil, fmt.Errorf("threads: -work %d: want a positive number of microseconds", cf.work)
	case (cf.test == "allreduce" || cf.test == "hidden") && (cf.size == 0 || cf.size%8 != 0):
		return nil, fmt.Errorf("threads: -size %d: %s reduces float64s, want a positive multiple of 8", cf.size, cf.test)
	case cf.test == "overhead" && cf.pairs != 1:
		return nil, fmt.Errorf("threads: -pairs %d: overhead runs one pair", cf.pairs)
	case cf.test == "shortlong" && cf.size == 0:
		return nil, errors.New("threads: -size 0: shortlong needs a long message")
	}
	return cf, nil
}

// run is the suite's body: it parses args, checks the job, runs the test and
// prints rank 0's result lines to out.
func run(c *mpi.Comm, args []string, out io.Writer) error {
	cf, err := parse(args)
	if err != nil {
		return err
	}
	k := kinds[cf.test]
	switch want := k.ranks(cf); {
	case want == 0 && c.Size() < 2:
		return fmt.Errorf("threads: -test %s needs at least 2 ranks; the job has %d", cf.test, c.Size())
	case want > 0 && c.Size() != want:
		return fmt.Errorf("threads: -test %s -mode %s needs %d ranks; the job has %d", cf.test, cf.mode, want, c.Size())
	}
	cf.row = append([]string{"test", cf.test, "mode", cf.mode}, k.row(cf)...)
	if cf.mode == "T" && c.ThreadLevel() != mpi.ThreadMultiple {
		return fmt.Errorf("threads: -mode T calls Weft from several goroutines of a rank: it needs thread level %v, the job has %v",
			mpi.ThreadMultiple, c.ThreadLevel())
	}
	return k.body(c, cf, out)
}

// report prints one result line of the test's row, on rank 0 only.
func report(c *mpi.Comm, cf *config, out io.Writer, metric string, value float64, unit string, extra ...string) {
	if c.Rank() != 0 {
		return
	}
	bench.Report(out, "threads", metric, value, unit, append(slices.Clip(cf.row), extra...)...)
}

// timed runs body(n/10) as an untimed warm-up, then body(n) between barriers.
func timed(c *mpi.Comm, n int, body func(n int) error) (float64, error) {
	if err := body(max(n/10, 1)); err != nil {
		return 0, err
	}
	return between(c, func() error { return body(n) })
}

// between runs f between barriers and returns the seconds it took on this
// rank's clock, from the end of the first barrier to the end of the second.
func between(c *mpi.Comm, f func() error) (float64, error) {
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	start := mpi.Wtime()
	if err := f(); err != nil {
		return 0, err
	}
	if err := c.Barrier(); err != nil {
		return 0, err
	}
	return mpi.Wtime() - start, nil
}

// team runs f(0..k-1) in k goroutines of the calling rank and returns their
// joined errors. The first failure aborts the job, so that the partners of the
// failed goroutine, here or in other ranks, do not wait for it forever.
func team(c *mpi.Comm, k int, f func(t int) error) error {
	errs := make([]error, k)
	var abort sync.Once
	var wg sync.WaitGroup
	for t := range k {
		wg.Go(func() {
			if errs[t] = f(t); errs[t] != nil {
				abort.Do(func() { _ = c.Abort(1) })
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pairwise runs one end of every pair: with processes, rank i and rank i+k are
// pair i (tag 0); with threads, goroutine t of rank 0 and goroutine t of rank 1
// are pair t (tag t). first is the end that starts, on the lower rank.
func pairwise(c *mpi.Comm, cf *config, k int, f func(first bool, peer, tag int) error) error {
	if cf.mode == "P" {
		return f(c.Rank() < k, (c.Rank()+k)%c.Size(), 0)
	}
	return team(c, k, func(t int) error { return f(c.Rank() == 0, 1-c.Rank(), t) })
}

// stamp marks buf as message i; checkStamp verifies what a receive got.
func stamp(buf []byte, i int) {
	if len(buf) > 0 {
		buf[0] = byte(i)
	}
}

// recvStamped receives message i of a stream into buf and checks it.
func recvStamped(c *mpi.Comm, buf []byte, peer, tag, i int) error {
	st, err := mpi.Recv(c, buf, peer, tag)
	if err != nil {
		return err
	}
	return checkStamp(st, buf, i)
}

func checkStamp(st mpi.Status, buf []byte, i int) error {
	if n := mpi.GetCount[byte](st); n != len(buf) {
		return fmt.Errorf("message %d from rank %d: %d bytes, want %d", i, st.Source, n, len(buf))
	}
	if len(buf) > 0 && buf[0] != byte(i) {
		return fmt.Errorf("message %d from rank %d carries the stamp of message %d (mod 256)", i, st.Source, buf[0])
	}
	return nil
}
