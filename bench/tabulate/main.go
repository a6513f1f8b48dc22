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
// Flags (bench/net.sh uses them; without any, the output is as it always was):
//
//	-peers   also a weft/PEER column for every peer, beside weft/best peer
//	-rounds  then a table of weft/PEER per round, from the lines' round= field
//	         (rounds where weft or the peer has no number show "-")
//	-pivot F columns are the values of field F instead of impls (for a sweep of
//	         one setting: -pivot limit); each cell is the median over the rounds
//	         of every line with that value, the best cell of a row is in bold,
//	         and the last column names it; with -rounds, then every column over
//	         the first, round by round (for two columns, e.g. -pivot proto)
//
// Usage:
//
//	bash bench/p2p.sh            # runs everything, calls this
//	go run ./bench/tabulate < raw.txt
//	go run ./bench/tabulate -peers -rounds < bench/results/net-raw.txt
//	go run ./bench/tabulate -pivot limit < bench/results/netsweep-raw.txt
package main

import (
	"bufio"
	"flag"
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
	values  []float64            // numeric results, one per round
	words   map[string]int       // non-numeric results ("failed", "absent") and how often
	byRound map[string][]float64 // numeric results of lines with a round= field, by round
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
	impls map[string]bool // column names: impls, or the pivot field's values
	pivot string          // if set, the field whose values are the columns
	order []string        // rounds in order of first appearance
	seen  map[string]bool // rounds seen
}

// fixedImpls are the columns always shown, in this order; other impls seen
// in the input get columns after them.
var fixedImpls = []string{"weft", "mpich", "openmpi"}

const self = "weft"

func newTable() *table {
	return &table{index: map[key]*row{}, impls: map[string]bool{}, seen: map[string]bool{}}
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
	if t.pivot != "" {
		if impl = f[t.pivot]; impl == "" {
			return false
		}
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
		c = &cell{words: map[string]int{}, byRound: map[string][]float64{}}
		r.cells[impl] = c
	}
	rd := f["round"]
	if rd != "" && !t.seen[rd] {
		t.seen[rd] = true
		t.order = append(t.order, rd)
	}
	if v, err := strconv.ParseFloat(f["value"], 64); err == nil {
		c.values = append(c.values, v)
		if rd != "" {
			c.byRound[rd] = append(c.byRound[rd], v)
		}
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

// ratioTo returns weft's median over peer's median.
func (r *row) ratioTo(peer string) (float64, bool) {
	w, ok := r.median(self)
	p, pok := r.median(peer)
	if !ok || !pok || p == 0 {
		return 0, false
	}
	return w / p, true
}

// roundRatio returns column a's value over column b's in round rd (the medians
// of their values in that round, when a pivot gives a column several).
func (r *row) roundRatio(a, b, rd string) (float64, bool) {
	ca, cb := r.cells[a], r.cells[b]
	if ca == nil || cb == nil {
		return 0, false
	}
	av, aok := median(ca.byRound[rd])
	bv, bok := median(cb.byRound[rd])
	if !aok || !bok || bv == 0 {
		return 0, false
	}
	return av / bv, true
}

func (r *row) median(impl string) (float64, bool) {
	c := r.cells[impl]
	if c == nil {
		return 0, false
	}
	return median(c.values)
}

// rounds is the largest number of results any impl gave for any row; with a
// pivot, whose cells pool several results a round, the number of rounds named
// in round= fields, if any.
func (t *table) rounds() int {
	if t.pivot != "" && len(t.order) > 0 {
		return len(t.order)
	}
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
// With a pivot, they are the pivot's values, in numeric order if they are all
// numbers, else in string order.
func (t *table) columns() []string {
	if t.pivot != "" {
		var cols []string
		numeric := true
		for v := range t.impls {
			cols = append(cols, v)
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				numeric = false
			}
		}
		sort.Slice(cols, func(i, j int) bool {
			if numeric {
				a, _ := strconv.ParseFloat(cols[i], 64)
				b, _ := strconv.ParseFloat(cols[j], 64)
				return a < b
			}
			return cols[i] < cols[j]
		})
		return cols
	}
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

// options choose what write prints besides the plain table.
type options struct {
	peers  bool // a weft/PEER column per peer
	rounds bool // a table of weft/PEER per round
}

// peers lists the columns other than weft that have a number in some row.
func (t *table) peers() []string {
	var ps []string
	for _, c := range t.columns() {
		if c == self {
			continue
		}
		for _, r := range t.rows {
			if _, ok := r.median(c); ok {
				ps = append(ps, c)
				break
			}
		}
	}
	return ps
}

func better(metric string) string {
	if lowerIsBetter(metric) {
		return "lower"
	}
	return "higher"
}

// write prints the round count and the Markdown table.
func (t *table) write(w io.Writer, o options) error {
	if t.pivot != "" {
		return t.writePivot(w, o)
	}
	cols := t.columns()
	var peers []string
	if o.peers || o.rounds {
		peers = t.peers()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rounds: %d (each cell is the median over the rounds)\n\n", t.rounds())
	b.WriteString("| test |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString(" weft/best peer |")
	if o.peers {
		for _, p := range peers {
			b.WriteString(" weft/" + p + " |")
		}
	}
	b.WriteString(" better |\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---:|")
	if o.peers {
		for range peers {
			b.WriteString("---:|")
		}
	}
	b.WriteString("---|\n")
	for _, r := range t.rows {
		b.WriteString("| " + r.label() + " |")
		for _, c := range cols {
			b.WriteString(" " + r.cellText(c) + " |")
		}
		ratio := "-"
		if v, ok := r.ratio(); ok {
			ratio = formatValue(v)
		}
		b.WriteString(" " + ratio + " |")
		if o.peers {
			for _, p := range peers {
				ratio := "-"
				if v, ok := r.ratioTo(p); ok {
					ratio = formatValue(v)
				}
				b.WriteString(" " + ratio + " |")
			}
		}
		b.WriteString(" " + better(r.key.metric) + " |\n")
	}
	if o.rounds && len(t.order) > 0 && len(peers) > 0 {
		roundsHeader(&b, "\nweft/peer in each round (the same round's runs, one after the other):\n\n| test | weft/ |", t.order)
		for _, r := range t.rows {
			for _, p := range peers {
				if r.cells[p] == nil || r.cells[self] == nil {
					continue
				}
				b.WriteString("| " + r.label() + " | " + p + " |")
				for _, rd := range t.order {
					ratio := "-"
					if v, ok := r.roundRatio(self, p, rd); ok {
						ratio = formatValue(v)
					}
					b.WriteString(" " + ratio + " |")
				}
				b.WriteString("\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pivotLabel names a pivot column: "limit 64 KiB" for a byte count.
func (t *table) pivotLabel(v string) string {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return t.pivot + " " + humanSize(v)
	}
	return t.pivot + " " + v
}

// writePivot prints one row per test and one column per value of the pivot
// field, the best median of each row in bold; with o.rounds, then each column
// over the first in every round.
func (t *table) writePivot(w io.Writer, o options) error {
	cols := t.columns()
	var b strings.Builder
	fmt.Fprintf(&b, "Rounds: %d (each cell is the median over the rounds; the best of each row in bold)\n\n", t.rounds())
	b.WriteString("| test |")
	for _, c := range cols {
		b.WriteString(" " + t.pivotLabel(c) + " |")
	}
	b.WriteString(" best | better |\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---|---|\n")
	for _, r := range t.rows {
		best, bestV, found := "", 0.0, false
		for _, c := range cols {
			m, ok := r.median(c)
			if !ok {
				continue
			}
			if !found || (lowerIsBetter(r.key.metric) && m < bestV) || (!lowerIsBetter(r.key.metric) && m > bestV) {
				best, bestV, found = c, m, true
			}
		}
		b.WriteString("| " + r.label() + " |")
		for _, c := range cols {
			text := r.cellText(c)
			if found && c == best {
				text = "**" + text + "**"
			}
			b.WriteString(" " + text + " |")
		}
		name := "-"
		if found {
			name = t.pivotLabel(best)
		}
		b.WriteString(" " + name + " | " + better(r.key.metric) + " |\n")
	}
	if o.rounds && len(t.order) > 0 && len(cols) > 1 {
		roundsHeader(&b, fmt.Sprintf("\nEach column over %s in every round (medians of the round's results):\n\n| test | ratio |", t.pivotLabel(cols[0])), t.order)
		for _, r := range t.rows {
			for _, c := range cols[1:] {
				var line strings.Builder
				any := false
				for _, rd := range t.order {
					ratio := "-"
					if v, ok := r.roundRatio(c, cols[0], rd); ok {
						ratio, any = formatValue(v), true
					}
					line.WriteString(" " + ratio + " |")
				}
				if any {
					b.WriteString("| " + r.label() + " | " + t.pivotLabel(c) + " / " + t.pivotLabel(cols[0]) + " |" + line.String() + "\n")
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func main() {
	var o options
	flag.BoolVar(&o.peers, "peers", false, "also a weft/PEER column for every peer")
	flag.BoolVar(&o.rounds, "rounds", false, "then a table of weft/PEER in each round (lines' round= field)")
	pivot := flag.String("pivot", "", "columns are the values of this field instead of impls (a sweep of one setting)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "tabulate: reads result lines on stdin; no arguments")
		os.Exit(2)
	}
	t := newTable()
	t.pivot = *pivot
	if err := t.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "tabulate:", err)
		os.Exit(1)
	}
	if len(t.rows) == 0 {
		fmt.Fprintln(os.Stderr, "tabulate: no result lines on stdin")
		os.Exit(1)
	}
	if err := t.write(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "tabulate:", err)
		os.Exit(1)
	}
}

// roundsHeader writes the head of a per-round table: intro (which ends with the
// first two column titles), a column per round, and the alignment row.
func roundsHeader(b *strings.Builder, intro string, rounds []string) {
	b.WriteString(intro)
	for _, rd := range rounds {
		b.WriteString(" r" + rd + " |")
	}
	b.WriteString("\n|---|---|")
	for range rounds {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
}
