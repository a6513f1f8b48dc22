package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Field is one key=value pair of a result line's row.
type Field struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Line is one parsed result line, filed under the run that printed it.
type Line struct {
	Round  int     `json:"round"`
	Test   int     `json:"test"` // index into the suite's tests
	Impl   string  `json:"impl"`
	Bench  string  `json:"bench"`
	Row    []Field `json:"row"` // in the order printed, the test's Fields first
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
}

// ParseLine reads one result line. ok is false for anything else: a line
// without bench, metric, unit or a numeric value, or with a token that is
// not key=value.
func ParseLine(s string) (l Line, ok bool) {
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return l, false
	}
	have := 0
	for _, tok := range toks {
		k, v, found := strings.Cut(tok, "=")
		if !found || k == "" {
			return l, false
		}
		switch k {
		case "bench":
			l.Bench, have = v, have|1
		case "impl":
			l.Impl = v
		case "metric":
			l.Metric, have = v, have|2
		case "unit":
			l.Unit, have = v, have|4
		case "value":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return l, false
			}
			l.Value, have = f, have|8
		default:
			l.Row = append(l.Row, Field{k, v})
		}
	}
	return l, have == 15 && l.Bench != "" && l.Metric != ""
}

// Field returns the value of the line's field key ("bench" and "metric"
// included) and whether it has one.
func (l Line) Field(key string) (string, bool) {
	switch key {
	case "bench":
		return l.Bench, true
	case "metric":
		return l.Metric, true
	case "impl":
		return l.Impl, true
	}
	for _, f := range l.Row {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// matches reports whether the line has every field of where.
func (l Line) matches(where map[string]string) bool {
	for k, want := range where {
		if v, ok := l.Field(k); !ok || v != want {
			return false
		}
	}
	return true
}

// rowKey identifies a table row: everything but impl, value and round.
func (l Line) rowKey() string {
	var b strings.Builder
	b.WriteString(l.Bench)
	for _, f := range l.Row {
		b.WriteString(" " + f.Key + "=" + f.Value)
	}
	b.WriteString(" metric=" + l.Metric + " unit=" + l.Unit)
	return b.String()
}

// LowerIsBetter tells the direction of a unit: times are better low, rates
// and bandwidths high.
func LowerIsBetter(unit string) bool {
	switch unit {
	case "ns", "us", "µs", "ms", "s":
		return true
	}
	return false
}

// Median is the middle value of vs (the mean of the middle two for an even
// count); ok is false for none. vs is not modified.
func Median(vs []float64) (m float64, ok bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// Row is one row of the table of medians.
type Row struct {
	Label    string               `json:"label"`
	Test     int                  `json:"test"`
	Bench    string               `json:"bench"`
	Fields   []Field              `json:"fields"`
	Metric   string               `json:"metric"`
	Unit     string               `json:"unit"`
	Medians  map[string]float64   `json:"medians"`           // by impl
	Values   map[string][]float64 `json:"values"`            // by impl, in round order
	Missing  map[string]string    `json:"missing,omitempty"` // impls without a figure: why
	Ratio    *float64             `json:"ratio,omitempty"`   // weft over the best peer
	BestPeer string               `json:"best_peer,omitempty"`
	// RoundRatios are weft over the best peer of each round, in round order.
	RoundRatios []float64 `json:"round_ratios,omitempty"`
	Better      string    `json:"better"` // "lower" or "higher"

	rounds map[string]map[int]float64 // impl -> round -> value
}

// tabulate groups lines into rows in order of first appearance, with each
// implementation's median over the rounds and weft's ratio to the best peer.
// why tells, for a test and an implementation without figures, what happened
// to its runs ("failed", "timeout", "absent").
func tabulate(lines []Line, peers []string, why func(test int, impl string) string) []*Row {
	var rows []*Row
	index := map[string]*Row{}
	for _, l := range lines {
		k := l.rowKey()
		r := index[k]
		if r == nil {
			r = &Row{Test: l.Test, Bench: l.Bench, Fields: l.Row, Metric: l.Metric, Unit: l.Unit,
				Medians: map[string]float64{}, Values: map[string][]float64{}, rounds: map[string]map[int]float64{}}
			r.Label = label(l)
			r.Better = "higher"
			if LowerIsBetter(l.Unit) {
				r.Better = "lower"
			}
			index[k] = r
			rows = append(rows, r)
		}
		r.Values[l.Impl] = append(r.Values[l.Impl], l.Value)
		if r.rounds[l.Impl] == nil {
			r.rounds[l.Impl] = map[int]float64{}
		}
		r.rounds[l.Impl][l.Round] = l.Value
	}
	for _, r := range rows {
		for impl, vs := range r.Values {
			r.Medians[impl], _ = Median(vs)
		}
		for _, impl := range append([]string{Weft}, peers...) {
			if _, ok := r.Medians[impl]; !ok && why != nil {
				if r.Missing == nil {
					r.Missing = map[string]string{}
				}
				r.Missing[impl] = why(r.Test, impl)
			}
		}
		r.ratios(peers)
	}
	return rows
}

// best returns the best of the peers' values by the row's direction.
func (r *Row) best(values map[string]float64, peers []string) (string, float64, bool) {
	name, best, found := "", 0.0, false
	for _, p := range peers {
		v, ok := values[p]
		if !ok {
			continue
		}
		if !found || (r.Better == "lower" && v < best) || (r.Better == "higher" && v > best) {
			name, best, found = p, v, true
		}
	}
	return name, best, found
}

func (r *Row) ratios(peers []string) {
	w, ok := r.Medians[Weft]
	if !ok {
		return
	}
	if name, b, found := r.best(r.Medians, peers); found && b != 0 {
		q := w / b
		r.Ratio, r.BestPeer = &q, name
	}
	var rounds []int
	for rd := range r.rounds[Weft] {
		rounds = append(rounds, rd)
	}
	sort.Ints(rounds)
	for _, rd := range rounds {
		of := map[string]float64{}
		for _, p := range peers {
			if v, ok := r.rounds[p][rd]; ok {
				of[p] = v
			}
		}
		if _, b, found := r.best(of, peers); found && b != 0 {
			r.RoundRatios = append(r.RoundRatios, r.rounds[Weft][rd]/b)
		}
	}
}

// label names a row for a reader: "pingpong shm 8 B latency (us)".
func label(l Line) string {
	parts := []string{l.Bench}
	for _, f := range l.Row {
		switch f.Key {
		case "size":
			parts = append(parts, HumanSize(f.Value))
		case "path":
			parts = append(parts, f.Value)
		default:
			v := f.Value
			if isBytes(f.Key) {
				v = HumanSize(v)
			}
			parts = append(parts, f.Key+"="+v)
		}
	}
	return strings.Join(append(parts, l.Metric+" ("+l.Unit+")"), " ")
}

// isBytes tells the fields that hold byte counts.
func isBytes(key string) bool {
	return key == "size" || key == "limit" || key == "bytes"
}

// HumanSize prints a byte count as B, KiB or MiB when exact; anything else
// as it is.
func HumanSize(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return s
	}
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// FormatValue prints about three significant digits without exponents.
func FormatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(a))), 64)
}
