//go:build unix

package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/testout"
)

// outcome is what a job left behind.
type outcome struct {
	err            error
	stdout, stderr string
	took           time.Duration
}

// waitFor waits until out holds n copies of sub.
func waitFor(t *testing.T, out *testout.Buffer, sub string, n int) {
	t.Helper()
	if !out.Await(20*time.Second, func(s string) bool { return strings.Count(s, sub) >= n }) {
		t.Fatalf("output has %d of %d %q after 20 s:\n%s", strings.Count(out.String(), sub), n, sub, out)
	}
}

// running is a job the test started.
type running struct {
	t              *testing.T
	stdout, stderr *testout.Buffer
	start          time.Time
	done           chan error
}

// start runs the helper as a job: cfg's Program and Args are set here, from the
// helper's words; the environment is the test's, and cfg.Env's on top.
func start(t *testing.T, cfg Config, words ...string) *running {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Program = self
	cfg.Args = append([]string{helperArg}, words...)
	// A race-enabled binary sleeps a second at exit unless told otherwise.
	cfg.Env = append(append(os.Environ(), cfg.Env...), strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	r := &running{t: t, stdout: testout.New(), stderr: testout.New(), start: time.Now(), done: make(chan error, 1)}
	cfg.Stdout, cfg.Stderr = r.stdout, r.stderr
	go func() { r.done <- Run(cfg) }()
	return r
}

// wait waits for the job (failing the test after 30 s) and checks that no
// proc of it is left.
func (r *running) wait() outcome {
	r.t.Helper()
	var err error
	select {
	case err = <-r.done:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the job did not end within 30 s\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	o := outcome{err: err, stdout: r.stdout.String(), stderr: r.stderr.String(), took: time.Since(r.start)}
	checkGone(r.t, o)
	return o
}

// launch runs the helper as a job to its end.
func launch(t *testing.T, cfg Config, words ...string) outcome {
	t.Helper()
	return start(t, cfg, words...).wait()
}

// dump is the job's output for a failure message.
func (o outcome) dump() string {
	return fmt.Sprintf("Run: %v (after %v)\nstdout:\n%s\nstderr:\n%s", o.err, o.took.Round(time.Millisecond), o.stdout, o.stderr)
}

var pidLine = regexp.MustCompile(`(?m)pid=(\d+)$`)

// checkGone fails the test if any proc that printed its pid still runs: Run
// must leave no process of the job behind. A proc under an rsh wrapper that
// forks is the wrapper's child, killed as the wrapper is reaped: it gets a
// moment to die (and may stay a zombie until init reaps it).
func checkGone(t *testing.T, o outcome) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for _, m := range pidLine.FindAllStringSubmatch(o.stdout, -1) {
		pid, _ := strconv.Atoi(m[1])
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("proc pid %d is still running after Run returned", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// alive reports whether pid is a process that has not exited.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, err := os.Stat("/proc/self"); err == nil {
			return false // Linux: no entry, no process
		}
		return syscall.Kill(pid, 0) == nil
	}
	// pid (comm) state ...: the state follows the last ')'.
	_, rest, _ := strings.Cut(string(stat[bytes.LastIndexByte(stat, ')'):]), " ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// oks returns the helper's "ok" lines by proc, as key=value fields.
func oks(t *testing.T, o outcome) map[int]map[string]string {
	t.Helper()
	out := map[int]map[string]string{}
	for _, l := range strings.Split(o.stdout, "\n") {
		_, rest, ok := strings.Cut(l, "ok proc=")
		if !ok {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields("proc=" + rest) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		p, _ := strconv.Atoi(f["proc"])
		if _, dup := out[p]; dup {
			t.Errorf("two ok lines from proc %d", p)
		}
		out[p] = f
	}
	return out
}

// wantFailure checks that the job failed with code, and that the message names
// the proc, its host and its ranks (unless proc is -1: any proc), and says
// what.
func wantFailure(t *testing.T, o outcome, code int, proc int, host, ranks, what string) {
	t.Helper()
	var f *Failure
	if !errors.As(o.err, &f) {
		t.Fatalf("want a *Failure\n%s", o.dump())
	}
	msg := f.Error()
	want := fmt.Sprintf("proc %d on host %s (%s) ", proc, host, ranks)
	if proc < 0 {
		want = fmt.Sprintf("proc %d on host localhost (%s) ", f.Proc, rankText(f.Proc, 1))
	}
	if ExitCode(o.err) != code || !strings.HasPrefix(msg, want) || !strings.Contains(msg, what) {
		t.Fatalf("exit %d, %q; want %d, %q...%q\n%s", ExitCode(o.err), msg, code, want, what, o.dump())
	}
}

func TestLocalJobs(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 4; n++ {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			o := launch(t, Config{Ranks: n})
			if o.err != nil {
				t.Fatal(o.dump())
			}
			got := oks(t, o)
			if len(got) != n {
				t.Fatalf("%d ok lines, want %d\n%s", len(got), n, o.dump())
			}
			layout := fmt.Sprintf("[1;%d;1]", n)
			nodes := "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
			for p, f := range got {
				want := map[string]string{"size": strconv.Itoa(n), "mode": "fd", "layout": layout, "host": "localhost",
					"ranks": fmt.Sprintf("%d-%d", p, p), "nodes": nodes, "keylen": "64", "kvs": f["job"]}
				for k, v := range want {
					if f[k] != v {
						t.Errorf("proc %d: %s=%s, want %s", p, k, f[k], v)
					}
				}
				if !regexp.MustCompile(`^weft-[0-9a-f]{16}$`).MatchString(f["job"]) || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(f["key"]) {
					t.Errorf("proc %d: job %q key %q", p, f["job"], f["key"])
				}
				if f["job"] != got[0]["job"] || f["key"] != got[0]["key"] {
					t.Errorf("proc %d has another job or key than proc 0", p)
				}
			}
		})
	}
}

// TestEnvironment: a local proc inherits the launcher's environment, but not
// what it had from a launcher of its own (PMI_*) nor a stale job's WEFT_*.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	env := []string{"OTHER=x", "PMI_PORT=10.0.0.1:1", "PMI_ID=7", "WEFT_JOB=weft-stale", "WEFT_SPIN=3us"}
	o := launch(t, Config{Ranks: 1, Env: env}, "env=OTHER,PMI_PORT,PMI_ID,WEFT_JOB,WEFT_SPIN")
	if o.err != nil {
		t.Fatal(o.dump())
	}
	f := oks(t, o)[0]
	for _, want := range []string{`env OTHER="x" true`, `env PMI_PORT="" false`, `env PMI_ID="" false`,
		`env WEFT_JOB="` + f["job"] + `" true`, `env WEFT_SPIN="3us" true`} {
		if !strings.Contains(o.stdout, want+"\n") {
			t.Errorf("no line %q\n%s", want, o.dump())
		}
	}
}

func TestUnevenLayout(t *testing.T) {
	t.Parallel()
	o := launch(t, Config{Ranks: 5, PerProc: 3, TagOutput: true})
	if o.err != nil {
		t.Fatal(o.dump())
	}
	got := oks(t, o)
	if len(got) != 2 || got[0]["layout"] != "3+2" || got[0]["ranks"] != "0-2" || got[1]["ranks"] != "3-4" {
		t.Fatalf("want procs of ranks 0-2 and 3-4 in layout 3+2\n%s", o.dump())
	}
	for _, want := range []string{"[ranks 0-2] ok proc=0 ", "[ranks 3-4] ok proc=1 "} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("no line starting %q\n%s", want, o.dump())
		}
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		words []string
		code  int
		what  string
	}{
		{"exit", []string{"die=1:3"}, 3, "exited with status 3"},
		{"abort", []string{"abort=1:7"}, 7, "aborted the job with exit code 7: proc 1 gives up"},
		{"abort in a barrier", []string{"abortwait=1:9"}, 9, "aborted the job with exit code 9: proc 1 gives up in a barrier"},
		{"signal", []string{"kill=1"}, 128 + 9, "was killed by signal 9"},
		{"no finalize", []string{"nofin=1"}, 1, "exited with status 0 without calling PMI finalize"},
		{"stranded", []string{"noinit=1"}, 1, "exited without joining the PMI barrier that proc "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := launch(t, Config{Ranks: 3}, tc.words...)
			wantFailure(t, o, tc.code, 1, "localhost", "rank 1", tc.what)
			if o.took > 5*time.Second {
				t.Errorf("the job took %v to end", o.took)
			}
		})
	}
}

func TestSignalForwarded(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal)
	r := start(t, Config{Ranks: 3, Signals: sigs}, "term=9", "hang")
	waitFor(t, r.stdout, "ready", 3)
	sigs <- syscall.SIGTERM
	o := r.wait()
	wantFailure(t, o, 9, -1, "", "", "exited with status 9, after weft run forwarded signal terminated to the job")
	if n := strings.Count(o.stdout, " got terminated"); n != 3 {
		t.Errorf("%d procs saw SIGTERM, want 3\n%s", n, o.dump())
	}
}

func TestSecondSignalKills(t *testing.T) {
	t.Parallel()
	sigs := make(chan os.Signal)
	r := start(t, Config{Ranks: 2, Signals: sigs, Grace: time.Minute}, "ignoreterm", "hang")
	waitFor(t, r.stdout, "ready", 2)
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	o := r.wait()
	wantFailure(t, o, 128+9, -1, "", "", "was killed by signal 9")
	if o.took > 10*time.Second {
		t.Errorf("the job took %v; the second signal should have killed it at once", o.took)
	}
}

func TestGraceThenKill(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	// Proc 2 fails after the barrier, when the others surely ignore SIGTERM.
	o := launch(t, Config{Ranks: 3, Grace: grace}, "ignoreterm", "hang", "nofin=2")
	wantFailure(t, o, 1, 2, "localhost", "rank 2", "without calling PMI finalize")
	if o.took < grace || o.took > 5*time.Second {
		t.Errorf("the job took %v; procs that ignore SIGTERM should be killed %v after it", o.took, grace)
	}
}

// TestTagOutput: every line of every proc arrives whole, once, in its proc's
// order, behind its proc's tag, though each was written in three pieces while
// the other procs wrote theirs.
func TestTagOutput(t *testing.T) {
	t.Parallel()
	const lines = 300
	o := launch(t, Config{Ranks: 5, PerProc: 2, TagOutput: true}, "lines="+strconv.Itoa(lines))
	if o.err != nil {
		t.Fatal(o.dump())
	}
	tags := []string{"[ranks 0-1] ", "[ranks 2-3] ", "[rank 4] "}
	body := regexp.MustCompile(`^line (\d+) of proc (\d+) (x+) end (\d+)$`)
	for name, text := range map[string]string{"stdout": o.stdout, "stderr": o.stderr} {
		next := make([]int, len(tags)) // the next line number expected of each proc
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			proc := slices.IndexFunc(tags, func(tag string) bool { return strings.HasPrefix(l, tag) })
			if proc < 0 {
				t.Fatalf("%s: untagged line %q", name, l)
			}
			rest := strings.TrimPrefix(l, tags[proc])
			m := body.FindStringSubmatch(rest)
			switch {
			case m != nil:
				i, _ := strconv.Atoi(m[1])
				if m[2] != strconv.Itoa(proc) || i != next[proc] || m[4] != m[1] || len(m[3]) != 50+i%7 {
					t.Fatalf("%s: line %q out of place (want line %d of proc %d)", name, l, next[proc], proc)
				}
				next[proc]++
			case rest == "no newline at the end", strings.HasPrefix(rest, "pid="), strings.HasPrefix(rest, "ok proc="+strconv.Itoa(proc)+" "):
			default:
				t.Fatalf("%s: line %q is not one the proc wrote", name, l)
			}
		}
		for p, n := range next {
			if n != lines {
				t.Errorf("%s: %d lines of proc %d, want %d", name, n, p, lines)
			}
		}
		if n := strings.Count(text, "] no newline at the end\n"); name == "stdout" && n != len(tags) {
			t.Errorf("%s: %d unfinished last lines forwarded, want %d", name, n, len(tags))
		}
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name string
		in   io.Reader
		want string
	}{
		{"reader", strings.NewReader("hello\nworld\n"), `"hello\nworld\n"`},
		{"file", f, `"from a file\n"`},
		{"none", nil, `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := launch(t, Config{Ranks: 3, Stdin: tc.in}, "stdin")
			if o.err != nil {
				t.Fatal(o.dump())
			}
			for p, want := range []string{tc.want, `""`, `""`} {
				if l := fmt.Sprintf("proc %d stdin=%s\n", p, want); !strings.Contains(o.stdout, l) {
					t.Errorf("no line %q\n%s", l, o.dump())
				}
			}
		})
	}
}

func TestCannotStart(t *testing.T) {
	t.Parallel()
	var f *Failure
	err := Run(Config{Ranks: 2, Program: filepath.Join(t.TempDir(), "no-such-program")})
	if !errors.As(err, &f) || f.Code != 127 || f.Proc != 0 || !strings.Contains(f.What, "could not be started") {
		t.Errorf("Run of a missing program: %v", err)
	}
	err = Run(Config{Ranks: 2, Program: "true", Hosts: []Host{{"hostA", 1}}, Rsh: "/no/such/rsh", LauncherAddr: "127.0.0.1"})
	if !errors.As(err, &f) || f.Code != 127 || f.Host != "hostA" || !strings.Contains(f.What, "could not be started") {
		t.Errorf("Run through a missing rsh: %v", err)
	}
	if err := Run(Config{Ranks: 0, Program: "true"}); err == nil || errors.As(err, &f) {
		t.Errorf("Run of 0 ranks: %v", err)
	}
}

// TestNoLeaks: once Run returns, whether the job succeeded, failed, was
// signalled or refused strangers, none of the launcher's goroutines is left.
// (Not parallel: it counts the test binary's goroutines.)
func TestNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	launch(t, Config{Ranks: 3, Hosts: []Host{{"hostA", 2}, {"localhost", 1}}, Rsh: fakeRsh, LauncherAddr: "127.0.0.1", TagOutput: true}, "stranger")
	launch(t, Config{Ranks: 3}, "abortwait=2:3")
	sigs := make(chan os.Signal)
	r := start(t, Config{Ranks: 2, Signals: sigs, Stdin: strings.NewReader("input")}, "hang")
	waitFor(t, r.stdout, "ready", 2)
	sigs <- syscall.SIGINT
	r.wait()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before the jobs, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
