package pmi

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real thing, second launcher: the test binary runs itself under Slurm's
// srun --mpi=pmi2, whose plugin answers the PMI-1 text protocol too. TestMain
// (hydra_test.go) turns each task into hydraHelper. .ci/slurm-up.sh starts a
// single-host Slurm.

// slurmReady returns srun's path, or skips unless sinfo shows an idle node
// within a few seconds.
func slurmReady(t *testing.T) string {
	t.Helper()
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Skip("srun is not on PATH; run .ci/slurm-up.sh as root for a single-host Slurm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sinfo", "--noheader", "--states=idle,mixed", "--format=%n %T")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Skipf("srun is on PATH but sinfo shows no idle node within 5s (err %v, output %q); start Slurm with .ci/slurm-up.sh",
			err, strings.TrimSpace(string(out)))
	}
	return srun
}

// runSrun runs `srun --mpi=pmi2 -n N args...` with helperEnv=mode, killing
// the step after 60 s.
func runSrun(t *testing.T, srun, mode string, n string, args ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	// --overcommit: the recipe's node has CPUs=2 and 3 tasks would otherwise
	// wait for resources forever. --kill-on-bad-exit: a failed rank ends the
	// step at once instead of leaving the others in a barrier. --time=2: Slurm
	// itself ends the job should srun be killed.
	full := append([]string{"--mpi=pmi2", "--export=ALL", "--overcommit", "--kill-on-bad-exit=1", "--time=2",
		"--job-name=weft-pmi-test", "-n", n}, args...)
	return runLauncher(t, mode, func(cmd *exec.Cmd) {
		// SIGTERM makes srun cancel the step on every node; SIGKILL after 5 s.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	}, srun, full...)
}

func TestSlurm(t *testing.T) {
	srun := slurmReady(t)
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}

	// What the pmi2 plugin puts in a task's environment, for the log.
	if stdout, stderr, err := runSrun(t, srun, "", "1", "env"); err != nil {
		t.Fatalf("srun env: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	} else {
		var env []string
		for _, l := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(l, "PMI_") {
				env = append(env, l)
			}
		}
		t.Logf("srun --mpi=pmi2 task environment: %s", strings.Join(env, " "))
	}

	stdout, stderr, err := runSrun(t, srun, "1", "3", self, "-test.run=^$")
	if err != nil {
		t.Fatalf("srun: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !strings.HasPrefix(l, "pmi-helper ok ") {
			continue
		}
		t.Log(l)
		f := strings.Fields(l)
		// pmi-helper ok rank=R size=S mode=M maxes=K/K/V mapping=... nodes=[0 0 0] kvs=...
		if len(f) < 5 || f[3] != "size=3" || !strings.Contains(l, " mapping=(vector,") || !strings.Contains(l, " nodes=[0 0 0] ") {
			t.Errorf("unexpected success line %q", l)
		}
		seen[f[2]] = true
	}
	for _, r := range []string{"rank=0", "rank=1", "rank=2"} {
		if !seen[r] {
			t.Errorf("no success line from %s\nstdout:\n%s\nstderr:\n%s", r, stdout, stderr)
		}
	}
}
