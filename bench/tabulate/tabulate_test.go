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
	if err := tb.write(&out, options{}); err != nil {
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

const roundsSample = `
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=latency value=6 unit=us round=1
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=4 unit=us round=1
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=latency value=3 unit=us round=1
bench=pingpong impl=weft size=8 pairs=1 mode=proc metric=latency value=5 unit=us round=2
bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=failed unit=us round=2 reason=timeout
bench=pingpong impl=openmpi size=8 pairs=1 mode=proc metric=latency value=10 unit=us round=2
bench=msgrate impl=weft size=0 pairs=4 mode=proc metric=rate value=1 unit=Mmsg/s round=1
bench=msgrate impl=mpich size=0 pairs=4 mode=proc metric=rate value=absent unit=Mmsg/s round=1
bench=msgrate impl=openmpi size=0 pairs=4 mode=proc metric=rate value=4 unit=Mmsg/s round=1
`

func TestPeersAndRounds(t *testing.T) {
	tb := newTable()
	if err := tb.read(strings.NewReader(roundsSample)); err != nil {
		t.Fatal(err)
	}
	if got := tb.peers(); strings.Join(got, ",") != "mpich,openmpi" {
		t.Errorf("peers = %v", got)
	}
	var out strings.Builder
	if err := tb.write(&out, options{peers: true, rounds: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| test | weft | mpich | openmpi | weft/best peer | weft/mpich | weft/openmpi | better |",
		"|---|---:|---:|---:|---:|---:|---:|---|",
		// weft 5.5, mpich 4 (one failed round), openmpi 6.5: best peer mpich
		"| pingpong 8 B latency (us) | 5.50 | 4.00 (failed) | 6.50 | 1.38 | 1.38 | 0.846 | lower |",
		"| msgrate 4 pairs proc rate (Mmsg/s) | 1.00 | absent | 4.00 | 0.250 | - | 0.250 | higher |",
		"| test | weft/ | r1 | r2 |",
		"| pingpong 8 B latency (us) | mpich | 1.50 | - |",
		"| pingpong 8 B latency (us) | openmpi | 2.00 | 0.500 |",
		"| msgrate 4 pairs proc rate (Mmsg/s) | mpich | - | - |",
		"| msgrate 4 pairs proc rate (Mmsg/s) | openmpi | 0.250 | - |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q; got:\n%s", want, out.String())
		}
	}

	// Without the flags the output is the plain table, as bench/p2p.sh wants it.
	var plain strings.Builder
	if err := tb.write(&plain, options{}); err != nil {
		t.Fatal(err)
	}
	if s := plain.String(); strings.Contains(s, "weft/mpich") || strings.Contains(s, "r1") {
		t.Errorf("plain output has the extra columns:\n%s", s)
	}
}

const sweepSample = `
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=30 unit=us limit=4096 round=1
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=20 unit=us limit=16384 round=1
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=22 unit=us limit=65536 round=1
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=34 unit=us limit=4096 round=2
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=24 unit=us limit=16384 round=2
bench=pingpong impl=weft size=16384 pairs=1 mode=proc metric=latency value=failed unit=us limit=65536 round=2
bench=bw impl=weft size=16384 pairs=1 mode=proc metric=bandwidth value=1.5 unit=GB/s limit=65536 round=1
bench=bw impl=weft size=16384 pairs=1 mode=proc metric=bandwidth value=1.0 unit=GB/s limit=4096 round=1
bench=bw impl=weft size=16384 pairs=1 mode=proc metric=bandwidth value=1.2 unit=GB/s round=1
`

func TestPivot(t *testing.T) {
	tb := newTable()
	tb.pivot = "limit"
	if err := tb.read(strings.NewReader(sweepSample)); err != nil {
		t.Fatal(err)
	}
	// numeric order, not string order ("16384" < "4096" as strings)
	if got := strings.Join(tb.columns(), ","); got != "4096,16384,65536" {
		t.Errorf("columns = %s", got)
	}
	var out strings.Builder
	if err := tb.write(&out, options{peers: true, rounds: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Rounds: 2",
		"| test | limit 4 KiB | limit 16 KiB | limit 64 KiB | best | better |",
		"|---|---:|---:|---:|---|---|",
		"| pingpong 16 KiB latency (us) | 32.0 | **22.0** | 22.0 (failed) | limit 16 KiB | lower |",
		// the line without limit= is not in the table
		"| bw 16 KiB bandwidth (GB/s) | 1.00 | - | **1.50** | limit 64 KiB | higher |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q; got:\n%s", want, out.String())
		}
	}
}

const protoSample = `
bench=pingpong impl=weft size=65536 metric=latency value=24 unit=us limit=65536 proto=eager round=1
bench=pingpong impl=weft size=65536 metric=latency value=26 unit=us limit=131072 proto=eager round=1
bench=pingpong impl=weft size=65536 metric=latency value=36 unit=us limit=4096 proto=three-phase round=1
bench=pingpong impl=weft size=65536 metric=latency value=30 unit=us limit=65536 proto=eager round=2
bench=pingpong impl=weft size=65536 metric=latency value=45 unit=us limit=4096 proto=three-phase round=2
bench=pingpong impl=weft size=1024 metric=latency value=6 unit=us limit=4096 proto=eager round=1
`

func TestPivotRounds(t *testing.T) {
	tb := newTable()
	tb.pivot = "proto"
	if err := tb.read(strings.NewReader(protoSample)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tb.write(&out, options{rounds: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Rounds: 2 (",
		"| test | proto eager | proto three-phase | best | better |",
		// eager pooled over limits and rounds: 24, 26, 30 -> 26
		"| pingpong 64 KiB latency (us) | **26.0** | 40.5 | proto eager | lower |",
		"| pingpong 1 KiB latency (us) | **6.00** | - | proto eager | lower |",
		"Each column over proto eager in every round",
		"| test | ratio | r1 | r2 |",
		// round 1: 36 / median(24, 26) = 1.44; round 2: 45 / 30 = 1.5
		"| pingpong 64 KiB latency (us) | proto three-phase / proto eager | 1.44 | 1.50 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q; got:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| pingpong 1 KiB latency (us) | proto three-phase") {
		t.Errorf("a ratio row for a size with one protocol only:\n%s", out.String())
	}
}
