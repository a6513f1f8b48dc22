// Package twintest is what the suites' tests share to hold a C twin to Weft's
// body: the twin built as weft bench builds it (warnings as errors besides),
// started with a C MPI's launcher as weft bench starts it, the body run in the
// test's own process, and both sides' result lines read the same way.
package twintest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	twins "github.com/weft-mpi/weft/bench"
	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

// Twin is a suite's C twin built with one C MPI.
type Twin struct {
	Peer bench.PeerSpec
	Bin  string
}

// Build compiles twin (a file of bench/peers) with the compiler of peer
// (mpich or openmpi), -Wall -Werror, or skips t when that MPI's compiler or
// launcher is not installed.
func Build(t testing.TB, peer, twin string) *Twin {
	t.Helper()
	i := slices.IndexFunc(bench.DefaultPeers, func(p bench.PeerSpec) bool { return p.Name == peer })
	if i < 0 {
		t.Fatalf("twintest: no C MPI named %q", peer)
	}
	spec := bench.DefaultPeers[i]
	for _, tool := range []string{spec.CC, spec.Launcher} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here, so %s is not checked with %s", tool, twin, peer)
		}
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(twin, ".c"))
	if err := bench.Compile(spec.CC, twins.Peers, twin, bin, "-Wall", "-Werror"); err != nil {
		t.Fatal(err)
	}
	return &Twin{Peer: spec, Bin: bin}
}

// Command is ranks processes of the twin given args, started as weft bench
// starts them on one host, but with MPICH's UCX kept to shared memory: at
// MPI_Init it opens every network device, and the network-namespace tests of
// other packages add and remove some while these run.
func (tw *Twin) Command(ranks int, args ...string) *exec.Cmd {
	line := tw.Peer.Shm
	argv := append(append(slices.Clone(line[1:]), strconv.Itoa(ranks), tw.Bin), args...)
	cmd := exec.Command(line[0], argv...)
	cmd.Env = append(os.Environ(), "UCX_TLS=self,sm")
	return cmd
}

// Run runs ranks processes of the twin given args and returns their result
// lines; a failed job fails t with its standard error.
func (tw *Twin) Run(t testing.TB, ranks int, args ...string) []bench.Line {
	t.Helper()
	cmd := tw.Command(ranks, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, stderr.Bytes())
	}
	return Lines(t, out)
}

// Lines reads result lines, failing t on any other line.
func Lines(t testing.TB, out []byte) []bench.Line {
	t.Helper()
	var lines []bench.Line
	for _, s := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if s == "" {
			continue
		}
		l, ok := bench.ParseLine(s)
		if !ok {
			t.Fatalf("not a result line: %q", s)
		}
		lines = append(lines, l)
	}
	return lines
}

// stdout serialises RunBody's borrowing of the process's standard output.
var stdout sync.Mutex

// RunBody runs s's Body on ranks ranks of this process, given args, and
// returns the result lines it printed and Run's error.
func RunBody(t testing.TB, s bench.Suite, ranks int, args ...string) ([]bench.Line, error) {
	t.Helper()
	stdout.Lock()
	defer stdout.Unlock()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	printed := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		printed <- b
	}()
	runErr := mpi.Run(ranks, func(c *mpi.Comm) error { return s.Body(c, args) })
	os.Stdout = saved
	w.Close()
	return Lines(t, <-printed), runErr
}

// RunWriter runs body on ranks ranks of this process, with opts, and returns the
// result lines it wrote to out and Run's error: for a suite whose body takes its
// output writer.
func RunWriter(t testing.TB, ranks int, body func(c *mpi.Comm, out io.Writer) error, opts ...mpi.Option) ([]bench.Line, error) {
	t.Helper()
	var out syncWriter
	err := mpi.Run(ranks, func(c *mpi.Comm) error { return body(c, &out) }, opts...)
	return Lines(t, out.b.Bytes()), err
}

// syncWriter is a buffer that several ranks may write at once.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Arg returns the value of flag name in a suite's args ("-name value"), or def:
// what a test expects a row to say, read from the flags rather than from the
// code under test.
func Arg(args []string, name, def string) string {
	if i := slices.Index(args, "-"+name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return def
}

// Row renders a line but for its impl and value ("collocated size=8 message
// us"): what both sides of a test print alike.
func Row(l bench.Line) string {
	words := []string{l.Bench}
	for _, f := range l.Row {
		words = append(words, f.Key+"="+f.Value)
	}
	return strings.Join(append(words, l.Metric, l.Unit), " ")
}
