package main

import (
	"math"
	"strings"
	"testing"
)

const sample = `
noise from a launcher, ignored
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=latency value=0.30 unit=us
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=0.20 unit=us
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=latency value=0.40 unit=us
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=bandwidth value=2.0 unit=GB/s
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=bandwidth value=1.0 unit=GB/s
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=bandwidth value=4.0 unit=GB/s
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=latency value=0.10 unit=us
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=0.22 unit=us
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=latency value=0.44 unit=us
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=latency value=0.50 unit=us
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=0.24 unit=us
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=latency value=failed unit=us
bench=msgrate impl=mpich size=0 pairs=4 mode=thread metric=rate value=failed unit=Mmsg/s
bench=msgrate impl=weft size=0 pairs=4 mode=thread metric=rate value=3 unit=Mmsg/s
bench=msgrate impl=mpich size=0 pairs=4 mode=thread metric=rate value=failed unit=Mmsg/s
bench=msgrate impl=openmpi size=0 pairs=4 mode=thread metric=rate value=absent unit=Mmsg/s
bench=bw impl=mpich size=4194304 pairs=1 mode=proc metric=bandwidth value=10 unit=GB/s
`

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{7}, 7, true},
		{[]float64{3, 1, 2}, 2, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
	} {
		in := append([]float64(nil), tc.in...)
		got, ok := median(in)
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("median(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median reordered its input: %v", in)
			}
		}
	}
}

func TestTable(t *testing.T) {
	tb := newTable()
	if err := tb.read(strings.NewReader(sample)); err != nil {
		t.Fatal(err)
	}
	if len(tb.rows) != 4 {
		t.Fatalf("got %d rows, want 4", len(tb.rows))
	}
	if got := tb.rounds(); got != 3 {
		t.Errorf("rounds = %d, want 3", got)
	}

	lat := tb.index[key{"pingpong", "8", "1", "proc", "latency"}]
	if m, _ := lat.median("weft"); !near(m, 0.30) {
		t.Errorf("weft latency median = %v, want 0.30", m)
	}
	if m, _ := lat.median("mpich"); !near(m, 0.22) {
		t.Errorf("mpich latency median = %v, want 0.22", m)
	}
	// openmpi: 0.40 and 0.44 (one failed round) -> 0.42
	if m, _ := lat.median("openmpi"); !near(m, 0.42) {
		t.Errorf("openmpi latency median = %v, want 0.42", m)
	}
	// latency: weft / min(peers) = 0.30 / 0.22
	if r, ok := lat.ratio(); !ok || !near(r, 0.30/0.22) {
		t.Errorf("latency ratio = %v, %v; want %v", r, ok, 0.30/0.22)
	}
	if got := lat.cellText("openmpi"); got != "0.420 (failed)" {
		t.Errorf("openmpi latency cell = %q", got)
	}

	// bandwidth: weft / max(peers) = 2 / 4
	bw := tb.index[key{"pingpong", "8", "1", "proc", "bandwidth"}]
	if r, ok := bw.ratio(); !ok || !near(r, 0.5) {
		t.Errorf("bandwidth ratio = %v, %v; want 0.5", r, ok)
	}

	// no peer number: no ratio; the words show instead
	mr := tb.index[key{"msgrate", "0", "4", "thread", "rate"}]
	if _, ok := mr.ratio(); ok {
		t.Errorf("msgrate ratio exists without a peer number")
	}
	if mr.cellText("mpich") != "failed" || mr.cellText("openmpi") != "absent" {
		t.Errorf("msgrate cells = %q, %q", mr.cellText("mpich"), mr.cellText("openmpi"))
	}

	// no weft: no ratio, weft cell "-"
	b := tb.index[key{"bw", "4194304", "1", "proc", "bandwidth"}]
	if _, ok := b.ratio(); ok {
		t.Errorf("bw ratio exists without weft")
	}

	var out strings.Builder
	if err := tb.write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Rounds: 3",
		"| test | weft | mpich | openmpi | weft/best peer | better |",
		"| pingpong 8 B latency (us) | 0.300 | 0.220 | 0.420 (failed) | 1.36 | lower |",
		"| pingpong 8 B bandwidth (GB/s) | 2.00 | 1.00 | 4.00 | 0.500 | higher |",
		"| msgrate 4 pairs thread rate (Mmsg/s) | 3.00 | failed | absent | - | higher |",
		"| bw 4 MiB bandwidth (GB/s) | - | 10.0 | - | - | higher |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q; got:\n%s", want, out.String())
		}
	}
}
