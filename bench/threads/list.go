package threads

import (
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
)

// tests lists the suite's runs. The counts are Thakur and Gropp's scaled to a
// small machine: at most 4 streams (8 processes), because the C MPIs poll
// while they wait and slow down enormously when their processes outnumber the
// cores; iterations are few where they do.
func tests(quick bool) []bench.Test {
	var ts []bench.Test
	add := func(ranks, perProc int, args ...string) {
		ts = append(ts, bench.Test{Args: args, Ranks: ranks, PerProc: perProc})
	}
	// both adds the test in mode P and in mode T: k streams per side, so
	// 2k ranks of one process with processes and 2 ranks with threads.
	both := func(k, threadRanks int, args ...string) {
		add(2*k, 2*k, append([]string{"-mode", "P"}, args...)...)
		add(threadRanks, threadRanks, append([]string{"-mode", "T"}, args...)...)
	}
	n := func(full, short int) string {
		if quick {
			return strconv.Itoa(short)
		}
		return strconv.Itoa(full)
	}
	sizes, pairs, rates := []int{8, 4096}, []int{2, 4}, []int{1, 4}
	if quick {
		sizes, pairs, rates = []int{8}, []int{2}, []int{4}
	}
	for _, s := range sizes {
		both(1, 2, "-test", "overhead", "-size", strconv.Itoa(s), "-iters", n(20000, 1000))
	}
	for _, k := range pairs {
		both(k, 2, "-test", "bw", "-pairs", strconv.Itoa(k), "-iters", n(100, 10))
		both(k, 2, "-test", "latency", "-pairs", strconv.Itoa(k), "-iters", n(1000, 200))
		both(k, 2, "-test", "allreduce", "-comms", strconv.Itoa(k), "-iters", n(500, 100))
	}
	// A message rate needs runs longer than a start-up: 50,000 messages a pair
	// take about 10 ms, and 4T-4T varied from 6.6 to 17 M/s in such runs. With
	// processes outnumbering the cores (P, more than one pair) they stay few:
	// MPICH's 4P-4P took 17 s for 50,000.
	for _, k := range rates {
		procIters := 200000
		if k > 1 {
			procIters = 50000
		}
		add(2*k, 2*k, "-mode", "P", "-test", "msgrate", "-pairs", strconv.Itoa(k), "-iters", n(procIters, 10000))
		add(2, 2, "-mode", "T", "-test", "msgrate", "-pairs", strconv.Itoa(k), "-iters", n(200000, 10000))
	}
	both(2, 3, "-test", "shortlong", "-iters", n(400, 50))
	if quick {
		both(1, 2, "-test", "overlap", "-iters", "20")
	} else {
		both(2, 4, "-test", "overlap", "-iters", "200")
	}
	// hidden: p+1 threads on p processors, the two nodes sharing the 2 cores
	both(2, 2, "-test", "hidden", "-workers", "1", "-iters", n(200, 20))
	add(2, 2, "-test", "latency_mt", "-threads", "2", "-iters", n(20000, 1000))
	return ts
}
