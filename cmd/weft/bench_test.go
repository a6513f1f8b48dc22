//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchList(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"bench", "list"}, &out, &errOut); code != 0 {
		t.Fatalf("weft bench list: exit %d, %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(suites) {
		t.Fatalf("%d lines for %d suites:\n%s", len(lines), len(suites), out.String())
	}
	for i, s := range suites {
		if f := strings.Fields(lines[i]); len(f) < 2 || f[0] != s.Name || !strings.Contains(lines[i], s.Title) {
			t.Errorf("line %q, want %s and its title", lines[i], s.Name)
		}
	}
	if !strings.Contains(lines[0], "p2p") {
		t.Errorf("p2p is not listed first: %s", out.String())
	}
}

func TestBenchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no suite given"},
		{[]string{"nosuch"}, `unknown suite "nosuch"`},
		{[]string{"p2p", "--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"p2p", "--rounds", "0"}, "--rounds 0: want at least 1"},
		{[]string{"p2p", "--rounds", "x"}, `invalid value "x" for flag -rounds`},
		{[]string{"p2p", "--timeout", "-1s"}, "--timeout -1s: want a positive duration"},
		{[]string{"p2p", "--peers", "mpich,lam"}, `--peers: unknown peer "lam"`},
		{[]string{"p2p", "--out", ""}, "--out: want a directory"},
		{[]string{"p2p", "--quiet", "-1s"}, "--quiet -1s: want a duration of 0 or more"},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"bench"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), "Usage: weft bench") {
			t.Errorf("weft bench %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"bench", "--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "--peers LIST") {
		t.Errorf("weft bench --help: exit %d, %s", code, out.String())
	}
	if code := run([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "weft bench SUITE") {
		t.Errorf("weft help does not mention weft bench:\n%s", out.String())
	}
}

func TestParseBenchFlagsAnywhere(t *testing.T) {
	o, err := parseBench([]string{"--quick", "p2p", "--rounds", "2", "eager", "--peers", "none", "--doc", "d.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.suites) != 2 || o.suites[0].Name != "p2p" || o.suites[1].Name != "eager" || !o.quick || o.rounds != 2 ||
		o.doc != "d.md" || o.peers == nil || len(o.peers) != 0 || o.out != "weft-bench" {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseBench([]string{"all"})
	if err != nil || len(o.suites) != len(suites) || strings.Join(o.peers, ",") != "mpich,openmpi" {
		t.Errorf("all: %v, %+v", err, o)
	}
}

// TestBenchRunsASuite runs the quick eager sweep (Weft alone, two procs
// over TCP) end to end: this test binary is weft, and its own worker.
func TestBenchRunsASuite(t *testing.T) {
	t.Setenv(cliEnv, "1") // the workers this starts run the CLI
	dir := t.TempDir()
	// Under -race the workers are race builds too: their reports go to files, since
	// a failed run's report keeps only the tail of its standard error.
	races := filepath.Join(dir, "race")
	t.Setenv("GORACE", "log_path="+races)
	out := filepath.Join(dir, "results")
	doc := filepath.Join(dir, "benchmarks.md")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "eager", "--quick", "--peers", "none", "--out", out, "--doc", doc}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s%s", code, stdout.String(), stderr.String(), raceReports(races))
	}
	for _, f := range []string{"eager.json", "eager.md", "eager-latency.svg", "eager-bandwidth.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(doc)
	for _, w := range []string{"<!-- bench:eager:begin -->", "| pingpong tcp limit=16 KiB 32 KiB latency (us) |", "every test of this suite runs Weft alone", "results/eager-latency.svg"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("%s lacks %q:\n%s", doc, w, b)
		}
	}
	if !strings.Contains(stderr.String(), "eager r1") {
		t.Errorf("no progress on stderr:\n%s", stderr.String())
	}
}

// raceReports returns the race detector's reports that the workers wrote to files
// named prefix.PID, if any.
func raceReports(prefix string) string {
	files, _ := filepath.Glob(prefix + ".*")
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.WriteString("\nrace report " + filepath.Base(f) + ":\n" + string(data))
	}
	return b.String()
}
