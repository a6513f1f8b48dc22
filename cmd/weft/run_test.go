//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With cliEnv set, the test binary is the weft command itself, for tests that
// signal it as a user would.
const cliEnv = "WEFT_RUN_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// weftRun runs `weft run args...` in this process.
func weftRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runJob(args, nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	badHosts := filepath.Join(dir, "bad")
	if err := os.WriteFile(badHosts, []byte("node1\nnode2:zero\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"true"}, "-n N (the number of ranks) is required"},
		{[]string{"-n", "0", "true"}, "-n 0: want 1 to 2147483647 ranks"},
		{[]string{"-n", "9999999999", "true"}, "-n 9999999999: want 1 to"},
		{[]string{"-n", "x", "true"}, `invalid value "x" for flag -n`},
		{[]string{"-n", "2", "--per-proc", "0", "true"}, "--per-proc 0: want at least 1"},
		{[]string{"-n", "2", "--frobnicate", "true"}, "flag provided but not defined: -frobnicate"},
		{[]string{"-n", "2"}, "no program to run"},
		{[]string{"-n", "2", "--hosts", "a:x", "true"}, `--hosts: host "a:x": slots must be`},
		{[]string{"-n", "2", "--hosts", "a,", "true"}, `--hosts: host "": empty host name`},
		{[]string{"-n", "2", "--hosts", "a", "--hostfile", badHosts, "true"}, "not both"},
		{[]string{"-n", "2", "--hostfile", filepath.Join(dir, "missing"), "true"}, "--hostfile: open "},
		{[]string{"-n", "2", "--hostfile", badHosts, "true"}, "line 2: host \"node2:zero\""},
		{[]string{"-n", "2", "--rsh", " ", "true"}, "--rsh: empty rsh command"},
	} {
		code, stdout, stderr := weftRun(t, tc.args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "weft run: ") || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "Usage: weft run -n N") {
			t.Errorf("weft run %q: exit %d, stderr %q; want 2 and %q with the usage line", tc.args, code, stderr, tc.want)
		}
	}
	code, stdout, _ := weftRun(t, "--help")
	if code != 0 || !strings.Contains(stdout, "--rsh CMD") || !strings.Contains(stdout, "{host}") {
		t.Errorf("weft run --help: exit %d\n%s", code, stdout)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "weft run -n N") {
		t.Errorf("weft help does not list weft run:\n%s", out.String())
	}
}

func TestRunLocal(t *testing.T) {
	code, stdout, stderr := weftRun(t, "-n", "3", "--per-proc", "2", "--tag-output",
		"sh", "-c", `echo "$PMI_RANK/$PMI_SIZE $WEFT_LAYOUT $WEFT_HOST fd=$PMI_FD $1"`, "sh", "an argument")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"[ranks 0-1] 0/2 2+1 localhost fd=3 an argument\n", "[rank 2] 1/2 2+1 localhost fd=3 an argument\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no line %q in\n%s", want, stdout)
		}
	}
}

func TestRunHostfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte("# here only\nlocalhost slots=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := weftRun(t, "-n", "2", "--hostfile", file, "sh", "-c", "echo host=$WEFT_HOST $WEFT_LAYOUT")
	if code != 0 || strings.Count(stdout, "host=localhost [1;2;1]\n") != 2 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestRunFailure(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := weftRun(t, "-n", "3", "sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 5; exec sleep 30`)
	if code != 5 || stderr != "weft run: proc 1 on host localhost (rank 1) exited with status 5\n" {
		t.Fatalf("exit %d, stderr %q; want 5 and one line naming proc 1\n%s", code, stderr, stdout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the job took %v to end", d)
	}
}

// TestRunSignal: SIGTERM to weft run reaches every proc, which may handle it;
// their exit status becomes the job's.
func TestRunSignal(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "run", "-n", "2", "sh", "-c",
		`trap 'echo term $PMI_RANK; exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	// A race-enabled binary sleeps a second at exit unless told otherwise.
	cmd.Env = append(os.Environ(), cliEnv+"=1", strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	var seen []string
	for ready := 0; ready < 2 && lines.Scan(); {
		seen = append(seen, lines.Text())
		if lines.Text() == "ready" {
			ready++
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for lines.Scan() {
		seen = append(seen, lines.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("weft run: %v, want exit status 7\nstdout: %q\nstderr: %s", err, seen, &stderr)
	}
	got := strings.Join(seen, "\n")
	if !strings.Contains(got, "term 0") || !strings.Contains(got, "term 1") ||
		!strings.Contains(stderr.String(), "exited with status 7, after weft run forwarded signal terminated to the job") {
		t.Errorf("stdout: %q\nstderr: %s", seen, &stderr)
	}
}
