// Package launch is `weft run`: it starts the procs of a job, locally or on other
// hosts through an rsh command, and is the PMI-1 server they join through. Weft
// procs already join jobs of MPICH's mpiexec and of Slurm with the PMI-1 client
// (internal/boot/pmi); speaking the same protocol here means a proc has one way
// to join whichever launcher started it.
//
// A job is N ranks, P to an OS process (a proc), on hosts that take procs as
// Hydra gives them out. Run starts every proc with its place in the
// environment (PMI_RANK, PMI_SIZE, WEFT_LAYOUT, WEFT_JOB, WEFT_KEY, WEFT_HOST,
// and either PMI_FD or PMI_PORT with PMI_ID), answers their PMI commands,
// forwards their output line by line, and ends the whole job, with one message
// saying which proc failed and how, as soon as any proc fails. docs/launch.md
// is the user's guide.
package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Config describes one job.
type Config struct {
	Ranks   int    // N, the ranks of the job
	PerProc int    // P, ranks per proc; 0 means 1. The last proc has the remainder.
	Hosts   []Host // where procs run; none means every proc runs here

	// Rsh starts a proc on another host; "" means "ssh". See RshArgv.
	Rsh string
	// LauncherAddr is the address remote procs reach the PMI server at, "host"
	// or "host:port" (a fixed port to listen on); "" means the rule of
	// launcherAddr.
	LauncherAddr string
	// TagOutput prefixes every line of output with the ranks of its proc.
	TagOutput bool
	// ErrorsReturn keeps the job going when a proc dies: the survivors, told
	// WEFT_ERRORS=return, fail only what involves it, and PMI barriers complete
	// without it. The job's exit status is still the first failure's. An Abort
	// from a proc ends the job as always.
	ErrorsReturn bool

	Program string
	Args    []string
	// Env is the environment local procs inherit and the rsh command runs
	// with; nil means os.Environ().
	Env []string

	// Stdin is proc 0's standard input (every other proc reads /dev/null);
	// nil means /dev/null. Unless it is a regular file, a pipe or a socket, it
	// is copied into a pipe by a goroutine that ends when Stdin returns EOF or
	// an error, or at its first write after proc 0 has exited.
	Stdin io.Reader
	// Stdout and Stderr receive the procs' output, whole lines at a time, and
	// Stderr the launcher's own notes; nil discards.
	Stdout, Stderr io.Writer

	// Signals, when not nil, carries signals to forward to every proc (SIGINT
	// and SIGTERM, say); a second one kills the job with SIGKILL.
	Signals <-chan os.Signal
	// Grace is how long procs have between SIGTERM (or a forwarded signal) and
	// SIGKILL; 0 means DefaultGrace.
	Grace time.Duration
}

// Host is a machine and the number of procs it takes per round of placement.
type Host struct {
	Name  string
	Slots int
}

// DefaultGrace is how long a proc told to stop has before it is killed: long
// enough to flush its output and close its files, short enough that a failed
// job is gone before its user wonders.
const DefaultGrace = 3 * time.Second

// Failure is how a job failed: which proc, where, and what happened. Run
// returns one when the job did not end with every proc exiting 0.
type Failure struct {
	Proc  int    // proc index (its PMI rank)
	Host  string // as given in Config.Hosts, or "localhost"
	Ranks string // "rank 3" or "ranks 4-7"
	What  string // what happened, e.g. "exited with status 3"
	Code  int    // the exit status weft run returns for the job
}

func (f *Failure) Error() string {
	return fmt.Sprintf("proc %d on host %s (%s) %s", f.Proc, f.Host, f.Ranks, f.What)
}

// ExitCode is the exit status for what Run returned: 0 for nil, the failure's
// code for a *Failure, 1 for anything else (the launcher itself failed).
func ExitCode(err error) int {
	var f *Failure
	switch {
	case err == nil:
		return 0
	case errors.As(err, &f):
		return f.Code
	}
	return 1
}

// Run starts the job and waits until every proc has exited. It returns nil
// when every proc exited 0 (after PMI finalize, if it had joined with init), a
// *Failure for the first proc that did not, and another error when the job
// could not be set up. Whatever it returns, no proc of the job is left running
// (remote commands through ssh excepted; see docs/launch.md).
func Run(cfg Config) error {
	j, err := newJob(cfg)
	if err != nil {
		return err
	}
	return j.run()
}
