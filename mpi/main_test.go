package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/weft-mpi/weft/mpi"
)

// helperEnv selects, in a re-executed test binary, which program TestMain runs
// through mpi.Main instead of the tests.
const helperEnv = "WEFT_TEST_HELPER"

// TestMain runs the tests, or, in a child started by runHelper, one of the helper
// programs. The helper is dispatched before the testing package parses the command
// line, so that mpi.Main sees -np and the testing flags never do.
func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		helperMain(name)
		fmt.Fprintf(os.Stderr, "helper %q: mpi.Main returned\n", name)
		os.Exit(100)
	}
	os.Exit(m.Run())
}

// helpers are the programs runHelper can start; each calls mpi.Main, which exits.
var helpers = map[string]func(c *mpi.Comm) error{
	// hello prints each rank and size and the arguments Main left to the program.
	"hello": func(c *mpi.Comm) error {
		fmt.Printf("rank %d of %d args %q\n", c.Rank(), c.Size(), os.Args[1:])
		return nil
	},
	// abort: rank 1 aborts with code 7 while the others wait for a message.
	"abort": func(c *mpi.Comm) error {
		if c.Rank() == 1 {
			return c.Abort(7)
		}
		_, err := mpi.Recv(c, []byte{0}, 1, 0)
		return err
	},
	// abortnil: rank 0 aborts with code 7 and returns nil, ignoring what Abort returned;
	// the other ranks do nothing. MPI_Abort ends the job with the code all the same.
	"abortnil": func(c *mpi.Comm) error {
		if c.Rank() == 0 {
			_ = c.Abort(7)
		}
		return nil
	},
	// ring: each rank sends its rank to the next and checks what the previous sent.
	"ring": func(c *mpi.Comm) error {
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		got := []int{-1}
		if _, err := mpi.Sendrecv(c, []int{c.Rank()}, next, 0, got, prev, 0); err != nil {
			return err
		}
		if got[0] != prev {
			return fmt.Errorf("rank %d got %d from rank %d", c.Rank(), got[0], prev)
		}
		fmt.Printf("rank %d of %d: ring passed\n", c.Rank(), c.Size())
		return nil
	},
	// fail: rank 2 returns an error, which releases the others.
	"fail": func(c *mpi.Comm) error {
		if c.Rank() == 2 {
			return errors.New("helper rank failure")
		}
		_, err := mpi.Recv(c, []byte{0}, 2, 0)
		return err
	},
}

func helperMain(name string) {
	fn := helpers[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
		os.Exit(101)
	}
	mpi.Main(fn)
}

// runHelper re-executes the test binary as helper program name with args, in this
// process's environment without any WEFT_ variable, plus env.
func runHelper(t *testing.T, name string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCommand(t, append([]string{os.Args[0]}, args...), name, env)
}

// runCommand runs argv, a command that starts the test binary (itself, or through
// a launcher), as helper program name, with env added as runHelper does.
func runCommand(t *testing.T, argv []string, name string, env []string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Under -race a process sleeps 1 s at exit unless told otherwise.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(cmd.Env, helperEnv+"="+name, "GORACE="+gorace), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the launcher's procs too, on a hang
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("helper %s: %v", name, err)
		}
	case <-time.After(jobTimeout):
		// A SIGQUIT first: the Go procs of a hung job print their goroutines.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		t.Fatalf("helper %s %q did not exit within %v; stdout:\n%s\nstderr:\n%s", name, argv, jobTimeout, out.String(), errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func TestMainNP(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		args     []string
		ranks    int
		wantArgs string // the arguments the program sees, as %q prints them
	}{
		{"flag", nil, []string{"-np", "3"}, 3, `[]`},
		{"flag=", nil, []string{"-np=3"}, 3, `[]`},
		{"double dash", nil, []string{"--np", "3", "-x"}, 3, `["-x"]`},
		{"among other args", nil, []string{"a", "-v", "-np", "3", "b"}, 3, `["a" "-v" "b"]`},
		{"flag wins over env", []string{"WEFT_NP=5"}, []string{"-np", "3"}, 3, `[]`},
		{"env", []string{"WEFT_NP=2"}, []string{"x"}, 2, `["x"]`},
		{"after --", []string{"WEFT_NP=2"}, []string{"--", "-np", "3"}, 2, `["--" "-np" "3"]`},
		{"default", nil, nil, runtime.NumCPU(), `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runHelper(t, "hello", tt.env, tt.args...)
			if code != 0 {
				t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
			}
			var want []string
			for r := range tt.ranks {
				want = append(want, fmt.Sprintf("rank %d of %d args %s", r, tt.ranks, tt.wantArgs))
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			if !sameSet(got, want) {
				t.Errorf("output:\n%s\nwant these lines in any order:\n%s", out, strings.Join(want, "\n"))
			}
		})
	}
}

func TestMainBadNP(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"zero", nil, []string{"-np", "0"}, `"0"`},
		{"not a number", nil, []string{"-np=x"}, `"x"`},
		{"missing value", nil, []string{"-np"}, "needs a value"},
		{"bad env", []string{"WEFT_NP=-4"}, nil, "WEFT_NP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runHelper(t, "hello", tt.env, tt.args...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if out != "" {
				t.Errorf("no rank should have run; stdout:\n%s", out)
			}
			if !strings.Contains(errOut, "invalid argument") || !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q: want an invalid argument error mentioning %s", errOut, tt.want)
			}
		})
	}
}

func TestMainExitStatus(t *testing.T) {
	tests := []struct {
		helper string
		code   int
		stderr []string // substrings of stderr
	}{
		{"abort", 7, []string{"job aborted", "rank 1 called Abort(7)"}},
		{"abortnil", 7, []string{"Abort(7)"}},
		{"fail", 1, []string{"rank 2", "helper rank failure", "process failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.helper, func(t *testing.T) {
			code, _, errOut := runHelper(t, tt.helper, nil, "-np", "3")
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, errOut)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr does not mention %q:\n%s", s, errOut)
				}
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		if count[s]--; count[s] < 0 {
			return false
		}
	}
	return true
}

// ---- helpers shared by the tests of this package ----

// runTimeout bounds every Run: a deadlock fails the test with a goroutine dump.
const runTimeout = 20 * time.Second

// jobTimeout bounds a job of several procs. The race detector makes the
// collective suite's jobs four times slower (3 s -> 13 s for 7 ranks in 4
// procs), and the other packages of `go test -race ./...` share the 2 CPUs: a
// healthy job then outlived 20 s in CI.
var jobTimeout = func() time.Duration {
	if raceEnabled {
		return 4 * runTimeout
	}
	return runTimeout
}()

// syncTimeout bounds the waits on Go channels that ranks use to order events
// between themselves; an engine bug must fail the test, not hang it.
const syncTimeout = 10 * time.Second

// run runs fn as n ranks with opts. It fails the test with a dump of every goroutine
// when Run does not return within runTimeout, and when goroutines started during the
// Run are still alive shortly after it returned.
func run(t *testing.T, n int, fn func(*mpi.Comm) error, opts ...mpi.Option) error {
	t.Helper()
	base := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() { done <- mpi.Run(n, fn, opts...) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(runTimeout):
		t.Fatalf("mpi.Run(%d ranks) did not return within %v; goroutines:\n%s", n, runTimeout, stacks())
	}
	checkNoLeak(t, base)
	return err
}

// mustRun is run, failing the test when Run returns an error.
func mustRun(t *testing.T, n int, fn func(*mpi.Comm) error, opts ...mpi.Option) {
	t.Helper()
	if err := run(t, n, fn, opts...); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// checkNoLeak waits up to 5 s for the number of goroutines to fall back to base.
func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("goroutine leak: %d goroutines after Run returned, %d before; goroutines:\n%s",
				runtime.NumGoroutine(), base, stacks())
		}
		time.Sleep(time.Millisecond)
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// gate is a one-shot signal between the goroutines of a test.
type gate chan struct{}

func newGate() gate { return make(gate) }

func (g gate) open() { close(g) }

// wait waits for g to open, or returns an error after syncTimeout.
func (g gate) wait() error { return g.waitFor(syncTimeout) }

// waitFor waits for g to open, or returns an error after d.
func (g gate) waitFor(d time.Duration) error {
	select {
	case <-g:
		return nil
	case <-time.After(d):
		return fmt.Errorf("timed out after %v waiting for another rank", d)
	}
}

// rankFuncs runs fns[c.Rank()] on each rank: one function per rank.
func rankFuncs(fns ...func(c *mpi.Comm) error) func(*mpi.Comm) error {
	return func(c *mpi.Comm) error { return fns[c.Rank()](c) }
}

// raw views a slice as its bytes, to compare values bit for bit (NaN, -0).
func raw[T any](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// pattern returns n bytes that differ with seed and position.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>8) + seed
	}
	return b
}

// wantStatus checks the source, tag and byte count of a receive's status.
func wantStatus(st mpi.Status, source, tag, n int) error {
	if st.Source != source || st.Tag != tag || mpi.GetCount[byte](st) != n || st.Cancelled {
		return fmt.Errorf("status {source %d, tag %d, %d bytes, cancelled %v}, want {source %d, tag %d, %d bytes, not cancelled}",
			st.Source, st.Tag, mpi.GetCount[byte](st), st.Cancelled, source, tag, n)
	}
	return nil
}

// wantClass checks that err is a *mpi.Error of class class.
func wantClass(err error, class mpi.Class) (*mpi.Error, error) {
	var e *mpi.Error
	if !errors.Is(err, class) || !errors.As(err, &e) {
		return nil, fmt.Errorf("error %v, want a *mpi.Error of class %q", err, class)
	}
	return e, nil
}

// configs are the engine configurations that send small messages through each path.
var configs = []struct {
	name string
	opts []mpi.Option
}{
	{"default", nil},
	{"eager0", []mpi.Option{mpi.WithEagerLimit(0)}},
	{"pool0", []mpi.Option{mpi.WithPoolCap(0)}},
	{"spin0", []mpi.Option{mpi.WithSpin(0)}},
}

// errOf drops the value of a call that returns a value and an error.
func errOf[T any](_ T, err error) error { return err }
