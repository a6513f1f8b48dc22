package threads

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/bench/twintest"
	"github.com/weft-mpi/weft/mpi"
)

// metrics are the summary metrics each test must print.
var metrics = map[string][]string{
	"overhead":   {"latency"},
	"latency":    {"latency"},
	"bw":         {"bandwidth"},
	"msgrate":    {"rate"},
	"shortlong":  {"short_mean", "short_max", "long"},
	"overlap":    {"time", "comm", "overlap"},
	"allreduce":  {"time"},
	"hidden":     {"compute", "time"},
	"latency_mt": {"latency"},
}

func runBody(t *testing.T, ranks int, args []string, opts ...mpi.Option) ([]bench.Line, error) {
	t.Helper()
	return twintest.RunWriter(t, ranks, func(c *mpi.Comm, out io.Writer) error { return run(c, args, out) }, opts...)
}

// checkLines checks the lines of one test: the row's fields, positive values,
// every summary metric once and, for shortlong, one line per iteration in order.
func checkLines(t *testing.T, args []string, ls []bench.Line, impl string) {
	t.Helper()
	test := twintest.Arg(args, "test", "")
	mode := twintest.Arg(args, "mode", "T")
	seen := map[string]int{}
	iters := 0
	for _, l := range ls {
		field := func(k string) string { v, _ := l.Field(k); return v }
		row := twintest.Row(l)
		if l.Bench != "threads" || l.Impl != impl || field("test") != test || field("mode") != mode {
			t.Errorf("%v: line %s impl=%s: want bench=threads impl=%s test=%s mode=%s", args, row, l.Impl, impl, test, mode)
		}
		for _, k := range []string{"pairs", "threads", "comms", "workers", "size"} {
			if want := twintest.Arg(args, k, ""); want != "" && field(k) != want {
				t.Errorf("%v: line %s: %s=%s, want %s", args, row, k, field(k), want)
			}
		}
		if v := l.Value; v < 0 || v == 0 && l.Unit != "percent" || l.Unit == "" {
			t.Errorf("%v: line %s value %g: want a positive value and a unit", args, row, v)
		}
		if l.Unit == "percent" && l.Value > 100 && l.Metric == "overlap" {
			t.Errorf("%v: overlap %v%% is above 100", args, l.Value)
		}
		if it, ok := l.Field("iter"); ok {
			if l.Metric != "short" || it != strconv.Itoa(iters) {
				t.Errorf("%v: line %s: want metric=short iter=%d", args, row, iters)
			}
			iters++
			continue
		}
		seen[l.Metric]++
	}
	for _, m := range metrics[test] {
		if seen[m] != 1 {
			t.Errorf("%v: metric %s printed %d times, want once", args, m, seen[m])
		}
	}
	if want := twintest.Arg(args, "iters", ""); test == "shortlong" && strconv.Itoa(iters) != want {
		t.Errorf("%v: %d per-iteration lines, want %s", args, iters, want)
	}
}

// TestQuickTests runs every quick test of the suite as the runner does (all
// ranks in one process) and checks what rank 0 printed.
func TestQuickTests(t *testing.T) {
	ts := Suite.Tests(true)
	tested := map[string]bool{}
	for _, tc := range ts {
		lines, err := runBody(t, tc.Ranks, tc.Args)
		if err != nil {
			t.Errorf("%v: %v", tc.Args, err)
			continue
		}
		checkLines(t, tc.Args, lines, "weft")
		tested[twintest.Arg(tc.Args, "test", "")+" "+twintest.Arg(tc.Args, "mode", "T")] = true
	}
	for test := range metrics {
		for _, mode := range []string{"P", "T"} {
			if !tested[test+" "+mode] && test != "latency_mt" {
				t.Errorf("the quick tests lack %s in mode %s", test, mode)
			}
		}
	}
	if !tested["latency_mt T"] {
		t.Error("the quick tests lack latency_mt")
	}
	if full := Suite.Tests(false); len(full) <= len(ts) {
		t.Errorf("the full suite has %d tests, the quick one %d", len(full), len(ts))
	}
}

func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		ranks int
		args  []string
		want  string // in the error
	}{
		{2, []string{"-test", "overhead", "-bogus", "1"}, "-bogus"},
		{2, []string{"-test", "overhead", "-size", "x"}, "-size"},
		{2, []string{"-test", "nosuch"}, "-test"},
		{2, []string{}, "-test"},
		{2, []string{"-test", "overhead", "extra"}, "extra"},
		{2, []string{"-test", "overhead", "-mode", "Q"}, "-mode"},
		{2, []string{"-test", "latency_mt", "-mode", "P"}, "-mode P"},
		{2, []string{"-test", "overhead", "-pairs", "2"}, "-pairs"},
		{2, []string{"-test", "bw", "-pairs", "0"}, "-pairs"},
		{2, []string{"-test", "bw", "-threads", "65"}, "-threads"},
		{2, []string{"-test", "bw", "-size", "-2"}, "-size"},
		{2, []string{"-test", "bw", "-iters", "-1"}, "-iters"},
		{2, []string{"-test", "overlap", "-work", "0"}, "-work"},
		{2, []string{"-test", "allreduce", "-mode", "T", "-size", "12"}, "-size"},
		{2, []string{"-test", "shortlong", "-size", "0"}, "-size"},
		{3, []string{"-test", "overhead"}, "needs 2 ranks"},
		{2, []string{"-test", "msgrate", "-mode", "P", "-pairs", "2"}, "needs 4 ranks"},
		{1, []string{"-test", "overlap"}, "at least 2 ranks"},
	} {
		lines, err := runBody(t, tc.ranks, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v on %d ranks: error %v, want one naming %q", tc.args, tc.ranks, err, tc.want)
		}
		if len(lines) != 0 {
			t.Errorf("%v: printed %v before failing", tc.args, lines)
		}
	}
	_, err := runBody(t, 2, []string{"-test", "msgrate", "-mode", "T"}, mpi.WithThreadLevel(mpi.ThreadFunneled))
	if err == nil || !strings.Contains(err.Error(), "thread level multiple") {
		t.Errorf("mode T at thread level funneled: error %v, want one asking for multiple", err)
	}
}

// TestTeamAbortsOnFailure checks that a goroutine's failure ends the job: its
// partner in the other rank would otherwise wait for it forever.
func TestTeamAbortsOnFailure(t *testing.T) {
	broken := errors.New("broken stream")
	err := mpi.Run(2, func(c *mpi.Comm) error {
		return team(c, 2, func(k int) error {
			if c.Rank() == 0 && k == 0 {
				return broken
			}
			_, err := mpi.Recv(c, []byte(nil), 1-c.Rank(), k)
			return err
		})
	})
	if !errors.Is(err, broken) || !errors.Is(err, mpi.ErrAborted) {
		t.Fatalf("Run returned %v, want the stream's error and ErrAborted", err)
	}
}

func TestCheckStamp(t *testing.T) {
	err := mpi.Run(2, func(c *mpi.Comm) error {
		buf := []byte{7, 0}
		if c.Rank() == 0 {
			return mpi.Send(c, buf, 1, 0)
		}
		st, err := mpi.Recv(c, buf, 0, 0)
		if err != nil {
			return err
		}
		if err := checkStamp(st, buf, 7); err != nil {
			return fmt.Errorf("the right stamp: %v", err)
		}
		if checkStamp(st, buf, 8) == nil || checkStamp(st, buf[:1], 7) == nil {
			return errors.New("checkStamp accepted a wrong stamp or length")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNeighbours checks that the grid is periodic and symmetric: the right
// neighbour's left neighbour is the rank itself, and so on.
func TestNeighbours(t *testing.T) {
	for _, size := range []int{2, 3, 4, 6, 9, 12} {
		for r := range size {
			nb := neighbours(r, size)
			for d, n := range nb {
				if n < 0 || n >= size || neighbours(n, size)[d^1] != r {
					t.Errorf("size %d rank %d: neighbour %d in direction %d does not point back", size, r, n, d)
				}
			}
		}
	}
	if got := neighbours(0, 4); got != [4]int{1, 1, 2, 2} {
		t.Errorf("neighbours of 0 on a 2x2 grid: %v", got)
	}
}

// TestTwin builds the C twin with MPICH and checks that it prints the same
// fields as the Weft body for the same arguments.
func TestTwin(t *testing.T) {
	tw := twintest.Build(t, "mpich", "threads.c")
	for _, args := range [][]string{
		{"-test", "msgrate", "-mode", "T", "-pairs", "2", "-iters", "2000"},
		{"-test", "overhead", "-mode", "P", "-size", "16", "-iters", "500"},
		{"-test", "overlap", "-mode", "T", "-iters", "10", "-work", "50"},
		{"-test", "hidden", "-mode", "T", "-iters", "5"},
		{"-test", "allreduce", "-mode", "T", "-comms", "2", "-iters", "20"},
		{"-test", "latency_mt", "-iters", "500"},
	} {
		c := tw.Run(t, 2, args...)
		checkLines(t, args, c, "mpich")
		w, err := runBody(t, 2, args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if len(c) != len(w) {
			t.Fatalf("%v: the twin printed %d lines, Weft %d", args, len(c), len(w))
		}
		for i := range c {
			if twintest.Row(c[i]) != twintest.Row(w[i]) {
				t.Errorf("%v line %d: the twin's row is %s, Weft's %s", args, i, twintest.Row(c[i]), twintest.Row(w[i]))
			}
		}
	}
	// a bad flag is refused with the flag's name and status 2, as Weft refuses it; on
	// one rank, since with two that both fail at once MPICH's mpiexec now and then
	// died of SIGPIPE before it forwarded either's output
	out, err := tw.Command(1, "-test", "bw", "-bogus", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-bogus") {
		t.Errorf("the twin with -bogus: %v\n%s", err, out)
	}
}
