package kernels

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/cmplx"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/bench/twintest"
	"github.com/weft-mpi/weft/mpi"
)

// runBody runs the body on ranks ranks in this process and returns the
// result lines it printed (rank 0 alone prints).
func runBody(t *testing.T, ranks int, args []string) ([]bench.Line, error) {
	t.Helper()
	return twintest.RunWriter(t, ranks, func(c *mpi.Comm, out io.Writer) error { return run(c, args, out) })
}

// checkLines checks that lines are the result lines of args on ranks ranks,
// impl impl: time and mflops (and iter for sor), positive, with the row's
// fields taken from the flags themselves, not from the code under test.
func checkLines(t *testing.T, lines []bench.Line, args []string, ranks int, impl string) {
	t.Helper()
	flag := func(name, def string) string { return twintest.Arg(args, name, def) }
	row := map[string]string{"bench": "kernels", "impl": impl, "kernel": flag("kernel", ""),
		"ranks": strconv.Itoa(ranks), "n": flag("n", "256")}
	metrics := map[string]string{"time": "ms", "mflops": "MFLOPS"}
	if row["kernel"] == "sor" {
		row["iters"] = flag("iters", "10")
		metrics["iter"] = "us"
	}
	if len(lines) != len(metrics) {
		t.Fatalf("%d result lines, want %d: %v", len(lines), len(metrics), lines)
	}
	for _, l := range lines {
		if !(l.Value > 0) || math.IsInf(l.Value, 0) {
			t.Errorf("value=%g, want a positive number", l.Value)
		}
		if unit, ok := metrics[l.Metric]; !ok || l.Unit != unit {
			t.Errorf("metric=%q unit=%q, want one of %v", l.Metric, l.Unit, metrics)
		}
		delete(metrics, l.Metric)
		got := map[string]string{"bench": l.Bench, "impl": l.Impl}
		for _, f := range l.Row {
			got[f.Key] = f.Value
		}
		if !maps.Equal(got, row) {
			t.Errorf("fields %v, want %v", got, row)
		}
	}
}

// TestQuickTests runs every quick test's Body in one proc.
func TestQuickTests(t *testing.T) {
	for _, tt := range Suite.Tests(true) {
		t.Run(fmt.Sprintf("%s/%d", strings.Join(tt.Args, " "), tt.Ranks), func(t *testing.T) {
			lines, err := runBody(t, tt.Ranks, tt.Args)
			if err != nil {
				t.Fatal(err)
			}
			checkLines(t, lines, tt.Args, tt.Ranks, "weft")
		})
	}
}

// onRanks runs kernel k of order n (sor: 7 sweeps) on each number of ranks
// in counts: setup, reset, run and check; it gathers each rank's part of the
// result, in rank order, and compares them with want.
func onRanks(t *testing.T, k string, n int, counts []int, part func(in instance) []float64, want []float64, tol float64) {
	t.Helper()
	for _, p := range counts {
		parts := make([][]float64, p)
		err := mpi.Run(p, func(c *mpi.Comm) error {
			in := kernels[k].setup(c, config{kernel: k, n: n, iters: 7, reps: 1})
			in.reset()
			if err := in.run(); err != nil {
				return err
			}
			parts[c.Rank()] = slices.Clone(part(in))
			return in.check()
		})
		if err != nil {
			t.Fatalf("%s on %d ranks: %v", k, p, err)
		}
		near(t, fmt.Sprintf("%s on %d ranks", k, p), slices.Concat(parts...), want, tol)
	}
}

// near fails unless got and want agree within tol, element by element.
func near[T float64 | complex128](t *testing.T, what string, got, want []T, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := absDiff(got[i], want[i]); !(d <= tol) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestMatmulAgainstSerial compares the distributed product with a serial
// triple loop, on rank counts that do and do not divide n.
func TestMatmulAgainstSerial(t *testing.T) {
	const n = 13
	want := make([]float64, n*n)
	for i := range n {
		for j := range n {
			for k := range n {
				want[i*n+j] += uniform(seedA, i, k) * uniform(seedB, k, j)
			}
		}
	}
	onRanks(t, "matmul", n, []int{1, 2, 3, 4, 5}, func(in instance) []float64 { return in.(*matmul).c }, want, 1e-12)
}

// TestGaussSolves checks the solution on several rank counts, and that
// pivoting happens: the first column's largest element is not on row 0.
func TestGaussSolves(t *testing.T) {
	const n = 23
	want := make([]float64, n)
	for i := range want {
		want[i] = known(i)
	}
	col := make([]float64, n)
	for i := range col {
		col[i] = math.Abs(uniform(seedA, i, 0))
	}
	if slices.Index(col, slices.Max(col)) == 0 {
		t.Fatal("the test matrix needs no pivoting in its first column")
	}
	onRanks(t, "gauss", n, []int{1, 2, 3, 4, 7}, func(in instance) []float64 { return in.(*gauss).x }, want, 1e-10)
}

// TestFFTAgainstDFT transforms random input (not the suite's plane waves) and
// compares with the 2D DFT by its definition.
func TestFFTAgainstDFT(t *testing.T) {
	const n = 16
	input := func(j, k int) complex128 { return complex(uniform(7, j, k), uniform(8, j, k)) }
	want := make([]complex128, n*n)
	for u := range n {
		for v := range n {
			for j := range n {
				for k := range n {
					want[u*n+v] += input(j, k) * cmplx.Exp(complex(0, -2*math.Pi*float64(u*j+v*k)/n))
				}
			}
		}
	}
	for _, p := range []int{1, 2, 4, 8} {
		var parts [][]complex128 = make([][]complex128, p)
		err := mpi.Run(p, func(c *mpi.Comm) error {
			f := newFFT2D(c, config{kernel: "fft2d", n: n}).(*fft2d)
			for i := range f.m {
				for k := range n {
					f.a[i*n+k] = input(f.lo+i, k)
				}
			}
			err := f.run()
			parts[c.Rank()] = f.a
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		near(t, fmt.Sprintf("X on %d ranks", p), slices.Concat(parts...), want, 1e-10)
	}
}

// serialSOR is red-black SOR of the whole grid (n+2 wide, boundary included),
// written apart from the distributed code, for iters sweeps.
func serialSOR(u []float64, n, iters int) {
	w := n + 2
	for range iters {
		for colour := range 2 {
			for i := 1; i <= n; i++ {
				for j := 1; j <= n; j++ {
					if (i+j)%2 == colour {
						sum := u[(i-1)*w+j] + u[(i+1)*w+j] + u[i*w+j-1] + u[i*w+j+1]
						u[i*w+j] = (1-sorOmega)*u[i*w+j] + sorOmega/4*sum
					}
				}
			}
		}
	}
}

// TestSORAgainstSerial compares the distributed grid with a serial sweep of
// the same grid, bit for bit (red-black order makes them the same
// arithmetic), on rank counts that do and do not divide n.
func TestSORAgainstSerial(t *testing.T) {
	const n = 11
	var want []float64
	err := mpi.Run(1, func(c *mpi.Comm) error {
		in := newSOR(c, config{kernel: "sor", n: n, iters: 7})
		in.reset()
		want = slices.Clone(in.(*sor).u)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	serialSOR(want, n, 7)
	w := n + 2
	onRanks(t, "sor", n, []int{1, 2, 3, 4, 11}, func(in instance) []float64 {
		s := in.(*sor)
		return s.u[w : (s.rows+1)*w]
	}, want[w:(n+1)*w], 0)
}

// TestChecksCatchWrongResults spoils one element of one rank's result between
// run and check, and expects that rank's check to name it.
func TestChecksCatchWrongResults(t *testing.T) {
	// n = 16 on 2 ranks: rank 1's rows start at 8 (sor's interior rows at 9, 18 wide).
	for _, tt := range []struct {
		kernel string
		spoil  func(rank int, in instance)
		want   string
	}{
		{"matmul", func(r int, in instance) {
			if r == 1 {
				in.(*matmul).c[5] += 1e-3
			}
		}, "matmul: C x: rank 1: element 8 is"},
		{"gauss", func(r int, in instance) {
			if r == 0 {
				in.(*gauss).x[3] += 1e-6
			}
		}, "gauss: x: rank 0: element 3 is"},
		{"fft2d", func(r int, in instance) {
			if r == 1 {
				in.(*fft2d).a[2] += 1e-3
			}
		}, "fft2d: X: rank 1: element 130 is"},
		{"sor", func(r int, in instance) {
			if r == 1 {
				in.(*sor).u[18+3] *= 1.0001
			}
		}, "sor: u: rank 1: element 165 is"},
	} {
		t.Run(tt.kernel, func(t *testing.T) {
			err := mpi.Run(2, func(c *mpi.Comm) error {
				in := kernels[tt.kernel].setup(c, config{kernel: tt.kernel, n: 16, iters: 3, reps: 1})
				for spoil := range 2 {
					in.reset()
					if err := in.run(); err != nil {
						return err
					}
					if spoil == 1 {
						tt.spoil(c.Rank(), in)
						return in.check()
					}
					if err := in.check(); err != nil {
						return fmt.Errorf("a right result rejected: %w", err)
					}
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBadArgs(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		ranks int
		want  string
	}{
		{[]string{"-bogus", "1"}, 2, "-bogus"},
		{[]string{"-kernel", "matmul", "-n", "x"}, 2, "-n"},
		{[]string{}, 2, `-kernel ""`},
		{[]string{"-kernel", "lu"}, 2, `-kernel "lu"`},
		{[]string{"-kernel", "matmul", "-n", "1"}, 1, "-n 1"},
		{[]string{"-kernel", "matmul", "-n", "4097"}, 1, "-n 4097"},
		{[]string{"-kernel", "matmul", "-n", "3"}, 4, "-n 3: want at least one row per rank"},
		{[]string{"-kernel", "gauss", "-iters", "5"}, 2, "-iters: only sor"},
		{[]string{"-kernel", "sor", "-iters", "0"}, 2, "-iters 0"},
		{[]string{"-kernel", "sor", "-reps", "0"}, 2, "-reps 0"},
		{[]string{"-kernel", "fft2d", "-n", "24"}, 2, "power of two"},
		{[]string{"-kernel", "fft2d", "-n", "16"}, 3, "the ranks must divide it (3 ranks)"},
		{[]string{"-kernel", "sor", "extra"}, 2, `"extra"`},
	} {
		lines, err := runBody(t, tt.ranks, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q on %d ranks: error %v, want one naming %s", tt.args, tt.ranks, err, tt.want)
		}
		if len(lines) != 0 {
			t.Errorf("%q: printed %v", tt.args, lines)
		}
	}
}

// TestFullTests checks the full list: valid args that fit their ranks, each
// row once, every kernel on 1 to 16 ranks.
func TestFullTests(t *testing.T) {
	rows := map[string]bool{}
	for _, tt := range Suite.Tests(false) {
		cfg, err := parse(tt.Args)
		if err != nil {
			t.Fatalf("%q: %v", tt.Args, err)
		}
		if err := kernels[cfg.kernel].fit(cfg.n, tt.Ranks); err != nil {
			t.Errorf("%q on %d ranks: %v", tt.Args, tt.Ranks, err)
		}
		if tt.PerProc != tt.Ranks {
			t.Errorf("%q on %d ranks: %d per proc, want one proc", tt.Args, tt.Ranks, tt.PerProc)
		}
		if weft := cfg.kernel == "gauss" && tt.Ranks == 16; tt.Weft != weft {
			t.Errorf("%q on %d ranks: Weft-only is %v, want %v", tt.Args, tt.Ranks, tt.Weft, weft)
		}
		row := fmt.Sprint(cfg.row(tt.Ranks))
		if rows[row] {
			t.Errorf("row %s twice", row)
		}
		rows[row] = true
	}
	for _, k := range kernelNames() {
		for _, p := range []int{1, 2, 4, 8, 16} {
			cfg := config{kernel: k, n: plans[k].full, iters: plans[k].iters}
			if !rows[fmt.Sprint(cfg.row(p))] {
				t.Errorf("no test of %s on %d ranks", k, p)
			}
		}
	}
	if q := Suite.Tests(true); len(q) > 12 {
		t.Errorf("%d quick tests, want a few", len(q))
	}
}

// TestPlotsMatchLines checks that each plot selects lines the suite prints.
func TestPlotsMatchLines(t *testing.T) {
	if len(Suite.Plots) != len(kernels) {
		t.Errorf("%d plots, want one per kernel", len(Suite.Plots))
	}
	for _, p := range Suite.Plots {
		cfg := config{kernel: p.Where["kernel"], n: 8, iters: 1}
		row := map[string]string{}
		for f := cfg.row(2); len(f) > 0; f = f[2:] {
			row[f[0]] = f[1]
		}
		for k, v := range p.Where {
			if row[k] != v {
				t.Errorf("plot %s wants %s=%s, the lines have %q", p.File, k, v, row[k])
			}
		}
		for _, f := range append([]string{p.X}, p.Series...) {
			if _, ok := row[f]; !ok {
				t.Errorf("plot %s: no field %s", p.File, f)
			}
		}
	}
}

// TestTwinMPICH builds the C twin with MPICH and checks that it prints the rows
// Weft prints for the same arguments, and refuses what Weft refuses.
func TestTwinMPICH(t *testing.T) {
	tw := twintest.Build(t, "mpich", Suite.Twin)
	for _, tt := range []struct {
		ranks int
		args  []string
	}{
		{3, []string{"-kernel", "matmul", "-n", "40", "-reps", "1"}},
		{3, []string{"-kernel", "gauss", "-n", "40", "-reps", "2"}},
		{2, []string{"-kernel", "fft2d", "-n", "32", "-reps", "1"}},
		{3, []string{"-kernel", "sor", "-n", "40", "-iters", "5", "-reps", "1"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			checkLines(t, tw.Run(t, tt.ranks, tt.args...), tt.args, tt.ranks, "mpich")
			lines, err := runBody(t, tt.ranks, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			checkLines(t, lines, tt.args, tt.ranks, "weft")
		})
	}
	for _, tt := range []struct {
		ranks int
		args  []string
		want  string
	}{
		{2, []string{"-kernel", "fft2d", "-n", "24"}, "power of two"},
		{3, []string{"-kernel", "fft2d", "-n", "16"}, "the ranks must divide it (3 ranks)"},
		{4, []string{"-kernel", "sor", "-n", "3"}, "-n 3: want at least one row per rank"},
		{1, []string{"-kernel", "gauss", "-iters", "5"}, "-iters: only sor"},
		{1, []string{"-kernel", "lu"}, `-kernel "lu"`},
	} {
		var exit *exec.ExitError
		out, err := tw.Command(tt.ranks, tt.args...).CombinedOutput()
		if !errors.As(err, &exit) || !strings.Contains(string(out), tt.want) {
			t.Errorf("the twin given %q on %d ranks: %v, want an error naming %s\n%s", tt.args, tt.ranks, err, tt.want, out)
		}
	}
}
