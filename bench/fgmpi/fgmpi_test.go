package fgmpi

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/bench/twintest"
	"github.com/weft-mpi/weft/mpi"
)

// runBody runs the suite's body on ranks ranks of this process and returns
// the result lines it printed, failing the test on any other output.
func runBody(t *testing.T, ranks int, args ...string) ([]bench.Line, error) {
	t.Helper()
	return twintest.RunWriter(t, ranks, func(c *mpi.Comm, out io.Writer) error { return run(c, args, out) })
}

// checkRows checks that lines are the rows want, in order, of impl.
func checkRows(t *testing.T, lines []bench.Line, impl string, want ...string) {
	t.Helper()
	var got []string
	for _, l := range lines {
		got = append(got, twintest.Row(l))
		if l.Impl != impl {
			t.Errorf("impl=%s, want %s", l.Impl, impl)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func cannonRows(n, ranks, procs int) []string {
	r := fmt.Sprintf("cannon n=%d ranks=%d procs=%d", n, ranks, procs)
	return []string{r + " time ms", r + " rate MFLOPS"}
}

func collocatedRows(size int) []string {
	r := fmt.Sprintf("collocated size=%d", size)
	return []string{r + " message us", r + " copy us", r + " overhead us"}
}

// TestProductClosedForm checks the closed form against the sum it stands for.
func TestProductClosedForm(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 16} {
		for i := range n {
			for j := range n {
				sum := 0.0
				for k := range n {
					sum += entryA(i, k) * entryB(k, j)
				}
				if got := product(n, i, j); got != sum {
					t.Fatalf("n=%d: product(%d, %d) = %g, the sum is %g", n, i, j, got, sum)
				}
			}
		}
	}
	if product(4, 1, 2) == product(4, 2, 1) {
		t.Error("the product is symmetric: a transposed C would pass the check")
	}
}

// TestCannonLayouts multiplies on grids of 1 to 64 ranks, blocks of one
// element and more, and compares every entry of every block with a serial
// multiply of the same matrices (not the closed form the body checks with).
func TestCannonLayouts(t *testing.T) {
	for _, l := range []struct{ ranks, n int }{{1, 1}, {1, 6}, {4, 2}, {4, 8}, {9, 9}, {9, 12}, {16, 16}, {64, 64}} {
		t.Run(fmt.Sprintf("%d ranks n=%d", l.ranks, l.n), func(t *testing.T) {
			q := gridSide(l.ranks)
			err := mpi.Run(l.ranks, func(c *mpi.Comm) error {
				g := newGrid(c, l.n, q)
				for rep := range 2 {
					g.fill()
					if err := g.multiply(); err != nil {
						return err
					}
					for ii := range g.b {
						for jj := range g.b {
							i, j, want := g.row*g.b+ii, g.col*g.b+jj, 0.0
							for k := range l.n {
								want += entryA(i, k) * entryB(k, j)
							}
							if got := g.cm[ii*g.b+jj]; got != want {
								return fmt.Errorf("rep %d: C[%d][%d] = %g, want %g", rep, i, j, got, want)
							}
						}
					}
				}
				return g.check()
			})
			if err != nil {
				t.Fatal(err)
			}
			lines, err := runBody(t, l.ranks, "-bench", "cannon", "-n", strconv.Itoa(l.n), "-reps", "2")
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, lines, "weft", cannonRows(l.n, l.ranks, 1)...)
			for _, line := range lines {
				if !(line.Value > 0) {
					t.Errorf("%s: value %g", twintest.Row(line), line.Value)
				}
			}
		})
	}
}

// TestCheckCatchesWrongProducts breaks the multiply two ways (one entry off,
// blocks paired without the skew) and expects the check to fail.
func TestCheckCatchesWrongProducts(t *testing.T) {
	err := mpi.Run(4, func(c *mpi.Comm) error {
		g := newGrid(c, 8, 2)
		g.fill()
		if err := g.multiply(); err != nil {
			return err
		}
		if c.Rank() == 3 {
			g.cm[5] += 1
			if err := g.check(); err == nil || !strings.Contains(err.Error(), "C[5][5]") {
				return fmt.Errorf("an entry off by one passed the check: %v", err)
			}
		}
		g.fill()
		for range g.q { // no skew: rank (r, c) pairs A(r, c) with B(r, c)
			multiplyAdd(g.cm, g.a, g.bm, g.b)
		}
		if err := g.check(); err == nil {
			return errors.New("a product without the skew passed the check")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCollocated(t *testing.T) {
	for _, size := range []int{1, 8, 4096, 100_000} {
		lines, err := runBody(t, 2, "-bench", "collocated", "-size", strconv.Itoa(size), "-iters", "50", "-pool", "1000000")
		if err != nil {
			t.Fatal(err)
		}
		checkRows(t, lines, "weft", collocatedRows(size)...)
		// Values print with 6 significant digits: the difference is within the
		// rounding of the larger one (a copy may take longer than the message).
		msg, cp, over := lines[0].Value, lines[1].Value, lines[2].Value
		if !(msg > 0 && cp > 0) || math.Abs(over-(msg-cp)) > 1e-5*max(msg, cp) {
			t.Errorf("size %d: message %g, copy %g, overhead %g", size, msg, cp, over)
		}
	}
}

// TestPoolsPick checks that slots stay in the pool, whole, and vary.
func TestPoolsPick(t *testing.T) {
	p := newPools(100, 1000, 1)
	seen := map[int]bool{}
	for range 1000 {
		s := p.pick(p.src)
		at := -1
		for k := range 10 {
			if &p.src[k*100] == &s[0] {
				at = k
			}
		}
		if at < 0 || len(s) != 100 || cap(s) != 100 {
			t.Fatalf("a slice of %d bytes (cap %d) that is no slot", len(s), cap(s))
		}
		seen[at] = true
	}
	if len(seen) != 10 {
		t.Errorf("%d of 10 slots picked in 1000 draws", len(seen))
	}
	if q := newPools(64, 10, 1); q.slots != 2 {
		t.Errorf("a pool smaller than a message has %d slots, want 2", q.slots)
	}
}

func TestBadArgs(t *testing.T) {
	for _, tt := range []struct {
		ranks int
		args  []string
		want  string
	}{
		{2, []string{"-bogus", "1"}, "-bogus"},
		{2, []string{"-bench", "fft"}, `-bench "fft"`},
		{2, []string{"-size", "0"}, "-size 0"},
		{2, []string{"-size", "x"}, "-size"},
		{2, []string{"-size", "67108865"}, "-size 67108865"},
		{2, []string{"-iters", "0"}, "-iters 0"},
		{2, []string{"-pool", "0"}, "-pool 0"},
		{2, []string{"-n", "64"}, "-n is a flag of -bench cannon"},
		{2, []string{"-bench", "cannon", "-size", "8"}, "-size is a flag of -bench collocated"},
		{4, []string{"-bench", "cannon", "-n", "0"}, "-n 0"},
		{4, []string{"-bench", "cannon", "-n", "8193"}, "-n 8193"},
		{4, []string{"-bench", "cannon", "-reps", "0"}, "-reps 0"},
		{4, []string{"-bench", "cannon", "-procs", "0"}, "-procs 0"},
		{4, []string{"-bench", "cannon", "-procs", "2"}, "-procs 2: the job's 4 ranks are in procs of 4"},
		{4, []string{"-bench", "cannon", "-n", "9"}, "-n 9: cannon on 2x2 ranks"},
		{3, []string{"-bench", "cannon", "-n", "9"}, "square number of ranks, the job has 3"},
		{3, []string{"-bench", "collocated"}, "collocated needs 2 ranks"},
		{2, []string{"extra"}, `"extra"`},
	} {
		lines, err := runBody(t, tt.ranks, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q on %d ranks: error %v, want one saying %s", tt.args, tt.ranks, err, tt.want)
		}
		if len(lines) != 0 {
			t.Errorf("%q: printed %v", tt.args, lines)
		}
	}
}

// TestTests checks both lists: valid args, Cannon layouts that fit the
// flags, the peers kept to 16 processes, each row once, a short quick list.
func TestTests(t *testing.T) {
	for _, quick := range []bool{false, true} {
		seen := map[string]bool{}
		procs := map[int]bool{}
		for _, tt := range Suite.Tests(quick) {
			cf, err := parse(tt.Args)
			if err != nil {
				t.Fatalf("%q: %v", tt.Args, err)
			}
			key := strings.Join(tt.Args, " ") + " ranks=" + strconv.Itoa(tt.Ranks)
			if seen[key] {
				t.Errorf("%s twice", key)
			}
			seen[key] = true
			if tt.Weft != (tt.Ranks > peerRanks) {
				t.Errorf("%s: Weft-only is %v", key, tt.Weft)
			}
			if cf.bench == "collocated" {
				if tt.Ranks != 2 || (tt.PerProc != 0 && tt.PerProc != 2) {
					t.Errorf("%s: collocated over %d ranks, %d per proc", key, tt.Ranks, tt.PerProc)
				}
				continue
			}
			q := gridSide(tt.Ranks)
			if q == 0 || cf.n%q != 0 || tt.PerProc*cf.procs != tt.Ranks {
				t.Errorf("%s: %d per proc, a grid of side %d", key, tt.PerProc, q)
			}
			procs[cf.procs] = true
		}
		if !procs[1] || !procs[2] {
			t.Errorf("quick=%v: Cannon on procs %v, want 1 and 2", quick, procs)
		}
		if n := len(Suite.Tests(quick)); quick && n > 8 {
			t.Errorf("%d quick tests, want a few", n)
		}
	}
}

// TestQuickTests runs the quick tests that fit in one process as they are,
// and the others with their procs folded into one.
func TestQuickTests(t *testing.T) {
	for _, tt := range Suite.Tests(true) {
		args := slices.Clone(tt.Args)
		if i := slices.Index(args, "-procs"); i >= 0 {
			args[i+1] = "1"
		}
		t.Run(fmt.Sprintf("%s ranks=%d", strings.Join(tt.Args, " "), tt.Ranks), func(t *testing.T) {
			lines, err := runBody(t, tt.Ranks, args...)
			if err != nil {
				t.Fatal(err)
			}
			cf, _ := parse(args)
			if cf.bench == "cannon" {
				checkRows(t, lines, "weft", cannonRows(cf.n, tt.Ranks, 1)...)
			} else {
				checkRows(t, lines, "weft", collocatedRows(cf.size)...)
			}
		})
	}
}

// TestPlotsMatchLines checks that each plot selects lines the body prints
// and that its X is a field of theirs.
func TestPlotsMatchLines(t *testing.T) {
	col, err := runBody(t, 2, "-bench", "collocated", "-iters", "10", "-pool", "4096")
	if err != nil {
		t.Fatal(err)
	}
	can, err := runBody(t, 4, "-bench", "cannon", "-n", "8")
	if err != nil {
		t.Fatal(err)
	}
	// What is checked is which lines each plot selects, not their values: a short
	// run's overhead (message minus copy) may come out negative on a loaded
	// machine, and a logarithmic axis leaves such a point out.
	lines := append(col, can...)
	for i := range lines {
		lines[i].Value = float64(i + 1)
	}
	for _, p := range Suite.Plots {
		if svg, ok := bench.PlotSVG(p, lines); !ok || len(svg) == 0 {
			t.Errorf("plot %s draws nothing from the body's lines", p.File)
		}
	}
}

func TestTwin(t *testing.T) {
	for _, peer := range []string{"mpich", "openmpi"} {
		t.Run(peer, func(t *testing.T) {
			tw := twintest.Build(t, peer, Suite.Twin)
			for _, tc := range []struct {
				ranks int
				args  []string
				want  []string
			}{
				{2, []string{"-bench", "collocated", "-size", "4096", "-iters", "50", "-pool", "100000"}, collocatedRows(4096)},
				{1, []string{"-bench", "cannon", "-n", "12"}, cannonRows(12, 1, 1)},
				{4, []string{"-bench", "cannon", "-n", "16", "-procs", "2", "-reps", "2"}, cannonRows(16, 4, 2)},
			} {
				checkRows(t, tw.Run(t, tc.ranks, tc.args...), peer, tc.want...)
			}
			// The flags are read before MPI_Init: no launcher needed.
			for _, bad := range [][]string{{"-bench", "cannon", "-size", "8"}, {"-size", "0"}, {"-bench", "fft"}} {
				out, err := exec.Command(tw.Bin, bad...).CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || !strings.Contains(string(out), bad[len(bad)-2]) {
					t.Errorf("the twin given %q: %v\n%s", bad, err, out)
				}
			}
			out, err := tw.Command(3, "-bench", "cannon", "-n", "9").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "square") {
				t.Errorf("the twin on 3 processes: %v\n%s", err, out)
			}
		})
	}
}
