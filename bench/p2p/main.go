// Command p2p is Weft's side of the point-to-point benchmarks whose C twin is
// bench/peers/p2p.c: the same flags, the same tests, the same output lines, so that
// bench/p2p.sh can run both in one invocation and compare them. Alone, all ranks
// run in this one process, as goroutines; started by a launcher (weft run,
// mpiexec.mpich), the ranks are the launcher's procs (WEFT_PER_PROC ranks each).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/weft-mpi/weft/mpi"
)

var (
	bench   = flag.String("bench", "pingpong", "pingpong, bw, msgrate or latency_mt")
	size    = flag.Int("size", 8, "message bytes")
	iters   = flag.Int("iters", 0, "iterations (0: a default for the test)")
	pairs   = flag.Int("pairs", 1, "msgrate: sender-receiver pairs")
	mode    = flag.String("mode", "proc", "msgrate: pairs of ranks (proc) or of goroutines in two ranks (thread)")
	threads = flag.Int("threads", 2, "latency_mt: receiving goroutines")
	impl    = flag.String("impl", "weft", "name printed in the result lines")
)

const window = 64 // bw: messages in flight

func main() {
	flag.Parse()
	n := *iters
	if n == 0 {
		n = defaultIters()
	}
	ranks := 2
	if *bench == "msgrate" && *mode != "thread" {
		ranks = 2 * *pairs
	}
	// Alone, the ranks are goroutines of this process; under a launcher (weft run,
	// mpiexec), the job is the launcher's.
	if os.Getenv("WEFT_NP") == "" {
		os.Setenv("WEFT_NP", strconv.Itoa(ranks))
	}
	mpi.Main(func(c *mpi.Comm) error {
		if c.Size() != ranks {
			return fmt.Errorf("-bench %s needs %d ranks, the job has %d", *bench, ranks, c.Size())
		}
		switch *bench {
		case "pingpong":
			return pingpong(c, n)
		case "bw":
			return bandwidth(c, n)
		case "msgrate":
			if *mode == "thread" {
				return rateThreads(c, n)
			}
			return rateProcs(c, n)
		case "latency_mt":
			return latencyMT(c, n)
		}
		return fmt.Errorf("unknown -bench %q", *bench)
	})
}

func defaultIters() int {
	switch {
	case *bench == "msgrate":
		return 1_000_000
	case *bench == "latency_mt":
		return 100_000
	case *size >= 1<<20:
		return 200
	case *size >= 1<<14:
		return 5_000
	}
	return 200_000
}

// report prints one result line with the same key fields as the C twin prints.
func report(metric string, value float64, unit string) {
	size, pairs, mode := *size, *pairs, *mode
	switch *bench {
	case "msgrate":
		size = 0
	case "latency_mt":
		pairs, mode = *threads, "thread"
	}
	fmt.Printf("bench=%s impl=%s size=%d pairs=%d mode=%s metric=%s value=%.4f unit=%s\n",
		*bench, *impl, size, pairs, mode, metric, value, unit)
}

// barrier synchronises all ranks of c through rank 0 (collectives are not ours to use here).
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

func pingpong(c *mpi.Comm, n int) error {
	buf := make([]byte, *size)
	peer := 1 - c.Rank()
	round := func() error {
		if c.Rank() == 0 {
			if err := mpi.Send(c, buf, peer, 0); err != nil {
				return err
			}
			_, err := mpi.Recv(c, buf, peer, 0)
			return err
		}
		if _, err := mpi.Recv(c, buf, peer, 0); err != nil {
			return err
		}
		return mpi.Send(c, buf, peer, 0)
	}
	for i := 0; i < n/10; i++ {
		if err := round(); err != nil {
			return err
		}
	}
	if err := barrier(c); err != nil {
		return err
	}
	start := mpi.Wtime()
	for i := 0; i < n; i++ {
		if err := round(); err != nil {
			return err
		}
	}
	oneWay := (mpi.Wtime() - start) / float64(2*n)
	if c.Rank() == 0 {
		report("latency", oneWay*1e6, "us")
		report("bandwidth", float64(*size)/oneWay/1e9, "GB/s")
	}
	return nil
}

func bandwidth(c *mpi.Comm, n int) error {
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, *size)
	}
	reqs := make([]*mpi.Request, window)
	ack := make([]byte, 4)
	run := func(n int) error {
		for i := 0; i < n; i++ {
			if err := streamWindow(c, bufs, reqs); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			_, err := mpi.Recv(c, ack, 1, 1)
			return err
		}
		return mpi.Send(c, ack, 0, 1)
	}
	if err := run(n / 10); err != nil {
		return err
	}
	start := mpi.Wtime()
	if err := run(n); err != nil {
		return err
	}
	if c.Rank() == 0 {
		report("bandwidth", float64(*size)*window*float64(n)/(mpi.Wtime()-start)/1e9, "GB/s")
	}
	return nil
}

// streamWindow sends one window of messages from rank 0 to rank 1: an Isend (or
// Irecv) of each buffer, then Waitall, as OSU's bandwidth test does.
func streamWindow(c *mpi.Comm, bufs [][]byte, reqs []*mpi.Request) error {
	for w := range reqs {
		var err error
		if c.Rank() == 0 {
			reqs[w], err = mpi.Isend(c, bufs[w], 1, 0)
		} else {
			reqs[w], err = mpi.Irecv(c, bufs[w], 0, 0)
		}
		if err != nil {
			return err
		}
	}
	_, err := mpi.Waitall(reqs...)
	return err
}

// ratePair sends n zero-byte messages from one sender to one receiver with tag; the
// receiver answers every 256th so that the sender never runs more than 256 ahead.
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

func rateProcs(c *mpi.Comm, n int) error {
	k := c.Size() / 2
	sender := c.Rank() < k
	peer := (c.Rank() + k) % c.Size()
	start, err := timed(c, n, func(n int) error { return ratePair(c, sender, peer, 0, n) })
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		report("rate", float64(n*k)/(mpi.Wtime()-start)/1e6, "Mmsg/s")
	}
	return nil
}

// timed runs test(n/10) as an untimed warm-up, as the C twin does, then test(n)
// between barriers, and returns the time it started.
func timed(c *mpi.Comm, n int, test func(n int) error) (float64, error) {
	for _, iters := range []int{max(n/10, 1), n} {
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
		if iters == n {
			return start, nil
		}
	}
	panic("unreachable")
}

func rateThreads(c *mpi.Comm, n int) error {
	start, err := timed(c, n, func(n int) error {
		return concurrently(*pairs, func(t int) error { return ratePair(c, c.Rank() == 0, 1-c.Rank(), t, n) })
	})
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		report("rate", float64(n**pairs)/(mpi.Wtime()-start)/1e6, "Mmsg/s")
	}
	return nil
}

// concurrently runs f(0..k-1) in k goroutines and returns the first error.
func concurrently(k int, f func(t int) error) error {
	errs := make([]error, k)
	var wg sync.WaitGroup
	for t := range k {
		wg.Go(func() { errs[t] = f(t) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func latencyMT(c *mpi.Comm, n int) error {
	buf := make([]byte, 8)
	start, err := timed(c, n, func(n int) error {
		if c.Rank() == 0 {
			for i := 0; i < n**threads; i++ {
				if err := mpi.Send(c, buf, 1, 0); err != nil {
					return err
				}
				if _, err := mpi.Recv(c, buf, 1, 0); err != nil {
					return err
				}
			}
			return nil
		}
		return concurrently(*threads, func(int) error {
			buf := make([]byte, 8)
			for i := 0; i < n; i++ {
				if _, err := mpi.Recv(c, buf, 0, 0); err != nil {
					return err
				}
				if err := mpi.Send(c, buf, 0, 0); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		report("latency", (mpi.Wtime()-start)/float64(2*n**threads)*1e6, "us")
	}
	return nil
}
