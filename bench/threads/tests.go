package threads

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Tags of the tests' messages besides the pairs' own.
const (
	tagShort    = 1 // shortlong: the round trips
	tagLong     = 2 // shortlong: the long message
	tagLongTime = 3 // shortlong: the long sender's time, to rank 0
	tagHelper   = 4 // overlap: the message that releases the helper thread
	tagStop     = 5 // hidden: a reducing rank tells its node's workers to stop
)

// batch is msgrate's window: the receiver answers every batch-th message, so
// that the sender is never more than batch messages ahead.
const batch = 256

// pairs times -iters iterations of loop on every pair at once (after a
// warm-up), each end with its own buffer of -size bytes.
func pairs(c *mpi.Comm, cf *config, loop func(buf []byte, first bool, peer, tag, n int) error) (float64, error) {
	return timed(c, cf.iters, func(n int) error {
		return pairwise(c, cf, cf.pairs, func(first bool, peer, tag int) error {
			return loop(bench.Buffer[byte](cf.size), first, peer, tag, n)
		})
	})
}

// pingpong is the overhead and latency tests: every pair ping-pongs -size bytes
// -iters times; the figure is the one-way latency while all pairs run.
func pingpong(c *mpi.Comm, cf *config, out io.Writer) error {
	secs, err := pairs(c, cf, func(buf []byte, first bool, peer, tag, n int) error {
		for i := range n {
			if first {
				stamp(buf, i)
				if err := mpi.Send(c, buf, peer, tag); err != nil {
					return err
				}
			}
			err := recvStamped(c, buf, peer, tag, i)
			if err == nil && !first {
				err = mpi.Send(c, buf, peer, tag)
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
	report(c, cf, out, "latency", secs/float64(2*cf.iters)*1e6, "us")
	return nil
}

// bandwidth is the concurrent bandwidth test: the first of every pair sends
// -iters messages of -size bytes, then waits for the receiver's acknowledgement.
func bandwidth(c *mpi.Comm, cf *config, out io.Writer) error {
	secs, err := pairs(c, cf, func(buf []byte, first bool, peer, tag, n int) error {
		for i := range n {
			var err error
			if first {
				stamp(buf, i)
				err = mpi.Send(c, buf, peer, tag)
			} else {
				err = recvStamped(c, buf, peer, tag, i)
			}
			if err != nil {
				return err
			}
		}
		var ack []byte
		if first {
			_, err := mpi.Recv(c, ack, peer, tag)
			return err
		}
		return mpi.Send(c, ack, peer, tag)
	})
	if err != nil {
		return err
	}
	report(c, cf, out, "bandwidth", float64(cf.pairs*cf.iters*cf.size)/secs/1e9, "GB/s")
	return nil
}

// msgrate is the message rate test, as OSU and Thakur and Gropp run it: the
// first of every pair sends -iters messages and waits for a reply every batch.
func msgrate(c *mpi.Comm, cf *config, out io.Writer) error {
	secs, err := pairs(c, cf, func(buf []byte, first bool, peer, tag, n int) error {
		for i := 1; i <= n; i++ {
			var err error
			if first {
				err = mpi.Send(c, buf, peer, tag)
				if err == nil && i%batch == 0 {
					_, err = mpi.Recv(c, buf, peer, tag)
				}
			} else {
				_, err = mpi.Recv(c, buf, peer, tag)
				if err == nil && i%batch == 0 {
					err = mpi.Send(c, buf, peer, tag)
				}
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
	report(c, cf, out, "rate", float64(cf.pairs*cf.iters)/secs/1e6, "Mmsg/s")
	return nil
}

// shortLongRanks is the job of shortlong: rank 0 and rank 2 exchange the short
// messages; the long one goes from rank 1 to rank 3 with processes, from a
// second goroutine of rank 0 to rank 1 with threads.
func shortLongRanks(cf *config) int {
	if cf.mode == "P" {
		return 4
	}
	return 3
}

// shortLong is the concurrent short-long messages test: rank 0 times each of
// -iters round trips of 8 bytes with rank 2 while another sender moves a message
// of -size bytes. Rank 0 prints every round trip (field iter), their mean and
// maximum, and how long the long send took.
func shortLong(c *mpi.Comm, cf *config, out io.Writer) error {
	long := bench.Buffer[byte](cf.size)
	var times []float64
	var longSecs float64
	for round := range 2 {
		n := cf.iters
		if round == 0 {
			n = max(n/10, 1)
		}
		var err error
		if times, longSecs, err = shortLongRound(c, cf, long, n, byte(round+1)); err != nil {
			return err
		}
	}
	for i, t := range times {
		report(c, cf, out, "short", t*1e6, "us", "iter", strconv.Itoa(i))
	}
	mean := 0.0
	for _, t := range times {
		mean += t / float64(len(times))
	}
	report(c, cf, out, "short_mean", mean*1e6, "us")
	report(c, cf, out, "short_max", slices.Max(times)*1e6, "us")
	report(c, cf, out, "long", longSecs*1e6, "us")
	return nil
}

// shortLongRound runs n round trips beside one long message filled with fill,
// and returns rank 0's round-trip times and the long send's time.
func shortLongRound(c *mpi.Comm, cf *config, long []byte, n int, fill byte) ([]float64, float64, error) {
	times := make([]float64, n)
	var longSecs float64
	short := func() error {
		buf := bench.Buffer[byte](8)
		for i := range n {
			start := mpi.Wtime()
			stamp(buf, i)
			err := mpi.Send(c, buf, 2, tagShort)
			if err == nil {
				err = recvStamped(c, buf, 2, tagShort, i)
			}
			if err != nil {
				return err
			}
			times[i] = mpi.Wtime() - start
		}
		return nil
	}
	echo := func() error {
		buf := bench.Buffer[byte](8)
		for i := range n {
			err := recvStamped(c, buf, 0, tagShort, i)
			if err == nil {
				err = mpi.Send(c, buf, 0, tagShort)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	sendLong := func(to int) error {
		start := mpi.Wtime()
		err := mpi.Send(c, long, to, tagLong)
		longSecs = mpi.Wtime() - start
		return err
	}
	recvLong := func(from int) error {
		st, err := mpi.Recv(c, long, from, tagLong)
		if err != nil {
			return err
		}
		if got := mpi.GetCount[byte](st); got != len(long) || bytes.Count(long, []byte{fill}) != len(long) {
			return fmt.Errorf("shortlong: the long message from rank %d (%d bytes) is not the %d bytes of %d sent", from, got, len(long), fill)
		}
		return nil
	}
	threads := cf.mode == "T"
	if c.Rank() == 0 && threads || c.Rank() == 1 && !threads {
		for i := range long {
			long[i] = fill
		}
	}
	if err := c.Barrier(); err != nil {
		return nil, 0, err
	}
	var err error
	switch {
	case c.Rank() == 0 && threads:
		err = team(c, 2, func(t int) error {
			if t == 0 {
				return short()
			}
			return sendLong(1)
		})
	case c.Rank() == 0:
		err = short()
		if err == nil {
			t := []float64{0}
			_, err = mpi.Recv(c, t, 1, tagLongTime)
			longSecs = t[0]
		}
	case c.Rank() == 2:
		err = echo()
	case c.Rank() == 1 && threads:
		err = recvLong(0)
	case c.Rank() == 1:
		err = sendLong(3)
		if err == nil {
			err = mpi.Send(c, []float64{longSecs}, 0, tagLongTime)
		}
	case c.Rank() == 3:
		err = recvLong(1)
	}
	return times, longSecs, err
}

// neighbours are the ranks left, right, above and below rank r on a periodic
// grid of size ranks, as square as size allows. A message to direction d has
// tag d; the one from direction d was sent toward d^1, with that tag.
func neighbours(r, size int) [4]int {
	rows := 1
	for d := 1; d*d <= size; d++ {
		if size%d == 0 {
			rows = d
		}
	}
	cols := size / rows
	x, y := r%cols, r/cols
	return [4]int{
		y*cols + (x+cols-1)%cols,
		y*cols + (x+1)%cols,
		(y+rows-1)%rows*cols + x,
		(y+1)%rows*cols + x,
	}
}

// overlap is the computation/communication overlap test: every iteration posts
// a receive and a send of -size bytes for each of four grid neighbours, computes
// for -work microseconds, then waits for all eight. It times the loop without
// the computation (comm) and with it (time); overlap is the share of the
// shorter of the two parts that the loop hid. With threads, each rank first
// starts a goroutine blocked in a receive that only the end of the test
// satisfies, as Thakur and Gropp's "overlap" version does.
func overlap(c *mpi.Comm, cf *config, out io.Writer) error {
	helper := make(chan error, 1)
	if cf.mode == "T" {
		go func() {
			_, err := mpi.Recv(c, []byte(nil), c.Rank(), tagHelper)
			helper <- err
		}()
	}
	comm, both, err := overlapLoops(c, cf)
	if cf.mode == "T" {
		err = errors.Join(err, mpi.Send(c, []byte(nil), c.Rank(), tagHelper), <-helper)
	}
	if err != nil {
		return err
	}
	comm, both = comm/float64(cf.iters)*1e6, both/float64(cf.iters)*1e6
	work := float64(cf.work)
	hidden := 100 * (comm + work - both) / min(comm, work)
	report(c, cf, out, "time", both, "us")
	report(c, cf, out, "comm", comm, "us")
	report(c, cf, out, "overlap", max(0, min(hidden, 100)), "percent")
	return nil
}

// overlapLoops warms up, then returns the seconds of -iters iterations without
// computation and with it.
func overlapLoops(c *mpi.Comm, cf *config) (comm, both float64, err error) {
	nb := neighbours(c.Rank(), c.Size())
	var send, recv [4][]byte
	for d := range 4 {
		send[d], recv[d] = bench.Buffer[byte](cf.size), bench.Buffer[byte](cf.size)
	}
	reqs := make([]*mpi.Request, 8)
	loop := func(n int, work float64) error {
		for i := range n {
			for d := range 4 {
				stamp(send[d], i)
				var err error
				if reqs[d], err = mpi.Irecv(c, recv[d], nb[d], d^1); err != nil {
					return err
				}
				if reqs[4+d], err = mpi.Isend(c, send[d], nb[d], d); err != nil {
					return err
				}
			}
			for end := mpi.Wtime() + work*1e-6; mpi.Wtime() < end; {
			}
			sts, err := mpi.Waitall(reqs...)
			if err != nil {
				return err
			}
			for d := range 4 {
				if err := checkStamp(sts[d], recv[d], i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	work := float64(cf.work)
	if err := loop(max(cf.iters/10, 1), work); err != nil {
		return 0, 0, err
	}
	if comm, err = between(c, func() error { return loop(cf.iters, 0) }); err != nil {
		return 0, 0, err
	}
	both, err = between(c, func() error { return loop(cf.iters, work) })
	return comm, both, err
}

// concurrentAllreduce is the concurrent collectives test: -comms communicators
// of two ranks each run -iters Allreduce of -size bytes at once, from ranks i
// and i+comms with processes, from goroutine t of both ranks with threads.
func concurrentAllreduce(c *mpi.Comm, cf *config, out io.Writer) (err error) {
	var comms []*mpi.Comm
	defer func() {
		for _, d := range comms {
			err = errors.Join(err, d.Free())
		}
	}()
	if cf.mode == "P" {
		sub, err := c.Split(c.Rank()%cf.comms, c.Rank())
		if err != nil {
			return err
		}
		comms = append(comms, sub)
	} else {
		for range cf.comms {
			d, err := c.Dup()
			if err != nil {
				return err
			}
			comms = append(comms, d)
		}
	}
	secs, err := timed(c, cf.iters, func(n int) error {
		if cf.mode == "P" {
			return reduceLoop(comms[0], n, cf.size/8)
		}
		return team(c, len(comms), func(t int) error { return reduceLoop(comms[t], n, cf.size/8) })
	})
	if err != nil {
		return err
	}
	report(c, cf, out, "time", secs/float64(cf.iters)*1e6, "us")
	return nil
}

// reduceLoop runs n Allreduce sums of count float64s over c, each rank giving
// its rank+1, and checks both ends of every result.
func reduceLoop(c *mpi.Comm, n, count int) error {
	send, recv := bench.Buffer[float64](count), bench.Buffer[float64](count)
	for i := range send {
		send[i] = float64(c.Rank() + 1)
	}
	want := float64(c.Size() * (c.Size() + 1) / 2)
	for range n {
		recv[0], recv[count-1] = 0, 0
		if err := mpi.Allreduce(c, send, recv, mpi.Sum); err != nil {
			return err
		}
		if recv[0] != want || recv[count-1] != want {
			return fmt.Errorf("Allreduce over %d ranks gave %g .. %g, want %g", c.Size(), recv[0], recv[count-1], want)
		}
	}
	return nil
}

// alone is how long the hidden test's workers compute without the collective.
const alone = 30 * time.Millisecond

// unit is one piece of the hidden test's computation, a dependent chain of
// multiply-adds whose value stays near 1 (the C twin's is the same).
func unit(x float64) float64 {
	for range 4096 {
		x = x*0.999999 + 1e-6
	}
	return x
}

// seed starts the computation from a value that the compiler cannot fold, as
// the C twin's does.
var seed = 1.0

// computeUntil runs units until stop says so and returns their rate per second.
func computeUntil(stop func() (bool, error)) (float64, error) {
	start, x, units := mpi.Wtime(), seed, 0
	for {
		x = unit(x)
		units++
		done, err := stop()
		if err != nil {
			return 0, err
		}
		if done {
			break
		}
	}
	if math.Abs(x-1) > 0.5 {
		return 0, fmt.Errorf("hidden: the computation drifted to %g", x)
	}
	return float64(units) / (mpi.Wtime() - start), nil
}

// hidden is the collectives-and-computation test. Each of two nodes has
// -workers computing goroutines (ranks with processes) and one reducing
// goroutine (rank) that runs -iters Allreduce of -size bytes with the other
// node's; the workers compute until it is done. compute is the workers' speed
// meanwhile against their speed alone (the reducers asleep), in percent; time
// is one Allreduce's.
func hidden(c *mpi.Comm, cf *config, out io.Writer) (err error) {
	reducers := c
	if cf.mode == "P" {
		color := mpi.Undefined
		if c.Rank()%(cf.workers+1) == 0 {
			color = 0
		}
		if reducers, err = c.Split(color, c.Rank()); err != nil {
			return err
		}
		if reducers != nil {
			defer func() { err = errors.Join(err, reducers.Free()) }()
		}
	}
	var sums []float64
	for round := range 2 {
		n := cf.iters
		if round == 0 {
			n = max(n/10, 1)
		}
		if sums, err = hiddenRound(c, cf, reducers, n); err != nil {
			return err
		}
	}
	total := make([]float64, len(sums))
	if err := mpi.Reduce(c, sums, total, mpi.Sum, 0); err != nil {
		return err
	}
	report(c, cf, out, "compute", 100*total[1]/total[0], "percent")
	report(c, cf, out, "time", total[2]/total[3]/float64(cf.iters)*1e6, "us")
	return nil
}

// hiddenRound measures the workers alone, then beside n Allreduce, and returns
// this rank's sums: rates alone, rates beside the collective, seconds of the
// collective, reducers.
func hiddenRound(c *mpi.Comm, cf *config, reducers *mpi.Comm, n int) ([]float64, error) {
	sums := make([]float64, 4)
	var seconds float64
	reduce := func() error {
		start := mpi.Wtime()
		err := reduceLoop(reducers, n, cf.size/8)
		seconds = mpi.Wtime() - start
		return err
	}
	deadline := func() func() (bool, error) {
		end := mpi.Wtime() + alone.Seconds()
		return func() (bool, error) { return mpi.Wtime() >= end, nil }
	}
	rates := make([]float64, 2*cf.workers)
	if cf.mode == "T" {
		if err := c.Barrier(); err != nil {
			return nil, err
		}
		err := team(c, cf.workers, func(t int) (err error) {
			rates[t], err = computeUntil(deadline())
			return err
		})
		if err == nil {
			err = c.Barrier()
		}
		if err != nil {
			return nil, err
		}
		var stop atomic.Bool
		err = team(c, cf.workers+1, func(t int) (err error) {
			if t == cf.workers {
				defer stop.Store(true)
				return reduce()
			}
			rates[cf.workers+t], err = computeUntil(func() (bool, error) { return stop.Load(), nil })
			return err
		})
		if err != nil {
			return nil, err
		}
		sums[2], sums[3] = seconds, 1
	} else {
		reducer := c.Rank() - c.Rank()%(cf.workers+1)
		var req *mpi.Request
		if reducers == nil {
			var err error
			if req, err = mpi.Irecv(c, []byte(nil), reducer, tagStop); err != nil {
				return nil, err
			}
		}
		if err := c.Barrier(); err != nil {
			return nil, err
		}
		var err error
		if reducers == nil {
			rates[0], err = computeUntil(deadline())
		} else {
			time.Sleep(alone)
		}
		if err == nil {
			err = c.Barrier()
		}
		switch {
		case err != nil:
		case reducers == nil:
			rates[cf.workers], err = computeUntil(func() (bool, error) {
				_, done, err := req.Test()
				return done, err
			})
		default:
			err = reduce()
			for w := 1; err == nil && w <= cf.workers; w++ {
				err = mpi.Send(c, []byte(nil), reducer+w, tagStop)
			}
			sums[2], sums[3] = seconds, 1
		}
		if err != nil {
			return nil, err
		}
	}
	for t := range cf.workers {
		sums[0] += rates[t]
		sums[1] += rates[cf.workers+t]
	}
	return sums, nil
}

// latencyMT is OSU's latency_mt: rank 0 ping-pongs -iters messages of -size
// bytes with each of -threads goroutines of rank 1, which take them as they come.
func latencyMT(c *mpi.Comm, cf *config, out io.Writer) error {
	secs, err := timed(c, cf.iters, func(n int) error {
		if c.Rank() == 0 {
			buf := make([]byte, cf.size)
			for i := range n * cf.threads {
				stamp(buf, i)
				err := mpi.Send(c, buf, 1, 0)
				if err == nil {
					err = recvStamped(c, buf, 1, 0, i)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		return team(c, cf.threads, func(int) error {
			buf := make([]byte, cf.size)
			for range n {
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
	report(c, cf, out, "latency", secs/float64(2*cf.iters*cf.threads)*1e6, "us")
	return nil
}
