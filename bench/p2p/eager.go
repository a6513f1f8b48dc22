package p2p

import (
	"strconv"

	"github.com/weft-mpi/weft/internal/bench"
)

// EagerSweep is Weft alone between two procs over TCP, ping-pong latency and
// bw streaming for message sizes around the network eager limit under
// several values of WEFT_NET_EAGER_LIMIT: the data that picks its default.
var EagerSweep = bench.Suite{
	Name:  "eager",
	Title: "The network eager limit: a sweep",
	About: "Weft alone, 2 procs of 1 rank over loopback TCP. A message of S bytes goes eager when S <= L " +
		"(WEFT_NET_EAGER_LIMIT), else three-phase (RTS, CTS, then the data into the receive): " +
		"in each size's rows the limits below the size are three-phase, the rest eager, " +
		"so same-protocol rows of a size differ only by noise.",
	Tests: eagerTests,
	Body:  body,
	Plots: []bench.Plot{
		{File: "eager-latency", Title: "Ping-pong latency by eager limit", Metric: "latency", X: "size",
			Where: map[string]string{"bench": "pingpong"}, Series: []string{"limit"}, LogX: true, LogY: true},
		{File: "eager-bandwidth", Title: "bw streaming by eager limit", Metric: "bandwidth", X: "size",
			Where: map[string]string{"bench": "bw"}, Series: []string{"limit"}, LogX: true},
	},
}

func eagerTests(quick bool) []bench.Test {
	limits := []int{4 * kib, 16 * kib, 32 * kib, 64 * kib, 128 * kib, 256 * kib}
	sizes := []int{kib, 4 * kib, 16 * kib, 32 * kib, 64 * kib, 128 * kib, 256 * kib, mib}
	div := 1
	if quick {
		limits, sizes, div = []int{16 * kib, 64 * kib}, []int{32 * kib}, 20
	}
	var ts []bench.Test
	for _, name := range []string{"pingpong", "bw"} {
		for _, size := range sizes {
			iters := roundTrips(size) / 4
			if name == "bw" {
				iters = windows(size) / 2
			}
			for _, l := range limits {
				ls := strconv.Itoa(l)
				ts = append(ts, bench.Test{
					Args:  []string{"-bench", name, "-size", strconv.Itoa(size), "-iters", strconv.Itoa(max(iters/div, 2))},
					Ranks: 2, PerProc: 1, Weft: true,
					Env:    []string{"WEFT_NET_EAGER_LIMIT=" + ls, "WEFT_NET_UNIX=false"},
					Fields: []string{"path", "tcp", "limit", ls},
				})
			}
		}
	}
	return ts
}
