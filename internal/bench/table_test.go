package bench

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	l, ok := ParseLine("bench=pingpong impl=mpich size=8 pairs=1 metric=latency value=0.190 unit=us")
	if !ok || l.Bench != "pingpong" || l.Impl != "mpich" || l.Metric != "latency" || l.Value != 0.19 || l.Unit != "us" ||
		len(l.Row) != 2 || l.Row[0] != (Field{"size", "8"}) || l.Row[1] != (Field{"pairs", "1"}) {
		t.Fatalf("parsed %+v, %v", l, ok)
	}
	for _, bad := range []string{
		"",
		"some output of the program",
		"bench=pingpong metric=latency value=1 unit=us stray",
		"bench=pingpong metric=latency value=failed unit=us",
		"bench=pingpong metric=latency value=NaN unit=us",
		"bench=pingpong metric=latency value=1",
		"impl=weft metric=latency value=1 unit=us",
		"bench= metric=latency value=1 unit=us",
		"=x bench=a metric=latency value=1 unit=us",
	} {
		if l, ok := ParseLine(bad); ok {
			t.Errorf("%q parsed as %+v", bad, l)
		}
	}
	// Report's lines are result lines.
	var b bytes.Buffer
	Report(&b, "bw", "bandwidth", 12.5, "GB/s", "size", "4096")
	if l, ok := ParseLine(b.String()); !ok || l.Impl != Weft || l.Value != 12.5 || l.Row[0] != (Field{"size", "4096"}) {
		t.Errorf("Report's %q parsed as %+v, %v", b.String(), l, ok)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), tc.in...)
		if m, ok := Median(in); !ok || m != tc.want {
			t.Errorf("Median(%v) = %v, %v; want %v", tc.in, m, ok, tc.want)
		}
		if in[0] != tc.in[0] {
			t.Errorf("Median reordered its input")
		}
	}
	if _, ok := Median(nil); ok {
		t.Error("Median of nothing is ok")
	}
}

func line(round int, impl, bench, size, metric string, v float64, unit string) Line {
	return Line{Round: round, Impl: impl, Bench: bench, Row: []Field{{"size", size}}, Metric: metric, Value: v, Unit: unit}
}

// sample is three rounds of a latency row (lower is better) and a bandwidth
// row (higher is better), openmpi failing its bandwidth test.
func sample() []Line {
	var ls []Line
	for r, vs := range [][]float64{{1.0, 2.0, 0.5, 10, 5, 0}, {1.2, 1.8, 0.6, 12, 6, 0}, {3.0, 1.6, 0.4, 11, 4, 0}} {
		rd := r + 1
		ls = append(ls,
			line(rd, Weft, "pingpong", "8", "latency", vs[0], "us"),
			line(rd, "mpich", "pingpong", "8", "latency", vs[1], "us"),
			line(rd, "openmpi", "pingpong", "8", "latency", vs[2], "us"),
			line(rd, Weft, "bw", "4194304", "bandwidth", vs[3], "GB/s"),
			line(rd, "mpich", "bw", "4194304", "bandwidth", vs[4], "GB/s"))
	}
	for i := range ls {
		if ls[i].Bench == "bw" {
			ls[i].Test = 1
		}
	}
	return ls
}

func TestTabulate(t *testing.T) {
	why := func(test int, impl string) string { return "failed" }
	rows := tabulate(sample(), []string{"mpich", "openmpi"}, why)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	lat, bw := rows[0], rows[1]
	if lat.Label != "pingpong 8 B latency (us)" || bw.Label != "bw 4 MiB bandwidth (GB/s)" {
		t.Errorf("labels %q, %q", lat.Label, bw.Label)
	}
	if lat.Medians[Weft] != 1.2 || lat.Medians["mpich"] != 1.8 || lat.Medians["openmpi"] != 0.5 {
		t.Errorf("latency medians %v", lat.Medians)
	}
	// lower is better: the best peer is openmpi's 0.5
	if lat.Better != "lower" || lat.BestPeer != "openmpi" || lat.Ratio == nil || math.Abs(*lat.Ratio-2.4) > 1e-9 {
		t.Errorf("latency: better %s, best %s, ratio %v", lat.Better, lat.BestPeer, lat.Ratio)
	}
	wantRounds := []float64{2, 2, 7.5}
	for i, r := range lat.RoundRatios {
		if math.Abs(r-wantRounds[i]) > 1e-9 {
			t.Errorf("round ratios %v, want %v", lat.RoundRatios, wantRounds)
		}
	}
	// higher is better: the best (only) peer is mpich's 5
	if bw.Better != "higher" || bw.BestPeer != "mpich" || *bw.Ratio != 11.0/5 {
		t.Errorf("bandwidth: better %s, best %s, ratio %v", bw.Better, bw.BestPeer, *bw.Ratio)
	}
	if bw.Missing["openmpi"] != "failed" || len(lat.Missing) != 0 {
		t.Errorf("missing: %v, %v", bw.Missing, lat.Missing)
	}
}

func TestFormats(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 0.000512: "0.000512", 0.0181: "0.0181", 1.234: "1.23", 14.66: "14.7", 285.4: "285"} {
		if got := FormatValue(in); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"8": "8 B", "4096": "4 KiB", "4194304": "4 MiB", "1000": "1000 B", "x": "x"} {
		if got := HumanSize(in); got != want {
			t.Errorf("HumanSize(%s) = %q, want %q", in, got, want)
		}
	}
	for unit, lower := range map[string]bool{"us": true, "ns": true, "ms": true, "s": true, "GB/s": false, "Mmsg/s": false} {
		if LowerIsBetter(unit) != lower {
			t.Errorf("LowerIsBetter(%s) = %v", unit, !lower)
		}
	}
}

// svgDoc is what the tests read of an SVG.
type svgDoc struct {
	XMLName   xml.Name `xml:"svg"`
	Polylines []struct {
		Points string `xml:"points,attr"`
		Title  string `xml:"title"`
	} `xml:"polyline"`
	Texts []string `xml:"text"`
}

func TestPlotSVG(t *testing.T) {
	ls := sample()
	// a second series of weft, path=tcp, at two sizes
	for _, size := range []string{"8", "65536"} {
		l := line(1, Weft, "pingpong", size, "latency", 6, "us")
		l.Row = append([]Field{{"path", "tcp"}}, l.Row...)
		ls = append(ls, l)
	}
	for i := range ls[:15] {
		ls[i].Row = append([]Field{{"path", "shm"}}, ls[i].Row...)
	}
	p := Plot{File: "lat", Title: "Latency <&> size", Metric: "latency", X: "size",
		Where: map[string]string{"bench": "pingpong"}, Series: []string{"path"}, LogX: true, LogY: true}
	svg, ok := PlotSVG(p, ls)
	if !ok {
		t.Fatal("no plot")
	}
	var doc svgDoc
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("the SVG does not parse: %v\n%s", err, svg)
	}
	var titles []string
	for _, pl := range doc.Polylines {
		titles = append(titles, pl.Title)
	}
	want := []string{"weft path=shm", "mpich path=shm", "openmpi path=shm", "weft path=tcp"}
	if strings.Join(titles, ",") != strings.Join(want, ",") {
		t.Fatalf("polylines %q, want %q", titles, want)
	}
	if n := len(strings.Fields(doc.Polylines[3].Points)); n != 2 {
		t.Errorf("weft path=tcp has %d points, want 2", n)
	}
	joined := strings.Join(doc.Texts, "|")
	for _, w := range []string{"Latency <&> size", "latency (us), log scale", "64 KiB", "weft path=tcp"} {
		if !strings.Contains(joined, w) {
			t.Errorf("the SVG's texts lack %q: %s", w, joined)
		}
	}
	if _, ok := PlotSVG(Plot{Metric: "rate", X: "size"}, ls); ok {
		t.Error("a plot of a metric no line has was drawn")
	}
}

func TestReplaceSection(t *testing.T) {
	doc := []byte("# Benchmarks\n\nintro\n<!-- bench:p2p:begin -->\nold table\n<!-- bench:p2p:end -->\n\n## More\ntext\n")
	got := string(ReplaceSection(doc, "p2p", "new table\n"))
	want := "# Benchmarks\n\nintro\n<!-- bench:p2p:begin -->\nnew table\n<!-- bench:p2p:end -->\n\n## More\ntext\n"
	if got != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", got, want)
	}
	got = string(ReplaceSection([]byte(want), "coll", "coll table"))
	if want2 := want + "\n<!-- bench:coll:begin -->\ncoll table\n<!-- bench:coll:end -->\n"; got != want2 {
		t.Errorf("appended:\n%s\nwant:\n%s", got, want2)
	}
	if got := string(ReplaceSection(nil, "p2p", "t")); got != "<!-- bench:p2p:begin -->\nt\n<!-- bench:p2p:end -->\n" {
		t.Errorf("into nothing: %q", got)
	}
}

// TestTableLines: the lines of a plot marked Only stay out of the table, and
// only those: the same metric elsewhere, and other metrics of the test, stay.
func TestTableLines(t *testing.T) {
	var lines []Line
	for _, s := range []string{
		"bench=threads impl=weft test=shortlong mode=T iter=0 metric=short value=2 unit=us",
		"bench=threads impl=weft test=shortlong mode=T iter=1 metric=short value=3 unit=us",
		"bench=threads impl=weft test=shortlong mode=T metric=short_mean value=2.5 unit=us",
		"bench=threads impl=weft test=other mode=T metric=short value=9 unit=us",
	} {
		l, ok := ParseLine(s)
		if !ok {
			t.Fatalf("ParseLine(%q) failed", s)
		}
		lines = append(lines, l)
	}
	s := Suite{Plots: []Plot{
		{File: "a", Metric: "short", X: "iter", Where: map[string]string{"test": "shortlong"}, Only: true},
		{File: "b", Metric: "short_mean", X: "mode"},
	}}
	got := s.tableLines(lines)
	if len(got) != 2 || got[0].Metric != "short_mean" || got[1].Value != 9 {
		t.Fatalf("table lines %+v, want the short_mean line and test=other's", got)
	}
	if rows := tabulate(got, nil, nil); len(rows) != 2 {
		t.Fatalf("%d rows from the table lines, want 2", len(rows))
	}
}

// TestParse: a suite body's flags parse silently, errors name the suite, and
// an argument that is not a flag is refused.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"-size", "16"}, ""},
		{[]string{"-size=16"}, ""},
		{[]string{"-bogus", "1"}, "demo: flag provided but not defined: -bogus"},
		{[]string{"-size", "x"}, "demo: invalid value"},
		{[]string{"-size", "16", "extra"}, `demo: unexpected argument "extra" (flags only)`},
	} {
		fs := Flags("demo")
		size := fs.Int("size", 8, "")
		err := Parse(fs, tc.args)
		switch {
		case tc.want == "" && (err != nil || *size != 16):
			t.Errorf("%q: size %d, error %v; want 16 and no error", tc.args, *size, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
