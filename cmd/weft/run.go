package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-mpi/weft/internal/launch"
	"github.com/weft-mpi/weft/internal/topo"
)

const runUsage = `Usage: weft run -n N [options] PROGRAM [ARGS...]

Starts a job of N ranks, P of them to each OS process (proc), here or on other
hosts, and waits for it. weft run is the job's PMI-1 server: a Weft program joins
it as it joins a job of mpiexec or srun.

Options:
  -n N                  ranks in total (required)
  --per-proc P          ranks per proc (default 1); the last proc has the remainder
  --hosts LIST          where procs run: h1:slots,h2:slots (slots default to 1).
                        Procs fill the hosts' slots in order, then go around again.
  --hostfile FILE       the same from a file: one host per line, as "host",
                        "host:slots" or "host slots=N"; '#' starts a comment
  --rsh CMD             how to start a proc on another host (default "ssh")
  --launcher-addr ADDR  where procs on other hosts reach weft run, "host" or
                        "host:port" (default: the address this machine reaches the
                        host from; for a name that does not resolve, such as a
                        network namespace, this machine's first IPv4 address)
  --tag-output          begin each line of output with its proc's ranks:
                        "[rank 3] " or "[ranks 4-7] "
  --errors-return       when a proc dies, keep the others running: they get
                        ErrProcFailed from what involved it (WEFT_ERRORS=return)

Without --hosts or --hostfile every proc runs here, as do procs on "localhost" or
on this machine's own name. Procs elsewhere are started by CMD, which runs
SCRIPT: cd to this directory, export the job's environment, exec PROGRAM.
  CMD with {host}, e.g. "ip netns exec {host}": {host} is replaced by the host
    name and "sh" "-c" SCRIPT follow as three arguments (for wrappers that
    execute their arguments as they are).
  CMD without {host}, e.g. "ssh -p 2222": the host follows, then one argument
    "sh -c 'SCRIPT'", quoted for the remote login shell (ssh joins its arguments
    into one command line).

Each proc gets PMI_RANK (its index), PMI_SIZE (the number of procs), WEFT_LAYOUT,
WEFT_JOB, WEFT_KEY, WEFT_HOST, and PMI_FD (procs here) or PMI_PORT and PMI_ID
(procs elsewhere). Procs here inherit weft run's environment; procs elsewhere
get only its WEFT_* variables. Proc 0 reads weft run's standard input.

SIGINT and SIGTERM are passed on to every proc; a second signal, or procs still
there 3 s later, get SIGKILL. When a proc fails (exits non-zero, is killed, aborts,
or exits 0 without PMI finalize after init) the whole job is stopped the same way
and weft run says which proc failed, where, and how (with --errors-return a proc
that dies or exits non-zero is reported and the others go on; an abort still
ends the job). Exit status: 0 if every proc
succeeded, else the first failure's (an abort's code, 128+N for signal N, 127 for
a proc that could not be started); 1 if weft run itself failed; 2 for bad usage.
See docs/launch.md.
`

// runJob is `weft run`.
func runJob(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseRun(args)
	if code, done := settled("run", err, runUsage, "weft run -n N [options] PROGRAM [ARGS...]", stdout, stderr); done {
		return code
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cfg.Signals = sigs
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdin, stdout, stderr
	err = launch.Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weft run: %v\n", err)
	}
	return launch.ExitCode(err)
}

// parseRun reads the command line of weft run into a job's description.
func parseRun(args []string) (launch.Config, error) {
	var cfg launch.Config
	fs := flag.NewFlagSet("weft run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by runJob
	fs.IntVar(&cfg.Ranks, "n", 0, "")
	fs.IntVar(&cfg.PerProc, "per-proc", 1, "")
	hosts := fs.String("hosts", "", "")
	hostfile := fs.String("hostfile", "", "")
	fs.StringVar(&cfg.Rsh, "rsh", "ssh", "")
	fs.StringVar(&cfg.LauncherAddr, "launcher-addr", "", "")
	fs.BoolVar(&cfg.TagOutput, "tag-output", false, "")
	fs.BoolVar(&cfg.ErrorsReturn, "errors-return", false, "")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case !set["n"]:
		return cfg, errors.New("-n N (the number of ranks) is required")
	case cfg.Ranks < 1 || cfg.Ranks > topo.MaxRanks:
		return cfg, fmt.Errorf("-n %d: want 1 to %d ranks", cfg.Ranks, topo.MaxRanks)
	case cfg.PerProc < 1:
		return cfg, fmt.Errorf("--per-proc %d: want at least 1 rank per proc", cfg.PerProc)
	case set["hosts"] && set["hostfile"]:
		return cfg, errors.New("give --hosts or --hostfile, not both")
	case fs.NArg() == 0:
		return cfg, errors.New("no program to run")
	}
	var err error
	if set["hosts"] {
		if cfg.Hosts, err = launch.ParseHosts(*hosts); err != nil {
			return cfg, fmt.Errorf("--hosts: %w", err)
		}
	}
	if set["hostfile"] {
		f, err := os.Open(*hostfile)
		if err != nil {
			return cfg, fmt.Errorf("--hostfile: %w", err)
		}
		defer f.Close()
		if cfg.Hosts, err = launch.ParseHostfile(f); err != nil {
			return cfg, fmt.Errorf("--hostfile %s: %w", *hostfile, err)
		}
	}
	if _, err := launch.RshArgv(cfg.Rsh, "host", "true"); err != nil {
		return cfg, fmt.Errorf("--rsh: %w", err)
	}
	cfg.Program, cfg.Args = fs.Arg(0), fs.Args()[1:]
	return cfg, nil
}
