//go:build unix

package bench

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

// TestMain makes the test binary its own worker, as weft is: the runner
// starts it as "TEST-BINARY bench-worker SUITE ARGS...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == WorkerCommand {
		Work([]Suite{tiny}, os.Args[2:])
	}
	os.Exit(m.Run())
}

// tiny is a suite whose body does what its -do flag says: print a result (ok),
// fail, or hang.
var tiny = Suite{
	Name: "tiny", Title: "A tiny suite", Twin: "tiny.c",
	Body: func(c *mpi.Comm, args []string) error {
		fs := flag.NewFlagSet("tiny", flag.ContinueOnError)
		do := fs.String("do", "ok", "ok, fail or hang")
		if err := fs.Parse(args); err != nil {
			return err
		}
		// Every rank takes part, so a job whose ranks cannot talk fails.
		var one = []int32{1}
		sum := []int32{0}
		if err := mpi.Allreduce(c, one, sum, mpi.Sum); err != nil {
			return err
		}
		switch *do {
		case "fail":
			return errors.New("tiny: failing as asked")
		case "hang":
			time.Sleep(time.Hour)
		}
		if c.Rank() == 0 {
			fmt.Println("some chatter that is not a result")
			Report(os.Stdout, "tiny", "time", float64(sum[0]), "us", "ranks", strconv.Itoa(int(sum[0])))
		}
		return nil
	},
}

func worker(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, WorkerCommand}
}

func suiteOf(tests ...Test) Suite {
	s := tiny
	s.Tests = func(bool) []Test { return tests }
	return s
}

func TestRunnerWeftRuns(t *testing.T) {
	s := suiteOf(
		Test{Args: []string{"-do", "ok"}, Ranks: 3, Fields: []string{"path", "shm"}},
		Test{Args: []string{"-do", "ok"}, Ranks: 4, PerProc: 2, Fields: []string{"path", "tcp"}},
		Test{Args: []string{"-do", "fail"}, Ranks: 2},
		Test{Args: []string{"-do", "hang"}, Ranks: 2, Timeout: 2 * time.Second},
		Test{Args: []string{"-do", "hang"}, Ranks: 2, PerProc: 1, Timeout: 2 * time.Second},
	)
	var progress strings.Builder
	res, err := RunSuite(s, Options{Rounds: 2, Peers: []string{}, Worker: worker(t), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 10 {
		t.Fatalf("%d runs, want 10 (5 tests, 2 rounds, weft only)", len(res.Runs))
	}
	want := []string{"ok", "ok", "failed", "timeout", "timeout"}
	for i, run := range res.Runs {
		if run.Impl != Weft || run.Round != 1+i/5 || run.Test != i%5 || run.Status != want[i%5] {
			t.Errorf("run %d: %+v, want status %s", i, run, want[i%5])
		}
	}
	if f := res.Runs[2]; !strings.Contains(f.Stderr, "tiny: failing as asked") || !strings.Contains(f.Command, "WEFT_NP=2") {
		t.Errorf("the failed run says %q, command %q", f.Stderr, f.Command)
	}
	if f := res.Runs[4]; !strings.Contains(f.Command, "weft run -n 2 --per-proc 1") {
		t.Errorf("the multi-proc run's command is %q", f.Command)
	}
	if res.WeftFailures() != 6 {
		t.Errorf("%d failures of Weft, want 6", res.WeftFailures())
	}
	// Every rank took part: the sum of ones is the job's size.
	if len(res.Lines) != 4 {
		t.Fatalf("lines: %+v", res.Lines)
	}
	for _, l := range res.Lines {
		ranks := []string{"3", "4"}[l.Test]
		path := []string{"shm", "tcp"}[l.Test]
		if l.Impl != Weft || l.Row[0] != (Field{"path", path}) || l.Row[1] != (Field{"ranks", ranks}) || strconv.Itoa(int(l.Value)) != ranks {
			t.Errorf("line %+v", l)
		}
	}
	if len(res.Table) != 2 || res.Table[0].Label != "tiny shm ranks=3 time (us)" {
		t.Errorf("table %+v", res.Table)
	}
	p := progress.String()
	for _, w := range []string{"tiny r2", "time=3.00 us", "failed: ", "timeout: ", "stderr: "} {
		if !strings.Contains(p, w) {
			t.Errorf("progress lacks %q:\n%s", w, p)
		}
	}
	md := res.Markdown("", nil)
	for _, w := range []string{"Runs that did not succeed", "**timeout**", "| tiny shm ranks=3 time (us) | 3.00 | lower |", "none asked for"} {
		if !strings.Contains(md, w) {
			t.Errorf("the report lacks %q:\n%s", w, md)
		}
	}
}

// fakeMPI puts on PATH a compiler that "builds" a twin into a shell script
// printing one result line (then sleeping, for a hang after the results),
// and a launcher that runs it; it returns the spec of that peer.
func fakeMPI(t *testing.T, name, sleep string) PeerSpec {
	dir := t.TempDir()
	cc := `#!/bin/sh
[ "$1" = -show ] && { echo fake-cc; exit 0; }
out=$3
echo "$(date +%s%N)" >> "` + dir + `/builds"
printf '#!/bin/sh\necho "bench=tiny impl=c ranks=3 metric=time value=7 unit=us"\nsleep ` + sleep + `\n' > "$out"
chmod +x "$out"
`
	launcher := "#!/bin/sh\nshift 2\nexec \"$@\"\n"
	for file, text := range map[string]string{"mpicc." + name: cc, "mpiexec." + name: launcher} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return PeerSpec{Name: name, CC: "mpicc." + name, Launcher: "mpiexec." + name,
		Shm: []string{"mpiexec." + name, "-n"}, TCP: []string{"mpiexec." + name, "-n"},
		Version: func() string { return name + " 1.0" }}
}

// brokenMPI is a peer whose compiler fails.
func brokenMPI(t *testing.T) PeerSpec {
	dir := t.TempDir()
	cc := "#!/bin/sh\n[ \"$1\" = -show ] && exit 0\necho 'tiny.c:1: error: no MPI here' >&2\nexit 1\n"
	for file, text := range map[string]string{"mpicc.broken": cc, "mpiexec.broken": "#!/bin/sh\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return PeerSpec{Name: "broken", CC: "mpicc.broken", Launcher: "mpiexec.broken", Shm: []string{"mpiexec.broken", "-n"}}
}

func TestRunnerPeers(t *testing.T) {
	specs := []PeerSpec{
		fakeMPI(t, "fast", "0"),
		fakeMPI(t, "stuck", "60"),
		{Name: "gone", CC: "weft-no-such-mpicc", Launcher: "weft-no-such-mpiexec"},
		brokenMPI(t),
	}
	twins := fstest.MapFS{"tiny.c": {Data: []byte("int main(void) { return 0; }\n")}}
	cache := t.TempDir()
	s := suiteOf(
		Test{Args: []string{"-do", "ok"}, Ranks: 3, Lines: 1},
		Test{Args: []string{"-do", "ok"}, Ranks: 2, Weft: true},
	)
	o := Options{PeerSpecs: specs, Twins: twins, Cache: cache, Worker: worker(t), Timeout: 30 * time.Second}
	res, err := RunSuite(s, o)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]Run{}
	for _, run := range res.Runs {
		if run.Test == 0 {
			status[run.Impl] = run
		} else if run.Impl != Weft {
			t.Errorf("a Weft-only test ran %s", run.Impl)
		}
	}
	if status[Weft].Status != "ok" || status["fast"].Status != "ok" || status["gone"].Status != "absent" ||
		status["broken"].Status != "failed" || status["broken"].Failed() {
		t.Errorf("runs: %+v", status)
	}
	// stuck printed its result and did not exit: ended and kept.
	if st := status["stuck"]; st.Status != "ok" || !strings.Contains(st.Note, "after its results") || st.Seconds > 20 {
		t.Errorf("stuck: %+v", st)
	}
	row := res.Table[0]
	if row.Medians["fast"] != 7 || row.Medians["stuck"] != 7 || row.Medians[Weft] != 3 || row.Missing["gone"] != "absent" {
		t.Errorf("row %+v", row)
	}
	if row.Ratio == nil || *row.Ratio != 3.0/7 {
		t.Errorf("ratio %v", row.Ratio)
	}
	if res.Table[1].Missing["fast"] != "weft only" {
		t.Errorf("Weft-only row: %+v", res.Table[1])
	}
	md := res.Markdown("", nil)
	for _, w := range []string{"**gone: absent: weft-no-such-mpicc not found**", "fast: fast 1.0", "| weft | fast | stuck | gone | broken |", "| absent | failed |", "weft only",
		"**broken: failed: mpicc.broken -O2 tiny.c failed: exit status 1: tiny.c:1: error: no MPI here**"} {
		if !strings.Contains(md, w) {
			t.Errorf("the report lacks %q:\n%s", w, md)
		}
	}
	// A second run reuses the builds in the cache.
	if _, err := RunSuite(suiteOf(Test{Args: []string{"-do", "ok"}, Ranks: 3, Weft: true}), o); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fast", "stuck"} {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(mustLook(t, "mpicc."+name)), "builds"))
		if n := strings.Count(string(b), "\n"); n != 1 {
			t.Errorf("%s built %d times, want once", name, n)
		}
	}
}

func mustLook(t *testing.T, name string) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("%s not on PATH", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestRunnerWritesOutputs(t *testing.T) {
	s := suiteOf(Test{Args: []string{"-do", "ok"}, Ranks: 2, Fields: []string{"size", "8"}},
		Test{Args: []string{"-do", "ok"}, Ranks: 3, Fields: []string{"size", "64"}})
	s.Plots = []Plot{{File: "tiny-time", Title: "Time", Metric: "time", X: "size", LogX: true},
		{File: "none", Title: "Nothing", Metric: "rate", X: "size"}}
	res, err := RunSuite(s, Options{Peers: []string{}, Worker: worker(t), Command: "weft bench tiny"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	files, err := res.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if strings.Join(names, ",") != "tiny-time.svg,tiny.json,tiny.md" {
		t.Errorf("wrote %v", names)
	}
	var back struct {
		Suite string
		Lines []Line
		Table []*Row
	}
	js, _ := os.ReadFile(filepath.Join(out, "tiny.json"))
	if err := json.Unmarshal(js, &back); err != nil || back.Suite != "tiny" || len(back.Lines) != 6 || len(back.Table) != 2 {
		t.Errorf("tiny.json: %v, %+v", err, back)
	}
	doc := filepath.Join(dir, "docs", "benchmarks.md")
	os.MkdirAll(filepath.Dir(doc), 0o755)
	os.WriteFile(doc, []byte("# Benchmarks\n"), 0o644)
	if err := res.UpdateDoc(doc, out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	for _, w := range []string{"# Benchmarks\n\n<!-- bench:tiny:begin -->\n## A tiny suite\n", "Written by `weft bench tiny`", "![Time](../out/tiny-time.svg)", "<!-- bench:tiny:end -->\n"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("the doc lacks %q:\n%s", w, b)
		}
	}
}

func TestRunnerRejects(t *testing.T) {
	for _, tc := range []struct {
		s    Suite
		o    Options
		want string
	}{
		{suiteOf(), Options{}, "has no tests"},
		{suiteOf(Test{Ranks: 0}), Options{}, "want Ranks >= 1"},
		{suiteOf(Test{Ranks: 1, Fields: []string{"odd"}}), Options{}, "Fields in pairs"},
		{suiteOf(Test{Ranks: 1}), Options{Peers: []string{"lam"}, Twins: fstest.MapFS{}}, `unknown peer "lam"`},
		{suiteOf(Test{Ranks: 1}), Options{Rounds: -1}, "rounds -1"},
	} {
		_, err := RunSuite(tc.s, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestRunnerCancel(t *testing.T) {
	cancel := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(cancel) })
	start := time.Now()
	res, err := RunSuite(suiteOf(Test{Args: []string{"-do", "hang"}, Ranks: 2}),
		Options{Peers: []string{}, Worker: worker(t), Cancel: cancel, Timeout: time.Minute})
	if !errors.Is(err, ErrInterrupted) || res != nil {
		t.Fatalf("RunSuite returned %v, %v; want ErrInterrupted", res, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the hanging run was ended %v after the cancel, not at once", d)
	}
}

// TestRunnerCluster: tests across hosts run Weft through weft run on the
// Cluster's hosts (here localhost, twice), fail every run with the Cluster's
// error when it cannot be made, and the Cluster is closed at the end; a test
// whose ranks are not one proc per host is refused.
func TestRunnerCluster(t *testing.T) {
	closed := 0
	s := suiteOf(Test{Args: []string{"-do", "ok"}, Ranks: 4, PerProc: 2, Hosts: 2, Twin: "other.c"})
	s.Cluster = func(n int) (*Cluster, error) {
		if n != 2 {
			t.Errorf("Cluster(%d), want 2", n)
		}
		return &Cluster{Names: []string{"localhost", "localhost"}, Addrs: []string{"127.0.0.1", "127.0.0.1"},
			Rsh: "false {host}", LauncherAddr: "127.0.0.1", Close: func() error { closed++; return nil }}, nil
	}
	res, err := RunSuite(s, Options{Rounds: 1, Peers: []string{}, Worker: worker(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].Status != "ok" || len(res.Lines) != 1 || res.Lines[0].Value != 4 ||
		!strings.Contains(res.Runs[0].Command, "--hosts localhost,localhost --rsh 'false {host}'") {
		t.Errorf("runs %+v, lines %+v", res.Runs, res.Lines)
	}
	if closed != 1 {
		t.Errorf("the cluster was closed %d times, want 1", closed)
	}

	s.Cluster = func(int) (*Cluster, error) { return nil, errors.New("needs root and iproute2") }
	res, err = RunSuite(s, Options{Rounds: 1, Peers: []string{}, Worker: worker(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].Status != "failed" || !strings.Contains(res.Runs[0].Stderr, "needs root and iproute2") {
		t.Errorf("runs without a cluster: %+v", res.Runs)
	}

	s = suiteOf(Test{Args: []string{"-do", "ok"}, Ranks: 3, PerProc: 1, Hosts: 2})
	if _, err := RunSuite(s, Options{Rounds: 1, Peers: []string{}, Worker: worker(t)}); err == nil || !strings.Contains(err.Error(), "one proc per host") {
		t.Errorf("3 ranks on 2 hosts: %v", err)
	}
}
