package p2p

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// run runs one configuration of the body in n goroutine ranks and returns
// rank 0's result lines, parsed.
func run(t *testing.T, n int, args ...string) []bench.Line {
	t.Helper()
	cfg, err := parse(args)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.out = &out
	if err := mpi.Run(n, cfg.run); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var lines []bench.Line
	for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		l, ok := bench.ParseLine(s)
		if !ok {
			t.Fatalf("%v printed a line that is not a result: %q", args, s)
		}
		lines = append(lines, l)
	}
	return lines
}

func TestEveryBenchReportsItsRow(t *testing.T) {
	for _, tc := range []struct {
		ranks   int
		args    []string
		row     string // the row field and value
		metrics []string
	}{
		{2, []string{"-bench", "pingpong", "-size", "64", "-iters", "50"}, "size=64", []string{"latency", "bandwidth"}},
		{2, []string{"-bench", "bw", "-size", "1024", "-iters", "5"}, "size=1024", []string{"bandwidth"}},
		{2, []string{"-bench", "bibw", "-size", "1024", "-iters", "5"}, "size=1024", []string{"bandwidth"}},
		{2, []string{"-bench", "oneway", "-size", "8", "-iters", "100"}, "size=8", []string{"time", "bandwidth"}},
		{4, []string{"-bench", "msgrate", "-pairs", "2", "-iters", "600"}, "pairs=2", []string{"rate"}},
	} {
		lines := run(t, tc.ranks, tc.args...)
		if len(lines) != len(tc.metrics) {
			t.Fatalf("%v: %d lines, want %d", tc.args, len(lines), len(tc.metrics))
		}
		for i, l := range lines {
			if l.Bench != tc.args[1] || l.Impl != "weft" || l.Metric != tc.metrics[i] || l.Value <= 0 ||
				len(l.Row) != 1 || l.Row[0].Key+"="+l.Row[0].Value != tc.row {
				t.Errorf("%v: line %d is %+v", tc.args, i, l)
			}
		}
	}
}

func TestBadArgumentsAreErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-bench", "pingpong"}, // no -iters
		{"-bench", "latency_mt", "-iters", "5"},
		{"-bench", "bw", "-size", "-1", "-iters", "5"},
		{"-bench", "msgrate", "-pairs", "0", "-iters", "5"},
		{"-iters", "5", "extra"},
		{"-nosuchflag"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	err := mpi.Run(3, func(c *mpi.Comm) error { return body(c, []string{"-bench", "pingpong", "-iters", "1"}) })
	if err == nil || !strings.Contains(err.Error(), "needs 2 ranks, the job has 3") {
		t.Errorf("3 ranks for pingpong: %v", err)
	}
}

func TestSuitesAreWellFormed(t *testing.T) {
	for _, s := range []bench.Suite{Suite, EagerSweep} {
		for _, quick := range []bool{true, false} {
			ts := s.Tests(quick)
			if len(ts) == 0 {
				t.Fatalf("%s: no tests (quick %v)", s.Name, quick)
			}
			for _, tc := range ts {
				cfg, err := parse(tc.Args)
				if err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
				if cfg.ranks != tc.Ranks || len(tc.Fields)%2 != 0 || (tc.PerProc > 0 && tc.Ranks%tc.PerProc != 0) {
					t.Errorf("%s: test %+v: the body wants %d ranks", s.Name, tc, cfg.ranks)
				}
			}
		}
	}
	if n := len(Suite.Tests(true)); n > 10 {
		t.Errorf("p2p has %d quick tests; a smoke test must stay short", n)
	}
}

// BenchmarkMessageRate1P is the message rate of one pair of ranks (Thakur and
// Gropp's 1P-1P, inside one process); ns/op is per message.
func BenchmarkMessageRate1P(b *testing.B) {
	err := mpi.Run(2, func(c *mpi.Comm) error { return ratePair(c, c.Rank() == 0, 1-c.Rank(), 0, b.N) })
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMessageRate4T is the message rate of 4 goroutines of rank 0 sending to 4
// of rank 1 (Thakur and Gropp's 4T-4T); ns/op is per message.
func BenchmarkMessageRate4T(b *testing.B) {
	const pairs = 4
	err := mpi.Run(2, func(c *mpi.Comm) error {
		errs := make([]error, pairs)
		var wg sync.WaitGroup
		for t := range pairs {
			wg.Go(func() { errs[t] = ratePair(c, c.Rank() == 0, 1-c.Rank(), t, b.N/pairs+1) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStream8B is OSU's bandwidth test at 8 bytes: windows of 64 Isend and
// Irecv, each completed with Waitall; ns/op is per message.
func BenchmarkStream8B(b *testing.B) {
	cfg := config{bench: "bw", size: 8, iters: b.N/window + 1, ranks: 2, out: &bytes.Buffer{}}
	if err := mpi.Run(2, func(c *mpi.Comm) error { return cfg.bandwidth(c, false) }); err != nil {
		b.Fatal(err)
	}
}
