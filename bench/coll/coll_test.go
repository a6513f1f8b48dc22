package coll

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/bench/twintest"
	"github.com/weft-mpi/weft/mpi"
)

// runBody runs Body on ranks ranks in this process and returns the result lines
// it printed.
func runBody(t *testing.T, ranks int, args []string) ([]bench.Line, error) {
	t.Helper()
	return twintest.RunBody(t, Suite, ranks, args...)
}

// want is the row a run of args on ranks ranks must print, from the flags
// themselves (not from the code under test).
func want(args []string, ranks int) map[string]string {
	flag := func(name, def string) string { return twintest.Arg(args, name, def) }
	row := map[string]string{
		"bench": "coll", "metric": "time", "unit": "us",
		"op": flag("op", "barrier"), "ranks": strconv.Itoa(ranks), "procs": flag("procs", "1"),
		"root": flag("root", "same"), "size": flag("size", "8"),
	}
	switch row["op"] {
	case "barrier":
		row["root"], row["size"] = "none", "0"
	case "allreduce", "allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter_block", "scan", "exscan":
		row["root"] = "none"
	}
	return row
}

// checkLine checks that lines is one result line of the row want, impl impl,
// with a positive value.
func checkLine(t *testing.T, lines []bench.Line, want map[string]string, impl string) {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("%d result lines, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	if !(l.Value > 0) {
		t.Errorf("value=%g, want a positive number", l.Value)
	}
	if l.Impl != impl {
		t.Errorf("impl=%q, want %q", l.Impl, impl)
	}
	got := map[string]string{"bench": l.Bench, "metric": l.Metric, "unit": l.Unit}
	for _, f := range l.Row {
		got[f.Key] = f.Value
	}
	if !maps.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}

// TestQuickTests runs every quick test's Body in one proc.
func TestQuickTests(t *testing.T) {
	for _, tt := range Suite.Tests(true) {
		t.Run(strings.Join(tt.Args, " "), func(t *testing.T) {
			lines, err := runBody(t, tt.Ranks, tt.Args)
			if err != nil {
				t.Fatal(err)
			}
			checkLine(t, lines, want(tt.Args, tt.Ranks), "weft")
		})
	}
}

// TestEveryCollective runs each collective with each root pattern on 3 ranks,
// long enough for combo to move its root, at sizes of one element and of a few.
func TestEveryCollective(t *testing.T) {
	for _, op := range opNames() {
		roots := []string{"same"}
		if collectives[op].rooted {
			roots = append(roots, "rotate", "combo")
		}
		sizes := []string{"1", "24"}
		switch {
		case op == "barrier":
			sizes = []string{""}
		case collectives[op].reduces:
			sizes = []string{"8", "24"}
		}
		for _, root := range roots {
			for _, size := range sizes {
				args := []string{"-op", op, "-root", root, "-iters", "10"}
				if size != "" {
					args = append(args, "-size", size)
				}
				t.Run(strings.Join(args, " "), func(t *testing.T) {
					lines, err := runBody(t, 3, args)
					if err != nil {
						t.Fatal(err)
					}
					checkLine(t, lines, want(args, 3), "weft")
				})
			}
		}
	}
}

func TestRootPatterns(t *testing.T) {
	var got []int
	for i := range 10 {
		got = append(got, rootOf("combo", i, 3))
	}
	if want := []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("combo roots %v, want %v", got, want)
	}
	if r := rootOf("rotate", 7, 3); r != 1 {
		t.Errorf("rotate root of call 7 of 3 ranks is %d, want 1", r)
	}
	if r := rootOf("same", 7, 3); r != 0 {
		t.Errorf("same root is %d, want 0", r)
	}
}

// TestChecksCatchWrongResults feeds the result checks wrong buffers.
func TestChecksCatchWrongResults(t *testing.T) {
	err := mpi.Run(1, func(c *mpi.Comm) error {
		buf := blocked(3, 4, mark)
		if err := checkBlocks(c, "gather", buf, 3, 4, 1, 0); err != nil {
			return fmt.Errorf("right blocks rejected: %w", err)
		}
		clearBlocks(buf, 3, 4)
		buf[0] = mark(0)
		err := checkBlocks(c, "gather", buf, 3, 4, 1, 0)
		if err == nil || !strings.Contains(err.Error(), "element 3 is 0, want 1") {
			return fmt.Errorf("a cleared block end gave %v", err)
		}
		v := filled(5, 6.0)
		if err := checkEnds(c, "allreduce", v, 6); err != nil {
			return fmt.Errorf("right sums rejected: %w", err)
		}
		v[4] = 5
		if err := checkEnds(c, "allreduce", v, 6); err == nil || !strings.Contains(err.Error(), "element 4 is 5, want 6") {
			return fmt.Errorf("a wrong sum gave %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadArgs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus", "1"}, "-bogus"},
		{[]string{"-size", "x", "-op", "bcast"}, "-size"},
		{[]string{"-op", "nope"}, `-op "nope"`},
		{[]string{"-op", "bcast", "-root", "left"}, `-root "left"`},
		{[]string{"-op", "allreduce", "-root", "rotate"}, "allreduce has no root"},
		{[]string{"-op", "barrier", "-size", "8"}, "-size: barrier"},
		{[]string{"-op", "allreduce", "-size", "12"}, "-size 12"},
		{[]string{"-op", "scan", "-size", "0"}, "-size 0"},
		{[]string{"-op", "gather", "-size", "0"}, "-size 0"},
		{[]string{"-op", "gather", "-size", "16777217"}, "-size 16777217"},
		{[]string{"-procs", "0"}, "-procs 0"},
		{[]string{"-procs", "3"}, "-procs 3 does not divide"},
		{[]string{"-iters", "-1"}, "-iters -1"},
		{[]string{"-time", "0"}, "-time 0"},
		{[]string{"extra"}, `"extra"`},
	} {
		lines, err := runBody(t, 2, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one naming %s", tt.args, err, tt.want)
		}
		if len(lines) != 0 {
			t.Errorf("%q: printed %v", tt.args, lines)
		}
	}
}

// TestFullTests checks the full list: each row once, the args valid, the peers
// kept to 16 processes, and the tables and sweeps all there.
func TestFullTests(t *testing.T) {
	rows := map[string]bool{}
	for _, tt := range Suite.Tests(false) {
		cfg, err := parse(tt.Args)
		if err != nil {
			t.Fatalf("%q: %v", tt.Args, err)
		}
		if tt.PerProc < 1 || tt.Ranks%tt.PerProc != 0 || tt.Ranks/tt.PerProc != cfg.procs {
			t.Errorf("%q: %d ranks, %d per proc, -procs %d", tt.Args, tt.Ranks, tt.PerProc, cfg.procs)
		}
		if tt.Weft != (tt.Ranks > 16) {
			t.Errorf("%q on %d ranks: Weft-only is %v", tt.Args, tt.Ranks, tt.Weft)
		}
		row := fmt.Sprintf("%s %d %s %d %d", cfg.op, cfg.size, cfg.root, tt.Ranks, cfg.procs)
		if rows[row] {
			t.Errorf("row %s twice", row)
		}
		rows[row] = true
	}
	for _, row := range []string{
		"bcast 8 combo 16 4", "reduce 8 rotate 4 4", "reduce 8 same 4 1", "allreduce 65536 same 16 4", "allreduce 65536 same 16 1",
		"barrier 0 same 4 4", "barrier 0 same 256 1", "barrier 0 same 65536 1", "barrier 0 same 1 1",
		"alltoallv 1 same 4 1", "alltoallv 1048576 same 4 1", "exscan 8 same 4 1", "scatter 4096 same 4 1",
	} {
		if !rows[row] {
			t.Errorf("no test of row %s", row)
		}
	}
	// 27 of Fig. 13 and 16 ranks' allreduce in one proc; 12 more of Table II (4 ranks is in Fig. 13); 149 of the
	// sweeps less 3 in Fig. 13 (reduce and allreduce of 8 B, allreduce of 64 KiB).
	if want := 28 + 12 + 146; len(rows) != want {
		t.Errorf("%d tests, want %d", len(rows), want)
	}
	if q := Suite.Tests(true); len(q) > 8 {
		t.Errorf("%d quick tests, want a few", len(q))
	}
}

// TestPlotsMatchLines checks that each plot selects lines the suite prints.
func TestPlotsMatchLines(t *testing.T) {
	byOp := map[string]map[string]string{}
	for _, tt := range Suite.Tests(false) {
		if tt.Ranks <= 4 {
			cfg, _ := parse(tt.Args)
			byOp[cfg.op] = want(tt.Args, tt.Ranks)
		}
	}
	if len(Suite.Plots) != len(collectives) {
		t.Errorf("%d plots, want one per collective", len(Suite.Plots))
	}
	for _, p := range Suite.Plots {
		line := byOp[p.Where["op"]]
		for k, v := range p.Where {
			if line[k] != v {
				t.Errorf("plot %s wants %s=%s, lines of %s have %q", p.File, k, v, p.Where["op"], line[k])
			}
		}
		if _, ok := line[p.X]; !ok {
			t.Errorf("plot %s: no field %s", p.File, p.X)
		}
	}
}

// TestTwinMPICH builds the C twin with MPICH and checks that it prints the row
// Weft prints for the same arguments.
func TestTwinMPICH(t *testing.T) {
	tw := twintest.Build(t, "mpich", Suite.Twin)
	for _, args := range [][]string{
		{"-op", "allreduce", "-size", "8", "-time", "0.01"},
		{"-op", "gatherv", "-size", "100", "-root", "rotate", "-procs", "2", "-time", "0.01"},
		{"-op", "alltoall", "-size", "64", "-iters", "20"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			checkLine(t, tw.Run(t, 2, args...), want(args, 2), "mpich")
			lines, err := runBody(t, 2, args)
			if err != nil {
				t.Fatal(err)
			}
			checkLine(t, lines, want(args, 2), "weft")
		})
	}
	var exit *exec.ExitError
	out, err := tw.Command(1, "-op", "allreduce", "-size", "12").CombinedOutput()
	if !errors.As(err, &exit) || !strings.Contains(string(out), "-size 12") {
		t.Errorf("the twin given -size 12 for allreduce: %v\n%s", err, out)
	}
}
