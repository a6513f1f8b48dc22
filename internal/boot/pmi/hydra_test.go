package pmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real thing: the test binary runs itself under MPICH's Hydra. When
// helperEnv is set, TestMain runs hydraHelper instead of the tests.
const helperEnv = "WEFT_PMI_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "1":
		os.Exit(hydraHelper())
	case "abort":
		os.Exit(abortHelper())
	}
	os.Exit(m.Run())
}

// helperValue is what rank publishes: spaces, '=' and a 3000-byte tail of
// every byte value, long enough to need several pieces at Hydra's 1024.
func helperValue(rank int) string {
	tail := make([]byte, 3000)
	for i := range tail {
		tail[i] = byte(i + rank)
	}
	return fmt.Sprintf("tcp 127.0.0.1:%d key=value rank=%d ", 40000+rank, rank) + string(tail)
}

// hydraHelper is one process of the job. It prints one line starting
// "pmi-helper ok" on success, and what the launcher told it.
func hydraHelper() int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "pmi-helper: "+format+"\n", a...)
		return 1
	}
	mode := "fd"
	if os.Getenv("PMI_FD") == "" {
		mode = "port(" + os.Getenv("PMI_PORT") + ")"
	}
	c, err := FromEnv()
	if err != nil {
		return fail("FromEnv: %v", err)
	}
	if err := c.Init(); err != nil {
		return fail("Init: %v", err)
	}
	rank, size := c.Rank(), c.Size()
	if err := c.Put(fmt.Sprintf("addr-%d", rank), helperValue(rank)); err != nil {
		return fail("rank %d Put: %v", rank, err)
	}
	if err := c.Barrier(); err != nil {
		return fail("rank %d Barrier: %v", rank, err)
	}
	for peer := range size {
		got, err := c.Get(fmt.Sprintf("addr-%d", peer))
		if err != nil {
			return fail("rank %d Get addr-%d: %v", rank, peer, err)
		}
		if got != helperValue(peer) {
			return fail("rank %d Get addr-%d: %d bytes, wrong content (want %d)", rank, peer, len(got), len(helperValue(peer)))
		}
	}
	var pe *Error
	if _, err := c.Get("nobody-put-this"); !errors.As(err, &pe) {
		return fail("rank %d Get of a missing key: %v, want *Error", rank, err)
	}
	raw, err := c.GetRaw("PMI_process_mapping")
	if err != nil {
		return fail("rank %d GetRaw(PMI_process_mapping): %v", rank, err)
	}
	blocks, err := c.ProcessMapping()
	if err != nil {
		return fail("rank %d ProcessMapping: %v", rank, err)
	}
	nodes, err := ExpandMapping(blocks, size)
	if err != nil {
		return fail("rank %d ExpandMapping: %v", rank, err)
	}
	for r, n := range nodes {
		if n != 0 {
			return fail("rank %d: mapping %s puts rank %d on node %d, want all on node 0", rank, raw, r, n)
		}
	}
	kvsMax, keyMax, valMax := c.Limits()
	// Print before Finalize: Hydra may reap the process soon after it.
	fmt.Printf("pmi-helper ok rank=%d size=%d mode=%s maxes=%d/%d/%d mapping=%s nodes=%v kvs=%s\n",
		rank, size, mode, kvsMax, keyMax, valMax, raw, nodes, c.KVSName())
	if err := c.Finalize(); err != nil {
		return fail("rank %d Finalize: %v", rank, err)
	}
	return 0
}

// abortHelper: rank 1 aborts while the others wait in a barrier it will
// never join; Hydra must end the job with the abort's exit code.
func abortHelper() int {
	c, err := FromEnv()
	if err == nil {
		err = c.Init()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pmi-helper:", err)
		return 1
	}
	if c.Rank() == 1 {
		if err := c.Abort(7, "rank 1 gives up"); err != nil {
			fmt.Fprintln(os.Stderr, "pmi-helper: Abort:", err)
		}
		// Stay alive and exit 0: the status 7 must come from the abort.
		time.Sleep(30 * time.Second)
		return 0
	}
	err = c.Barrier()
	fmt.Fprintf(os.Stderr, "pmi-helper: rank %d left the barrier: %v\n", c.Rank(), err)
	return 1
}

// runHydra runs the test binary as a 3-process job under mpiexec.mpich
// with helperEnv=mode, killing the whole job after 60 s.
func runHydra(t *testing.T, mode string, extra ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	mpiexec, lerr := exec.LookPath("mpiexec.mpich")
	if lerr != nil {
		t.Skip("mpiexec.mpich (MPICH's Hydra) is not on PATH; install Debian's mpich to run this test")
	}
	self, xerr := os.Executable()
	if xerr != nil {
		self = os.Args[0]
	}
	args := append([]string{"-launcher", "fork"}, extra...)
	args = append(args, "-n", "3", self, "-test.run=^$")
	return runLauncher(t, mode, func(cmd *exec.Cmd) {
		// Hydra and its children in their own process group, so a timeout
		// kills the whole job, not just mpiexec.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	}, mpiexec, args...)
}

// runLauncher runs launcher with args and helperEnv=mode within 60 s; stop sets
// how a timeout ends the launcher's whole job. It fails the test on a timeout.
func runLauncher(t *testing.T, mode string, stop func(*exec.Cmd), launcher string, args ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	stop(cmd)
	cmd.WaitDelay = 5 * time.Second
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s did not finish within 60s\nstdout:\n%s\nstderr:\n%s", launcher, strings.Join(args, " "), stdout, stderr)
	}
	return stdout, stderr, err
}

func TestHydraAbort(t *testing.T) {
	start := time.Now()
	stdout, stderr, err := runHydra(t, "abort")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the job took %v to end after the abort", d)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("mpiexec: %v, want exit status 7\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

func TestHydra(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"PMI_FD", nil},
		{"PMI_PORT", []string{"-pmi-port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runHydra(t, "1", tc.extra...)
			if err != nil {
				t.Fatalf("mpiexec: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			seen := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if strings.HasPrefix(l, "pmi-helper ok ") {
					t.Log(l)
					f := strings.Fields(l)
					seen[f[2]] = true
				}
			}
			for _, r := range []string{"rank=0", "rank=1", "rank=2"} {
				if !seen[r] {
					t.Errorf("no success line from %s\nstdout:\n%s\nstderr:\n%s", r, stdout, stderr)
				}
			}
		})
	}
}
