package topo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// expand is the reference: the address of every rank, by walking the map one rank at a time.
func expand(hosts [][]int) []Addr {
	var out []Addr
	proc := 0
	for h, ps := range hosts {
		for _, n := range ps {
			for i := range n {
				out = append(out, Addr{Host: h, Proc: proc, Local: i})
			}
			proc++
		}
	}
	return out
}

// blockMap is Block's shape as an explicit map.
func blockMap(p, o, m int) [][]int {
	hosts := make([][]int, m)
	for h := range hosts {
		hosts[h] = make([]int, o)
		for i := range hosts[h] {
			hosts[h][i] = p
		}
	}
	return hosts
}

func mustBlock(t testing.TB, p, o, m int) *Layout {
	t.Helper()
	l, err := Block(p, o, m)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustUneven(t testing.TB, hosts [][]int) *Layout {
	t.Helper()
	l, err := Uneven(hosts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkAgainst compares every query of l with the reference map.
func checkAgainst(t *testing.T, l *Layout, hosts [][]int) {
	t.Helper()
	want := expand(hosts)
	nprocs := 0
	for _, ps := range hosts {
		nprocs += len(ps)
	}
	if l.Size() != len(want) || l.Procs() != nprocs || l.Hosts() != len(hosts) {
		t.Fatalf("%v: Size, Procs, Hosts = %d, %d, %d, want %d, %d, %d",
			l, l.Size(), l.Procs(), l.Hosts(), len(want), nprocs, len(hosts))
	}
	for r, w := range want {
		a, err := l.Locate(r)
		if err != nil || a != w {
			t.Fatalf("%v: Locate(%d) = %+v, %v, want %+v", l, r, a, err, w)
		}
	}
	proc := 0
	for h, ps := range hosts {
		first, n, err := l.HostProcs(h)
		if err != nil || first != proc || n != len(ps) {
			t.Fatalf("%v: HostProcs(%d) = %d, %d, %v, want %d, %d", l, h, first, n, err, proc, len(ps))
		}
		for _, size := range ps {
			f, n, err := l.ProcRanks(proc)
			if err != nil || n != size || want[f] != (Addr{h, proc, 0}) {
				t.Fatalf("%v: ProcRanks(%d) = %d, %d, %v, want %d ranks starting at local 0",
					l, proc, f, n, err, size)
			}
			if hh, err := l.HostOf(proc); err != nil || hh != h {
				t.Fatalf("%v: HostOf(%d) = %d, %v, want %d", l, proc, hh, err, h)
			}
			proc++
		}
	}
}

func TestBlock(t *testing.T) {
	for _, c := range []struct {
		p, o, m int
		str     string
		want    []Addr // nil: only the reference
	}{
		{1, 1, 1, "[1;1;1]", []Addr{{0, 0, 0}}},
		{4, 1, 1, "[4;1;1]", []Addr{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 0, 3}}},
		{1, 4, 1, "[1;4;1]", []Addr{{0, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}}},
		{1, 1, 4, "[1;1;4]", []Addr{{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {3, 3, 0}}},
		{4, 4, 1, "[4;4;1]", nil},
		{4, 1, 4, "[4;1;4]", nil},
		{2, 3, 2, "[2;3;2]", []Addr{
			{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}, {0, 2, 0}, {0, 2, 1},
			{1, 3, 0}, {1, 3, 1}, {1, 4, 0}, {1, 4, 1}, {1, 5, 0}, {1, 5, 1},
		}},
		{3, 2, 5, "[3;2;5]", nil},
	} {
		t.Run(c.str, func(t *testing.T) {
			l := mustBlock(t, c.p, c.o, c.m)
			if got := l.String(); got != c.str {
				t.Errorf("String() = %q, want %q", got, c.str)
			}
			if p, o, ok := l.Uniform(); !ok || p != c.p || o != c.o {
				t.Errorf("Uniform() = %d, %d, %v, want %d, %d, true", p, o, ok, c.p, c.o)
			}
			if c.want != nil && fmt.Sprint(expand(blockMap(c.p, c.o, c.m))) != fmt.Sprint(c.want) {
				t.Fatalf("reference disagrees with the table") // guards the reference itself
			}
			checkAgainst(t, l, blockMap(c.p, c.o, c.m))
		})
	}
}

func TestUneven(t *testing.T) {
	for _, c := range []struct {
		hosts   [][]int
		str     string
		uniform bool
		want    []Addr
	}{
		{[][]int{{1}}, "[1;1;1]", true, []Addr{{0, 0, 0}}},
		{[][]int{{4}}, "[4;1;1]", true, nil},
		{[][]int{{1, 1, 1, 1}}, "[1;4;1]", true, nil},
		{[][]int{{4, 4, 4, 4}}, "[4;4;1]", true, nil},
		{[][]int{{2, 2, 2}, {2, 2, 2}}, "[2;3;2]", true, nil},
		{[][]int{{3, 2}}, "3+2", false, []Addr{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 1, 0}, {0, 1, 1}}},
		{[][]int{{3, 2}, {4}}, "3+2,4", false, []Addr{
			{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 1, 0}, {0, 1, 1},
			{1, 2, 0}, {1, 2, 1}, {1, 2, 2}, {1, 2, 3},
		}},
		{[][]int{{2}, {2, 2}}, "2,2+2", false, nil}, // same proc sizes, different proc counts
		{[][]int{{1}, {5, 1, 7}, {1}}, "1,5+1+7,1", false, nil},
		{[][]int{{8, 16, 9}}, "8+16+9", false, nil}, // bucket width 8
	} {
		t.Run(c.str, func(t *testing.T) {
			l := mustUneven(t, c.hosts)
			if got := l.String(); got != c.str {
				t.Errorf("String() = %q, want %q", got, c.str)
			}
			if _, _, ok := l.Uniform(); ok != c.uniform {
				t.Errorf("Uniform() ok = %v, want %v", ok, c.uniform)
			}
			if c.want != nil && fmt.Sprint(expand(c.hosts)) != fmt.Sprint(c.want) {
				t.Fatalf("reference disagrees with the table")
			}
			checkAgainst(t, l, c.hosts)
		})
	}
}

// TestUnevenCopies checks that the layout does not alias the caller's map.
func TestUnevenCopies(t *testing.T) {
	hosts := [][]int{{3, 2}, {4}}
	l := mustUneven(t, hosts)
	hosts[0][0], hosts[1][0] = 1, 1
	if l.String() != "3+2,4" || l.Size() != 9 {
		t.Fatalf("layout changed with its input: %v, %d ranks", l, l.Size())
	}
}

// layouts for the property tests: uniform, uneven, and random uneven maps.
func propertyLayouts(t *testing.T) map[string]*Layout {
	ls := map[string]*Layout{}
	for _, b := range [][3]int{{1, 1, 1}, {4, 4, 4}, {2, 3, 2}, {7, 1, 3}, {1, 5, 2}, {1000, 2, 3}} {
		l := mustBlock(t, b[0], b[1], b[2])
		ls[l.String()] = l
	}
	for _, m := range [][][]int{{{3, 2}}, {{3, 2}, {4}}, {{1}, {100, 1}, {2, 2, 2}}, {{64, 65, 127, 128, 129}}} {
		l := mustUneven(t, m)
		ls[l.String()] = l
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		m := make([][]int, 1+rng.IntN(6))
		for h := range m {
			m[h] = make([]int, 1+rng.IntN(5))
			for p := range m[h] {
				m[h][p] = 1 + rng.IntN(1<<rng.IntN(9))
			}
		}
		l := mustUneven(t, m)
		ls[fmt.Sprintf("random%d", i)] = l
		checkAgainst(t, l, m)
	}
	return ls
}

// TestInverse: Locate and Rank are inverses over every rank and every (proc, local), and
// HostOf, ProcRanks, HostProcs, SameProc and SameHost agree with Locate.
func TestInverse(t *testing.T) {
	for name, l := range propertyLayouts(t) {
		t.Run(name, func(t *testing.T) {
			addrs := make([]Addr, l.Size())
			for r := range l.Size() {
				a, err := l.Locate(r)
				if err != nil {
					t.Fatalf("Locate(%d): %v", r, err)
				}
				addrs[r] = a
				if back, err := l.Rank(a.Proc, a.Local); err != nil || back != r {
					t.Fatalf("Rank(Locate(%d) = %+v) = %d, %v", r, a, back, err)
				}
				if h, err := l.HostOf(a.Proc); err != nil || h != a.Host {
					t.Fatalf("HostOf(%d) = %d, %v, want %d", a.Proc, h, err, a.Host)
				}
				first, n, err := l.ProcRanks(a.Proc)
				if err != nil || r != first+a.Local || a.Local >= n {
					t.Fatalf("ProcRanks(%d) = %d, %d, %v, does not hold rank %d", a.Proc, first, n, err, r)
				}
				first, n, err = l.HostProcs(a.Host)
				if err != nil || a.Proc < first || a.Proc >= first+n {
					t.Fatalf("HostProcs(%d) = %d, %d, %v, does not hold proc %d", a.Host, first, n, err, a.Proc)
				}
			}
			// Every (proc, local) is some rank, exactly once, in order.
			next := 0
			for p := range l.Procs() {
				_, n, _ := l.ProcRanks(p)
				for i := range n {
					r, err := l.Rank(p, i)
					if err != nil || r != next || addrs[r].Proc != p || addrs[r].Local != i {
						t.Fatalf("Rank(%d, %d) = %d, %v, want %d", p, i, r, err, next)
					}
					next++
				}
			}
			if next != l.Size() {
				t.Fatalf("procs hold %d ranks, Size() = %d", next, l.Size())
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for range 2000 {
				a, b := rng.IntN(l.Size()), rng.IntN(l.Size())
				if got, want := l.SameProc(a, b), addrs[a].Proc == addrs[b].Proc; got != want {
					t.Fatalf("SameProc(%d, %d) = %v, want %v", a, b, got, want)
				}
				if got, want := l.SameHost(a, b), addrs[a].Host == addrs[b].Host; got != want {
					t.Fatalf("SameHost(%d, %d) = %v, want %v", a, b, got, want)
				}
			}
		})
	}
}

// TestLargeUniform: a job of the largest size costs no tables, and its last rank is found.
func TestLargeUniform(t *testing.T) {
	l := mustBlock(t, MaxRanks, 1, 1)
	a, err := l.Locate(MaxRanks - 1)
	if err != nil || a != (Addr{0, 0, MaxRanks - 1}) {
		t.Fatalf("Locate(MaxRanks-1) = %+v, %v", a, err)
	}
	l = mustBlock(t, 1000, 1000, 1000) // a billion ranks
	a, err = l.Locate(999_999_999)
	if err != nil || a != (Addr{999, 999_999, 999}) {
		t.Fatalf("Locate(999999999) = %+v, %v", a, err)
	}
	if !l.SameHost(0, 999_999) || l.SameHost(999_999, 1_000_000) {
		t.Fatalf("SameHost wrong at the host boundary")
	}
}

// TestConcurrentFirstLocate: the lazily built index is safe when many goroutines need it at once.
func TestConcurrentFirstLocate(t *testing.T) {
	m := [][]int{{3, 2, 5}, {1, 4}, {6}}
	l := mustUneven(t, m)
	want := expand(m)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for r := range want {
				r = (r + g) % len(want)
				if a, err := l.Locate(r); err != nil || a != want[r] {
					t.Errorf("Locate(%d) = %+v, %v, want %+v", r, a, err, want[r])
					return
				}
				_ = l.SameHost(r, 0)
			}
		})
	}
	wg.Wait()
}

func TestParseRoundTrip(t *testing.T) {
	for _, c := range []struct{ spec, str string }{
		{"[4;2;3]", "[4;2;3]"},
		{"[1;1;1]", "[1;1;1]"},
		{" [ 4 ; 2 ; 3 ] ", "[4;2;3]"},
		{"3+2", "3+2"},
		{"3+2,4", "3+2,4"},
		{"3 + 2 , 4", "3+2,4"},
		{"8", "[8;1;1]"},
		{"007", "[7;1;1]"},
		{"2+2,2+2", "[2;2;2]"},
		{"1,2", "1,2"},
		{"2,2+2", "2,2+2"},
		{"2147483647", "[2147483647;1;1]"},
		{"[2147483647;1;1]", "[2147483647;1;1]"},
		{"2147483646+1", "2147483646+1"},
	} {
		l, err := Parse(c.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		if got := l.String(); got != c.str {
			t.Errorf("Parse(%q).String() = %q, want %q", c.spec, got, c.str)
		}
		back, err := Parse(l.String())
		if err != nil || !back.Equal(l) || back.String() != l.String() {
			t.Errorf("Parse(%q) = %v, %v, want a layout equal to Parse(%q)", l.String(), back, err, c.spec)
		}
	}
	// Every constructor agrees with Parse on the same shape.
	for _, c := range []struct {
		spec string
		l    *Layout
	}{
		{"[2;3;2]", mustBlock(t, 2, 3, 2)},
		{"2+2+2,2+2+2", mustBlock(t, 2, 3, 2)},
		{"3+2,4", mustUneven(t, [][]int{{3, 2}, {4}})},
	} {
		if l, err := Parse(c.spec); err != nil || !l.Equal(c.l) || !c.l.Equal(l) {
			t.Errorf("Parse(%q) = %v, %v, want %v", c.spec, l, err, c.l)
		}
	}
}

func TestEqual(t *testing.T) {
	a := mustUneven(t, [][]int{{3, 2}, {4}})
	for _, b := range []*Layout{
		nil,
		mustUneven(t, [][]int{{3, 2, 4}}),   // same procs, one host
		mustUneven(t, [][]int{{3}, {2, 4}}), // hosts split elsewhere
		mustUneven(t, [][]int{{2, 3}, {4}}), // procs swapped
		mustBlock(t, 9, 1, 1),
		mustBlock(t, 3, 3, 1),
	} {
		if a.Equal(b) {
			t.Errorf("%v.Equal(%v) = true", a, b)
		}
	}
	if !mustBlock(t, 2, 2, 1).Equal(mustUneven(t, [][]int{{2, 2}})) {
		t.Errorf("[2;2;1] and 2+2 are not Equal")
	}
	if mustBlock(t, 2, 2, 1).Equal(mustBlock(t, 2, 1, 2)) {
		t.Errorf("[2;2;1] Equal [2;1;2]")
	}
}

// TestErrors: every bad input is an error naming what was wrong and what was expected.
func TestErrors(t *testing.T) {
	uni := mustBlock(t, 2, 3, 1)                // 6 ranks, 3 procs, 1 host
	unev := mustUneven(t, [][]int{{3, 2}, {4}}) // 9 ranks, 3 procs, 2 hosts
	call := func(f func() (any, error)) func() (any, error) { return f }
	for _, c := range []struct {
		name string
		f    func() (any, error)
		want []string
	}{
		{"Block P=0", call(func() (any, error) { return Block(0, 1, 1) }), []string{"topo: Block", "ranks per proc (P)", "at least 1", "got 0"}},
		{"Block O<0", call(func() (any, error) { return Block(1, -1, 1) }), []string{"procs per host (O)", "got -1"}},
		{"Block M=0", call(func() (any, error) { return Block(1, 1, 0) }), []string{"hosts (M)", "got 0"}},
		{"Block too big", call(func() (any, error) { return Block(65536, 32768, 1) }), []string{"[65536;32768;1]", "limit of 2147483647 ranks"}},
		{"Block huge", call(func() (any, error) { return Block(math.MaxInt, math.MaxInt, math.MaxInt) }), []string{"limit of 2147483647 ranks"}},
		{"Block M overflows", call(func() (any, error) { return Block(2, 2, math.MaxInt/2) }), []string{"limit of 2147483647 ranks"}},
		{"Uneven nil", call(func() (any, error) { return Uneven(nil) }), []string{"topo: Uneven", "at least one host"}},
		{"Uneven empty host", call(func() (any, error) { return Uneven([][]int{{3}, {}}) }), []string{"host 1 has no procs"}},
		{"Uneven zero proc", call(func() (any, error) { return Uneven([][]int{{3, 0}}) }), []string{"proc 1 of host 0 has 0 ranks", "at least 1"}},
		{"Uneven negative", call(func() (any, error) { return Uneven([][]int{{3}, {-2}}) }), []string{"proc 0 of host 1 has -2 ranks"}},
		{"Uneven too big", call(func() (any, error) { return Uneven([][]int{{MaxRanks}, {1}}) }), []string{"limit of 2147483647 ranks", "proc 0 of host 1"}},
		{"Uneven MaxInt", call(func() (any, error) { return Uneven([][]int{{1, math.MaxInt}}) }), []string{"limit of 2147483647 ranks"}},
		{"Locate -1", call(func() (any, error) { return uni.Locate(-1) }), []string{"rank -1 out of range", "want 0..5"}},
		{"Locate size", call(func() (any, error) { return unev.Locate(9) }), []string{"rank 9 out of range", "want 0..8"}},
		{"Rank proc", call(func() (any, error) { return uni.Rank(3, 0) }), []string{"proc 3 out of range", "want 0..2"}},
		{"Rank local", call(func() (any, error) { return unev.Rank(1, 2) }), []string{"local rank 2 out of range for proc 1", "want 0..1"}},
		{"Rank local<0", call(func() (any, error) { return uni.Rank(0, -1) }), []string{"local rank -1", "want 0..1"}},
		{"ProcRanks", call(func() (any, error) { _, _, err := unev.ProcRanks(-1); return nil, err }), []string{"proc -1 out of range", "want 0..2"}},
		{"HostOf", call(func() (any, error) { return unev.HostOf(3) }), []string{"proc 3 out of range", "want 0..2"}},
		{"HostProcs", call(func() (any, error) { _, _, err := unev.HostProcs(2); return nil, err }), []string{"host 2 out of range", "want 0..1"}},
		{"HostProcs uniform", call(func() (any, error) { _, _, err := uni.HostProcs(1); return nil, err }), []string{"host 1 out of range", "want 0..0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.f()
			if err == nil {
				t.Fatalf("no error, want one naming %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	for _, l := range []*Layout{uni, unev} {
		for _, ab := range [][2]int{{-1, 0}, {0, -1}, {0, l.Size()}, {l.Size(), l.Size()}, {math.MinInt, math.MaxInt}} {
			if l.SameProc(ab[0], ab[1]) || l.SameHost(ab[0], ab[1]) {
				t.Errorf("%v: SameProc or SameHost(%d, %d) is true for a rank out of range", l, ab[0], ab[1])
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []string
	}{
		{"", []string{`parse ""`, "empty layout", "[P;O;M]"}},
		{"   ", []string{"empty layout"}},
		{"[4;2]", []string{`parse "[4;2]"`, "2 counts", "want 3", "[P;O;M]"}},
		{"[4;2;3;1]", []string{"4 counts", "want 3"}},
		{"[]", []string{"1 counts", "want 3"}},
		{"[4;2;3", []string{`missing closing "]"`}},
		{"4;2;3]", []string{`"4;2;3]" is not a count`, "decimal digits"}},
		{"[a;2;3]", []string{"P:", `"a" is not a count`}},
		{"[4;;3]", []string{"O:", "missing count"}},
		{"[4;2;0]", []string{"hosts (M) must be at least 1, got 0"}},
		{"[0;1;1]", []string{"ranks per proc (P) must be at least 1, got 0"}},
		{"[-4;2;3]", []string{`"-4" is not a count`}},
		{"[+4;2;3]", []string{`"+4" is not a count`}},
		{"[65536;65536;1]", []string{"[65536;65536;1]", "limit of 2147483647 ranks"}},
		{"2147483648", []string{`count "2147483648"`, "limit of 2147483647"}},
		{"99999999999999999999999", []string{"limit of 2147483647"}},
		{"0", []string{"proc 0 of host 0 has 0 ranks"}},
		{"3+-2", []string{"proc 1 of host 0", `"-2" is not a count`}},
		{"3++2", []string{"proc 1 of host 0", "missing count"}},
		{"3+2,", []string{"proc 0 of host 1", "missing count"}},
		{"3+2,,4", []string{"proc 0 of host 1", "missing count"}},
		{"3+2,0+4", []string{"proc 0 of host 1 has 0 ranks"}},
		{"2147483647,1", []string{"limit of 2147483647 ranks", "proc 0 of host 1"}},
		{"x", []string{`"x" is not a count`}},
		{"3x2", []string{`"3x2" is not a count`}},
		{"4\x00", []string{`is not a count`}},
		{strings.Repeat("1+", 100) + "x", []string{`"...`, `"x" is not a count`}},
	} {
		l, err := Parse(c.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error naming %q", c.spec, l, c.want)
			continue
		}
		if l != nil {
			t.Errorf("Parse(%q) returned a layout with its error", c.spec)
		}
		if !strings.HasPrefix(err.Error(), "topo: parse ") {
			t.Errorf("Parse(%q): error %q does not start with %q", c.spec, err, "topo: parse ")
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q): error %q does not name %q", c.spec, err, w)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"[4;2;3]", "[1;1;1]", "3+2", "3+2,4", "8", " [ 4 ; 2 ; 3 ] ", "2+2,2+2", "1,5+1+7,1",
		"", "[", "[;;]", "[4;2]", "3++2", "3+2,", "0", "-1", "2147483647", "2147483646+1,1",
		"[65536;32768;1]", "99999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		l, err := Parse(spec)
		if err != nil {
			if l != nil {
				t.Fatalf("Parse(%q) returned a layout with its error", spec)
			}
			if !strings.HasPrefix(err.Error(), "topo: parse ") {
				t.Fatalf("Parse(%q): error %q without the topo prefix", spec, err)
			}
			return
		}
		if l.Size() < 1 || l.Size() > MaxRanks || l.Procs() < 1 || l.Procs() > l.Size() ||
			l.Hosts() < 1 || l.Hosts() > l.Procs() {
			t.Fatalf("Parse(%q): Size, Procs, Hosts = %d, %d, %d", spec, l.Size(), l.Procs(), l.Hosts())
		}
		s := l.String()
		back, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", spec, s, err)
		}
		if !back.Equal(l) || !l.Equal(back) || back.String() != s {
			t.Fatalf("Parse(%q) = %q, which parses back to %q", spec, s, back)
		}
		// Ends of the job are found; skip huge explicit jobs, whose index is one int32 per rank.
		if _, _, uniform := l.Uniform(); uniform || l.Size() <= 1<<20 {
			for _, r := range []int{0, l.Size() - 1} {
				a, err := l.Locate(r)
				if err != nil {
					t.Fatalf("%v: Locate(%d): %v", l, r, err)
				}
				if back, err := l.Rank(a.Proc, a.Local); err != nil || back != r {
					t.Fatalf("%v: Rank(Locate(%d) = %+v) = %d, %v", l, r, a, back, err)
				}
			}
		}
	})
}

// unevenJob is an uneven job of about n ranks: procs of 2 to 9 ranks, 1 to 4 procs per host.
func unevenJob(n int) [][]int {
	var hosts [][]int
	sizes := []int{3, 5, 2, 7, 4, 9, 6, 8}
	total, k := 0, 0
	for total < n {
		ps := make([]int, 1+len(hosts)%4)
		for i := range ps {
			ps[i] = sizes[k%len(sizes)]
			total += ps[i]
			k++
		}
		hosts = append(hosts, ps)
	}
	return hosts
}

func benchLayouts(b *testing.B) []struct {
	name string
	l    *Layout
} {
	return []struct {
		name string
		l    *Layout
	}{
		{"uniform-1k", mustBlock(b, 10, 10, 10)},
		{"uniform-1M", mustBlock(b, 100, 100, 100)},
		{"uneven-1k", mustUneven(b, unevenJob(1000))},
		{"uneven-100k", mustUneven(b, unevenJob(100_000))},
	}
}

// BenchmarkLocate: the same cost per lookup at 1,000 and 1,000,000 ranks (uniform) and at 1,000
// and 100,000 ranks (uneven). Ranks are visited in a scattered order so caches do not flatter.
func BenchmarkLocate(b *testing.B) {
	for _, c := range benchLayouts(b) {
		b.Run(c.name, func(b *testing.B) {
			l, size := c.l, c.l.Size()
			_, _ = l.Locate(0) // build the index outside the timing
			r, sum := 0, 0
			for b.Loop() {
				a, _ := l.Locate(r)
				sum += a.Local
				r = (r + 7919) % size
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}

// BenchmarkRank: the inverse lookup, (proc, local) to rank, at the same sizes.
func BenchmarkRank(b *testing.B) {
	for _, c := range benchLayouts(b) {
		b.Run(c.name, func(b *testing.B) {
			l, procs := c.l, c.l.Procs()
			p, sum := 0, 0
			for b.Loop() {
				r, _ := l.Rank(p, 1)
				sum += r
				p = (p + 7919) % procs
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}
