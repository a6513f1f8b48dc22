package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weft-mpi/weft/internal/launch"
)

// WorkerCommand is the hidden subcommand that runs a suite's Body in a fresh
// process: PROGRAM bench-worker SUITE ARGS...
const WorkerCommand = "bench-worker"

// DefaultTimeout bounds one run of one implementation when neither the test
// nor the options say otherwise.
const DefaultTimeout = 2 * time.Minute

// afterResults is how long a run that has printed all its results may take
// to exit before it is ended (see Test.Lines).
const afterResults = 3 * time.Second

// Options control one invocation of a suite.
type Options struct {
	Quick   bool          // the suite's quick tests: a smoke test
	Rounds  int           // rounds of every test; 0: 3, or 1 when Quick
	Timeout time.Duration // one run of one implementation; 0: DefaultTimeout
	// Peers names the peers to run, in this order; nil runs every one of
	// PeerSpecs, an empty list none.
	Peers     []string
	PeerSpecs []PeerSpec // nil: DefaultPeers
	Twins     fs.FS      // the C twins' sources (bench/peers)
	Cache     string     // where twins are built; "": the user's cache dir, weft/bench
	// Worker starts Weft's side: Worker..., SUITE, ARGS... runs the suite's
	// Body in every rank (see Work); nil means this executable with
	// WorkerCommand.
	Worker []string
	// Quiet, when above 0, pauses 1 s before each test to measure the CPU
	// time others use, and waits while it is 10% or more, up to Quiet: on a
	// shared machine, figures taken under others' load are not to be quoted.
	Quiet time.Duration
	// Cancel, when closed, ends the run in progress and RunSuite returns
	// ErrInterrupted (the runs are in process groups of their own: a
	// terminal's Ctrl-C does not reach them).
	Cancel   <-chan struct{}
	Command  string    // the command line, for the report
	Progress io.Writer // one line per run; nil discards
}

// ErrInterrupted is RunSuite's error when Options.Cancel was closed.
var ErrInterrupted = errors.New("interrupted")

// Result is everything one invocation of a suite found.
type Result struct {
	Suite   string    `json:"suite"`
	Title   string    `json:"title"`
	Command string    `json:"command"`
	Quick   bool      `json:"quick"`
	Rounds  int       `json:"rounds"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Machine Machine   `json:"machine"`
	Peers   []*Peer   `json:"peers"`
	Tests   []Test    `json:"tests"`
	Runs    []Run     `json:"runs"`
	Lines   []Line    `json:"lines"`
	Table   []*Row    `json:"table"`

	suite     Suite
	plotFiles []string // the SVGs Write drew, for the report's links
}

// Run is one run of one implementation for one test in one round.
type Run struct {
	Round   int     `json:"round"`
	Test    int     `json:"test"`
	Impl    string  `json:"impl"`
	Status  string  `json:"status"` // ok, failed, timeout, no-output, absent
	Command string  `json:"command,omitempty"`
	Seconds float64 `json:"seconds"`
	Lines   int     `json:"lines"`
	Note    string  `json:"note,omitempty"`
	Stderr  string  `json:"stderr,omitempty"` // its tail, when the run did not succeed
}

// Failed tells a run that was made and did not succeed (a peer that is
// absent or failed to build makes no runs: its Command is empty).
func (r Run) Failed() bool { return r.Status != "ok" && r.Command != "" }

// RunSuite runs every test of s for Weft and each present peer, interleaved
// (weft, then each peer, then the next test; round after round), and
// tabulates what they printed. Failures of runs are recorded in the result;
// the error is for a suite that cannot be run at all.
func RunSuite(s Suite, o Options) (*Result, error) {
	if s.Tests == nil || s.Body == nil {
		return nil, fmt.Errorf("suite %q has no tests or no body", s.Name)
	}
	if o.Rounds == 0 {
		o.Rounds = 3
		if o.Quick {
			o.Rounds = 1
		}
	}
	if o.Rounds < 0 {
		return nil, fmt.Errorf("rounds %d: want at least 1", o.Rounds)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Worker == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this program to start Weft's side: %w", err)
		}
		o.Worker = []string{exe, WorkerCommand}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	tests := s.Tests(o.Quick)
	if len(tests) == 0 {
		return nil, fmt.Errorf("suite %q has no tests", s.Name)
	}
	cluster := &hosts{s: s}
	for i, t := range tests {
		if t.Ranks < 1 || t.PerProc < 0 || len(t.Fields)%2 != 0 {
			return nil, fmt.Errorf("suite %q, test %d (%s): want Ranks >= 1, PerProc >= 0 and Fields in pairs", s.Name, i, strings.Join(t.Args, " "))
		}
		if t.Hosts > 1 && (t.PerProc < 1 || t.Ranks != t.Hosts*t.PerProc) {
			return nil, fmt.Errorf("suite %q, test %d (%s): across %d hosts, want Ranks = Hosts x PerProc (one proc per host)", s.Name, i, strings.Join(t.Args, " "), t.Hosts)
		}
		cluster.want = max(cluster.want, t.Hosts)
	}
	peers, err := selectPeers(s, o)
	if err != nil {
		return nil, err
	}
	twins := buildTestTwins(s, o, tests, peers)
	pr := newProgress(o.Progress)
	res := &Result{Suite: s.Name, Title: s.Title, Command: o.Command, Quick: o.Quick, Rounds: o.Rounds,
		Started: time.Now().UTC(), Peers: peers, Tests: tests, suite: s}
	for _, p := range peers {
		if p.Status != "ok" && s.Twin != "" {
			pr.linef("%s: peer %s", s.Name, p.Note())
		}
	}
	res.Machine = probeMachine()
	defer func() {
		if err := cluster.close(); err != nil {
			pr.linef("%s: removing the hosts: %v", s.Name, err)
		}
	}()
	for round := 1; round <= o.Rounds; round++ {
		for ti, t := range tests {
			if o.Quiet > 0 {
				res.Machine.waitQuiet(o.Quiet, pr.linef)
			}
			impls := []*Peer{nil}
			if !t.Weft {
				impls = append(impls, peers...)
			}
			for _, p := range impls {
				name := Weft
				if p != nil {
					name = p.Name
				}
				pr.statusf("%s r%d/%d test %d/%d %s: %s running", s.Name, round, o.Rounds, ti+1, len(tests), name, describe(t))
				if t.Hosts > 1 && !cluster.made {
					if c, err := cluster.get(); err != nil {
						pr.linef("%s: no hosts: %v", s.Name, err)
					} else if c.Note != "" {
						pr.linef("%s: %s", s.Name, c.Note)
					}
				}
				run, lines := runOne(s, o, t, twins.of(p, t), cluster)
				if run.Status == "interrupted" {
					pr.statusf("")
					return nil, ErrInterrupted
				}
				run.Round, run.Test = round, ti
				for i := range lines {
					lines[i].Round, lines[i].Test = round, ti
				}
				res.Runs = append(res.Runs, run)
				res.Lines = append(res.Lines, lines...)
				pr.linef("%s r%d %-40s %-8s %s", s.Name, round, describe(t), name, summary(run, lines))
				if run.Failed() {
					pr.linef("  %s: %s", run.Status, run.Command)
					if run.Stderr != "" {
						pr.linef("  stderr: %s", run.Stderr)
					}
				}
			}
		}
	}
	pr.statusf("")
	res.Machine.LoadEnd = loadavg()
	res.Seconds = time.Since(res.Started).Seconds()
	names := make([]string, len(peers))
	for i, p := range peers {
		names[i] = p.Name
	}
	res.Table = tabulate(s.tableLines(res.Lines), names, res.why)
	return res, nil
}

// selectPeers finds the peers the options name and builds the suite's twin
// for each present one.
func selectPeers(s Suite, o Options) ([]*Peer, error) {
	specs := o.PeerSpecs
	if specs == nil {
		specs = DefaultPeers
	}
	names := o.Peers
	if names == nil {
		for _, sp := range specs {
			names = append(names, sp.Name)
		}
	}
	cache := o.Cache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "weft", "bench")
	}
	var peers []*Peer
	for _, n := range names {
		var spec *PeerSpec
		for i := range specs {
			if specs[i].Name == n {
				spec = &specs[i]
			}
		}
		if spec == nil {
			return nil, fmt.Errorf("unknown peer %q (known: %s)", n, specNames(specs))
		}
		if o.Twins == nil && s.Twin != "" {
			return nil, errors.New("no C twin sources given")
		}
		peers = append(peers, findPeer(*spec, o.Twins, s.Twin, cache))
	}
	return peers, nil
}

// testTwins are the builds of the tests' own twins (Test.Twin), per peer and
// twin; each is a Peer like the suite's, with its Bin, or why it has none.
type testTwins map[*Peer]map[string]*Peer

// buildTestTwins builds, for each peer that is ok, the twins tests name that
// are not the suite's.
func buildTestTwins(s Suite, o Options, tests []Test, peers []*Peer) testTwins {
	tw := testTwins{}
	for _, p := range peers {
		if p.Status != "ok" {
			continue
		}
		for _, t := range tests {
			if t.Twin == "" || t.Twin == s.Twin || tw[p][t.Twin] != nil {
				continue
			}
			if tw[p] == nil {
				tw[p] = map[string]*Peer{}
			}
			// p.Bin is CACHE/HASH/NAME: the test's twin goes to the same cache.
			tw[p][t.Twin] = findPeer(p.PeerSpec, o.Twins, t.Twin, filepath.Dir(filepath.Dir(p.Bin)))
		}
	}
	return tw
}

// of is the peer p built for test t: p itself, or p with t's own twin.
func (tw testTwins) of(p *Peer, t Test) *Peer {
	if b := tw[p][t.Twin]; b != nil {
		return b
	}
	return p
}

// hosts makes the suite's cluster on first use and keeps it, or why it could
// not be made, for every test across hosts.
type hosts struct {
	s    Suite
	want int // the most hosts a test wants
	c    *Cluster
	err  error
	made bool
}

func (h *hosts) get() (*Cluster, error) {
	if !h.made {
		h.made = true
		if h.s.Cluster == nil {
			h.err = fmt.Errorf("suite %q has tests across %d hosts and no Cluster to make them", h.s.Name, h.want)
		} else if h.c, h.err = h.s.Cluster(h.want); h.err == nil && (h.c == nil || len(h.c.Names) < h.want || len(h.c.Addrs) < h.want) {
			h.err = fmt.Errorf("suite %q: its Cluster made fewer than the %d hosts asked for", h.s.Name, h.want)
			h.close()
		}
	}
	return h.c, h.err
}

// close removes the cluster, if one was made.
func (h *hosts) close() error {
	c := h.c
	h.c = nil
	if c == nil || c.Close == nil {
		return nil
	}
	return c.Close()
}

func specNames(specs []PeerSpec) string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// why says what happened to impl's runs of a test that left it no figure.
func (r *Result) why(test int, impl string) string {
	if impl != Weft && r.Tests[test].Weft {
		return "weft only"
	}
	status := "no output"
	for _, run := range r.Runs {
		if run.Test == test && run.Impl == impl && run.Status != "ok" {
			status = run.Status
		}
	}
	return status
}

// describe names a test for the progress lines: its fields, then its
// arguments.
func describe(t Test) string {
	var parts []string
	for i := 0; i+1 < len(t.Fields); i += 2 {
		parts = append(parts, t.Fields[i]+"="+t.Fields[i+1])
	}
	return strings.Join(append(parts, t.Args...), " ")
}

// summary is a run's figures for the progress line.
func summary(run Run, lines []Line) string {
	if run.Status != "ok" {
		return run.Status
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s=%s %s  ", l.Metric, FormatValue(l.Value), l.Unit)
	}
	fmt.Fprintf(&b, "(%.1f s)", run.Seconds)
	if run.Note != "" {
		b.WriteString(" " + run.Note)
	}
	return b.String()
}

// runOne runs test t once for Weft (p nil) or for peer p, on cluster's hosts
// when t is across hosts.
func runOne(s Suite, o Options, t Test, p *Peer, cluster *hosts) (Run, []Line) {
	run := Run{Impl: Weft}
	timeout := o.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	out := &resultWriter{printed: make(chan struct{})}
	if p != nil {
		out.want = t.Lines // Weft must exit by itself
	}
	var errBuf tailBuffer
	var start func() (<-chan error, func(), error)
	var cl *Cluster
	if t.Hosts > 1 {
		c, err := cluster.get()
		if err != nil {
			run.Command = fmt.Sprintf("-n %d across %d hosts", t.Ranks, t.Hosts)
			if p != nil {
				run.Impl = p.Name
			}
			run.Status, run.Stderr = "failed", err.Error()
			return run, nil
		}
		cl = c.first(t.Hosts)
	}
	switch {
	case p != nil:
		run.Impl = p.Name
		if p.Status != "ok" {
			run.Status = p.Status
			if t.Twin != "" {
				run.Note = p.Note() // the test's own twin may be what failed
			}
			return run, nil
		}
		argv, env := p.command(t.Ranks, t.TCP, t.Args)
		if cl != nil {
			line, err := []string(nil), fmt.Errorf("the suite's Cluster cannot start %s across hosts", p.Name)
			if cl.Across != nil {
				line, err = cl.Across(p.Name, cl, t.Ranks/t.Hosts)
			}
			if err != nil {
				run.Command = fmt.Sprintf("%s -n %d across %d hosts", p.Launcher, t.Ranks, t.Hosts)
				run.Status, run.Stderr = "failed", err.Error()
				return run, nil
			}
			q := *p
			q.TCP = line
			argv, env = q.command(t.Ranks, true, t.Args)
		}
		run.Command = shellJoin(append(env, argv...))
		start = func() (<-chan error, func(), error) { return startCmd(argv, env, out, &errBuf) }
	case cl != nil:
		env := append(slices.Clone(cl.Env), t.Env...)
		var hs []launch.Host
		for _, n := range cl.Names {
			hs = append(hs, launch.Host{Name: n, Slots: 1})
		}
		cfg := launch.Config{Ranks: t.Ranks, PerProc: t.PerProc, Hosts: hs, Rsh: cl.Rsh, LauncherAddr: cl.LauncherAddr,
			Program: o.Worker[0], Args: append(append(slices.Clone(o.Worker[1:]), s.Name), t.Args...),
			Env: append(os.Environ(), env...), Stdout: out, Stderr: &errBuf, Grace: 2 * time.Second}
		run.Command = shellJoin(append(append(env, "weft", "run", "-n", strconv.Itoa(t.Ranks), "--per-proc", strconv.Itoa(t.PerProc),
			"--hosts", strings.Join(cl.Names, ","), "--rsh", cl.Rsh, "--launcher-addr", cl.LauncherAddr), append(slices.Clone(o.Worker), s.Name)...)) +
			" " + shellJoin(t.Args)
		start = func() (<-chan error, func(), error) { return startLaunch(cfg) }
	case t.PerProc == 0 || t.PerProc >= t.Ranks:
		argv := append(append(slices.Clone(o.Worker), s.Name), t.Args...)
		env := append([]string{"WEFT_NP=" + strconv.Itoa(t.Ranks)}, t.Env...)
		run.Command = shellJoin(append(env, argv...))
		start = func() (<-chan error, func(), error) { return startCmd(argv, env, out, &errBuf) }
	default:
		cfg := launch.Config{Ranks: t.Ranks, PerProc: t.PerProc, Program: o.Worker[0],
			Args: append(append(slices.Clone(o.Worker[1:]), s.Name), t.Args...),
			Env:  append(os.Environ(), t.Env...), Stdout: out, Stderr: &errBuf, Grace: 2 * time.Second}
		run.Command = shellJoin(append(append(slices.Clone(t.Env), "weft", "run", "-n", strconv.Itoa(t.Ranks),
			"--per-proc", strconv.Itoa(t.PerProc)), append(slices.Clone(o.Worker), s.Name)...)) + " " + shellJoin(t.Args)
		start = func() (<-chan error, func(), error) { return startLaunch(cfg) }
	}
	begin := time.Now()
	done, stop, err := start()
	if err != nil {
		run.Status, run.Stderr = "failed", err.Error()
		return run, nil
	}
	status, note := supervise(done, stop, out.printed, o.Cancel, timeout)
	run.Seconds = time.Since(begin).Seconds()
	run.Status, run.Note = status, note
	lines := out.lines(run.Impl, t.Fields)
	run.Lines = len(lines)
	if run.Status == "ok" && len(lines) == 0 {
		run.Status = "no-output"
	}
	if run.Status != "ok" {
		run.Stderr = tail(errBuf.bytes(), 5)
		if run.Status != "no-output" {
			// Figures from a run that failed are not to be trusted.
			lines = nil
		}
	}
	return run, lines
}

// supervise waits for a run to end, ending it at its timeout, when cancel
// closes, or afterResults once it has printed every result it owes.
func supervise(done <-chan error, stop func(), printed, cancel <-chan struct{}, timeout time.Duration) (status, note string) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var grace <-chan time.Time
	for {
		select {
		case err := <-done:
			if err != nil {
				return "failed", err.Error()
			}
			return "ok", ""
		case <-timer.C:
			stop()
			<-done
			return "timeout", fmt.Sprintf("ended after %v", timeout)
		case <-cancel:
			stop()
			<-done
			return "interrupted", ""
		case <-printed:
			printed, grace = nil, time.After(afterResults)
		case <-grace:
			stop()
			<-done
			return "ok", fmt.Sprintf("ended %v after its results", afterResults)
		}
	}
}

// startCmd starts argv with env added to this process's environment, as the
// leader of a process group of its own so that stop ends whatever it
// started (mpiexec's proxies and ranks).
func startCmd(argv, env []string, stdout, stderr io.Writer) (<-chan error, func(), error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = newGroup()
	// Ranks left behind holding the output pipes do not keep Wait waiting.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%v", exit.ProcessState)
		}
		done <- err
	}()
	stop := func() { killGroup(cmd.Process) }
	return done, stop, nil
}

// startLaunch starts a job of several procs as weft run does; stop
// forwards SIGTERM, and the launcher kills what is left after its grace.
func startLaunch(cfg launch.Config) (<-chan error, func(), error) {
	sigs := make(chan os.Signal, 2)
	cfg.Signals = sigs
	done := make(chan error, 1)
	go func() { done <- launch.Run(cfg) }()
	var once sync.Once
	stop := func() { once.Do(func() { sigs <- syscall.SIGTERM }) }
	return done, stop, nil
}

// resultWriter keeps a run's standard output and closes printed once it
// holds want result lines (never, for want 0).
type resultWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	want    int
	n       int
	scanned int // bytes of buf counted
	printed chan struct{}
}

func (w *resultWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want == 0 || w.n >= w.want {
		return len(p), nil
	}
	for {
		rest := w.buf.Bytes()[w.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		if _, ok := ParseLine(string(rest[:i])); ok {
			w.n++
		}
		w.scanned += i + 1
	}
	if w.n >= w.want {
		close(w.printed)
	}
	return len(p), nil
}

// lines are the result lines written, filed under impl with fields first.
func (w *resultWriter) lines(impl string, fields []string) []Line {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ls []Line
	for _, s := range strings.Split(w.buf.String(), "\n") {
		l, ok := ParseLine(s)
		if !ok {
			continue
		}
		l.Impl = impl
		var row []Field
		for i := 0; i+1 < len(fields); i += 2 {
			row = append(row, Field{fields[i], fields[i+1]})
		}
		l.Row = append(row, l.Row...)
		ls = append(ls, l)
	}
	return ls
}

// tailBuffer keeps the last 64 KiB written to it: enough for the tail of a
// failed run's standard error, bounded whatever a run prints.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailKeep = 64 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailKeep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailKeep:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// shellJoin quotes words for a reader to paste into a shell.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.IndexFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
		}) < 0 {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
