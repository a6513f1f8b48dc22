// Command tabulate turns benchmark result lines into a Markdown table that
// sets Weft beside its C MPI peers measured in the same run.
//
// It exists so that every figure we publish is a ratio against a peer from
// the same run (see docs/benchmarks.md): bench/p2p.sh runs Weft's driver and
// the C twins (bench/peers) interleaved, several rounds, and pipes their
// output here. Each input line is space-separated key=value pairs:
//
//	bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=0.190 unit=us
//
// Lines are grouped by (bench, size, pairs, mode, metric); each impl's cell
// is the median of its values over the rounds. A value that is not a number
// (the runner writes "failed" or "absent") is shown as that word when an impl
// has no number at all, and counted beside the median otherwise. Lines
// without bench= are ignored, so stray output does no harm.
//
// The ratio column is weft divided by the best peer: the lowest peer for
// latency (lower is better), the highest for bandwidth and rate (higher is
// better).
//
// Usage:
//
//	bash bench/p2p.sh            # runs everything, calls this
//	go run ./bench/tabulate < raw.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// key identifies one row of the table.
type key struct {
	bench, size, pairs, mode, metric string
}

// cell holds what one impl reported for one row.
type cell struct {
	values []float64      // numeric results, one per round
	words  map[string]int // non-numeric results ("failed", "absent") and how often
}

// row is one test with its cells by impl.
type row struct {
	key   key
	unit  string
	cells map[string]*cell
}

// table is everything read, rows in order of first appearance.
type table struct {
	rows  []*row
	index map[key]*row
	impls map[string]bool
}

// fixedImpls are the columns always shown, in this order; other impls seen
// in the input get columns after them.
var fixedImpls = []string{"weft", "mpich", "openmpi"}

const self = "weft"

func newTable() *table {
	return &table{index: map[key]*row{}, impls: map[string]bool{}}
}

// parseFields splits "a=1 b=2" into a map; tokens without '=' are ignored.
func parseFields(line string) map[string]string {
	f := map[string]string{}
	for _, tok := range strings.Fields(line) {
		k, v, ok := strings.Cut(tok, "=")
		if ok && k != "" {
			f[k] = v
		}
	}
	return f
}

// add records one result line; it reports whether the line was a result.
func (t *table) add(line string) bool {
	f := parseFields(line)
	if f["bench"] == "" || f["value"] == "" {
		return false
	}
	impl := f["impl"]
	if impl == "" {
		impl = "c"
	}
	k := key{f["bench"], f["size"], f["pairs"], f["mode"], f["metric"]}
	r := t.index[k]
	if r == nil {
		r = &row{key: k, cells: map[string]*cell{}}
		t.index[k] = r
		t.rows = append(t.rows, r)
	}
	if r.unit == "" {
		r.unit = f["unit"]
	}
	c := r.cells[impl]
	if c == nil {
		c = &cell{words: map[string]int{}}
		r.cells[impl] = c
	}
	if v, err := strconv.ParseFloat(f["value"], 64); err == nil {
		c.values = append(c.values, v)
	} else {
		c.words[f["value"]]++
	}
	t.impls[impl] = true
	return true
}

// read adds every result line of r.
func (t *table) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		t.add(sc.Text())
	}
	return sc.Err()
}

// median returns the median of vs (the mean of the middle two for an even
// count) and false when vs is empty. vs is not modified.
func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// lowerIsBetter tells the direction of a metric.
func lowerIsBetter(metric string) bool {
	return metric == "latency" || metric == "time"
}

// ratio returns weft's median over the best peer's median: the lowest peer
// for latency, the highest for bandwidth and rate. ok is false when weft or
// every peer lacks a number, or the divisor is zero.
func (r *row) ratio() (float64, bool) {
	w, ok := r.median(self)
	if !ok {
		return 0, false
	}
	best, found := 0.0, false
	for impl := range r.cells {
		if impl == self {
			continue
		}
		m, ok := r.median(impl)
		if !ok {
			continue
		}
		if !found || (lowerIsBetter(r.key.metric) && m < best) || (!lowerIsBetter(r.key.metric) && m > best) {
			best, found = m, true
		}
	}
	if !found || best == 0 {
		return 0, false
	}
	return w / best, true
}

func (r *row) median(impl string) (float64, bool) {
	c := r.cells[impl]
	if c == nil {
		return 0, false
	}
	return median(c.values)
}

// rounds is the largest number of results any impl gave for any row.
func (t *table) rounds() int {
	n := 0
	for _, r := range t.rows {
		for _, c := range r.cells {
			k := len(c.values)
			for _, cnt := range c.words {
				k += cnt
			}
			n = max(n, k)
		}
	}
	return n
}

// columns lists the impl columns: the fixed ones, then any others sorted.
func (t *table) columns() []string {
	cols := append([]string(nil), fixedImpls...)
	var extra []string
	for impl := range t.impls {
		known := false
		for _, f := range fixedImpls {
			known = known || f == impl
		}
		if !known {
			extra = append(extra, impl)
		}
	}
	sort.Strings(extra)
	return append(cols, extra...)
}

// formatValue prints about three significant digits without exponents.
func formatValue(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	default:
		// three significant digits: 0.300, 0.0181, 0.000512
		return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(a))), 64)
	}
}

// formatWords renders non-numeric results sorted, like "failed" or, with
// counts, "failed×2".
func formatWords(words map[string]int, counts bool) string {
	var ws []string
	for w, n := range words {
		if counts && n > 1 {
			ws = append(ws, fmt.Sprintf("%s×%d", w, n))
		} else {
			ws = append(ws, w)
		}
	}
	sort.Strings(ws)
	return strings.Join(ws, ", ")
}

// cellText is what the table shows for one impl in one row.
func (r *row) cellText(impl string) string {
	c := r.cells[impl]
	if c == nil {
		return "-"
	}
	m, ok := median(c.values)
	if !ok {
		if len(c.words) == 0 {
			return "-"
		}
		return formatWords(c.words, false)
	}
	s := formatValue(m)
	if len(c.words) > 0 {
		s += " (" + formatWords(c.words, true) + ")"
	}
	return s
}

// humanSize prints a byte count as B, KiB or MiB when exact.
func humanSize(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return s
	}
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// label names a row for a reader, e.g. "pingpong 8 B latency (us)" or
// "msgrate 2 pairs thread rate (Mmsg/s)".
func (r *row) label() string {
	k := r.key
	parts := []string{k.bench}
	switch k.bench {
	case "msgrate":
		parts = append(parts, k.pairs+" pairs", k.mode)
	case "latency_mt":
		parts = append(parts, humanSize(k.size), k.pairs+" threads")
	default:
		if k.size != "" {
			parts = append(parts, humanSize(k.size))
		}
		if k.pairs != "" && k.pairs != "1" {
			parts = append(parts, k.pairs+" pairs")
		}
		if k.mode != "" && k.mode != "proc" {
			parts = append(parts, k.mode)
		}
	}
	m := k.metric
	if r.unit != "" {
		m += " (" + r.unit + ")"
	}
	return strings.Join(append(parts, m), " ")
}

// write prints the round count and the Markdown table.
func (t *table) write(w io.Writer) error {
	cols := t.columns()
	var b strings.Builder
	fmt.Fprintf(&b, "Rounds: %d (each cell is the median over the rounds)\n\n", t.rounds())
	b.WriteString("| test |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString(" weft/best peer | better |\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---|\n")
	for _, r := range t.rows {
		b.WriteString("| " + r.label() + " |")
		for _, c := range cols {
			b.WriteString(" " + r.cellText(c) + " |")
		}
		ratio := "-"
		if v, ok := r.ratio(); ok {
			ratio = formatValue(v)
		}
		better := "higher"
		if lowerIsBetter(r.key.metric) {
			better = "lower"
		}
		b.WriteString(" " + ratio + " | " + better + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func main() {
	t := newTable()
	if err := t.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "tabulate:", err)
		os.Exit(1)
	}
	if len(t.rows) == 0 {
		fmt.Fprintln(os.Stderr, "tabulate: no result lines on stdin")
		os.Exit(1)
	}
	if err := t.write(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tabulate:", err)
		os.Exit(1)
	}
}
