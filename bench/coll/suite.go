// Package coll is the collectives suite of weft bench: TMPI's Fig. 13 (Reduce,
// Bcast, Allreduce with the root the same, rotating or rotating now and then, on
// layouts 4x1, 1x4 and 4x4), FG-MPI's Table II (barrier of 1 to 256 ranks in one
// proc, and on up to 65,536), and OSU-style size sweeps of every collective with
// 4 ranks in one proc. Its C twin is bench/peers/coll.c.
package coll

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weft-mpi/weft/internal/bench"
)

// Suite is the coll suite.
var Suite = bench.Suite{
	Name:  "coll",
	Title: "Collectives: TMPI Fig. 13, FG-MPI Table II, size sweeps",
	About: "Each test times one collective (-op) called again and again by every rank, " +
		"after a barrier, with mpi.Wtime (MPI_Wtime in the twin); value is the mean time of one " +
		"collective on the slowest rank (the maximum over ranks of each rank's elapsed time, " +
		"divided by the count). The count is calibrated: after a warm-up round, rounds grow " +
		"until one lasts -time seconds, so slow peers do not run for minutes. Reductions sum " +
		"float64s; the others move bytes; size is the bytes of one rank's buffer " +
		"(bcast, reduce, allreduce, scan, exscan) or of one block (one rank's part of " +
		"gather, scatter, allgather, alltoall, reduce_scatter_block and their v-forms, which " +
		"use equal blocks). Every collective's result is checked at its ends on every " +
		"iteration, so a broken one fails instead of looking fast. root is the root pattern of " +
		"TMPI Fig. 13: same (rank 0), rotate (rank i mod N at the i-th call) or combo (each " +
		"root four times in a row, then the next); none for collectives without a root. " +
		"ranks and procs are the layout: TMPI's AxB is ranks=A*B procs=B, Weft running B " +
		"procs of A ranks; the peers always run one process per rank on this one host, so " +
		"their 4x1 and 1x4 rows are the same experiment.",
	Twin:  "coll.c",
	Tests: tests,
	Body:  body,
	Plots: plots(),
}

// layout is TMPI's AxB: A ranks per proc on B procs.
type layout struct{ perProc, procs int }

var (
	fourByOne  = layout{4, 1}
	oneByFour  = layout{1, 4}
	fourByFour = layout{4, 4}
)

// spec is one test before it becomes arguments.
type spec struct {
	op   string
	size int // ignored for barrier
	root string
	at   layout
	weft bool
}

// key is the result row spec prints, to drop a test already in the list.
func (s spec) key() string {
	return fmt.Sprintf("%s %d %s %dx%d", s.op, s.size, s.root, s.at.perProc, s.at.procs)
}

// test makes the bench.Test of s, timing rounds of secs seconds.
func (s spec) test(secs float64) bench.Test {
	args := []string{"-op", s.op}
	col := collectives[s.op]
	if s.op != "barrier" {
		args = append(args, "-size", strconv.Itoa(s.size))
	}
	if col.rooted {
		args = append(args, "-root", s.root)
	}
	args = append(args, "-procs", strconv.Itoa(s.at.procs), "-time", strconv.FormatFloat(secs, 'g', -1, 64))
	ranks := s.at.perProc * s.at.procs
	t := bench.Test{Args: args, Ranks: ranks, PerProc: s.at.perProc, Weft: s.weft}
	if ranks >= 16 {
		// The peers' 16 busy-polling processes share 2 cores (100 ms per barrier);
		// 65,536 goroutines take a while to start.
		t.Timeout = 3 * time.Minute
	}
	return t
}

// sweepSizes are OSU's sizes as powers of 4, from 1 B to 1 MiB; reductions, which
// need whole float64s, start at one (8 B) and go on from 16 B.
func sweepSizes(reduces bool) []int {
	var sizes []int
	if reduces {
		sizes = append(sizes, 8)
	}
	for s := 1; s <= 1<<20; s *= 4 {
		if !reduces || s >= 8 {
			sizes = append(sizes, s)
		}
	}
	return sizes
}

// figure13 is TMPI's Fig. 13 on the three layouts, with the rows:
// barrier and allreduce of one and of 8192 float64s, and the allreduce of 8192
// float64s by 16 ranks in one proc against the peers' 16 processes (16 ranks'
// barrier is table2's).
func figure13() []spec {
	var s []spec
	for _, at := range []layout{fourByOne, oneByFour, fourByFour} {
		for _, op := range []string{"reduce", "bcast"} {
			for _, root := range []string{"same", "rotate", "combo"} {
				s = append(s, spec{op: op, size: 8, root: root, at: at})
			}
		}
		s = append(s,
			spec{op: "allreduce", size: 8, root: "same", at: at},
			spec{op: "allreduce", size: 8 * 8192, root: "same", at: at},
			spec{op: "barrier", root: "same", at: at})
	}
	return append(s, spec{op: "allreduce", size: 8 * 8192, root: "same", at: layout{16, 1}})
}

// table2 is FG-MPI's Table II, barrier of P ranks in one proc, and on to 65,536
// ranks; the peers, one process per rank on 2 cores, stop at 16.
func table2() []spec {
	var s []spec
	for _, p := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 16384, 65536} {
		s = append(s, spec{op: "barrier", root: "same", at: layout{p, 1}, weft: p > 16})
	}
	return s
}

// sweeps are the size sweeps of every collective but barrier, 4 ranks in one proc.
func sweeps() []spec {
	var s []spec
	for _, op := range opNames() {
		if op == "barrier" {
			continue
		}
		for _, size := range sweepSizes(collectives[op].reduces) {
			s = append(s, spec{op: op, size: size, root: "same", at: fourByOne})
		}
	}
	return s
}

// quick is a smoke test: a few rows of each table, one of them across procs.
func quick() []spec {
	return []spec{
		{op: "barrier", root: "same", at: fourByOne},
		{op: "bcast", size: 8, root: "rotate", at: fourByOne},
		{op: "reduce", size: 8, root: "combo", at: fourByOne},
		{op: "allreduce", size: 8, root: "same", at: oneByFour},
		{op: "alltoall", size: 1024, root: "same", at: fourByOne},
		{op: "barrier", root: "same", at: layout{256, 1}, weft: true},
	}
}

// tests lists the suite's runs, each row once. Rounds of 0.1 s for the tables
// and 0.03 s for the sweeps keep a full run with both peers and three rounds
// of every test near a quarter of an hour here (starting a peer's job takes
// 0.3 s, 1.5 s with 16 processes); the quick tests time 0.01 s.
func tests(isQuick bool) []bench.Test {
	var t []bench.Test
	seen := map[string]bool{}
	add := func(specs []spec, secs float64) {
		for _, s := range specs {
			if !seen[s.key()] {
				seen[s.key()] = true
				t = append(t, s.test(secs))
			}
		}
	}
	if isQuick {
		add(quick(), 0.01)
		return t
	}
	add(figure13(), 0.1)
	add(table2(), 0.1)
	add(sweeps(), 0.03)
	return t
}

// plots are barrier time against ranks in one proc, and each collective's time
// against size in the sweeps.
func plots() []bench.Plot {
	p := []bench.Plot{{
		File: "coll-barrier", Title: "Barrier, ranks in one proc (FG-MPI Table II)", Metric: "time", X: "ranks",
		Where: map[string]string{"op": "barrier", "procs": "1"}, LogX: true, LogY: true,
	}}
	for _, op := range opNames() {
		if op == "barrier" {
			continue
		}
		root := "none"
		if collectives[op].rooted {
			root = "same"
		}
		p = append(p, bench.Plot{
			File: "coll-" + op, Title: op + ", 4 ranks in one proc, against size", Metric: "time", X: "size",
			Where: map[string]string{"op": op, "ranks": "4", "procs": "1", "root": root}, LogX: true, LogY: true,
		})
	}
	return p
}
