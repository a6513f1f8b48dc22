// Command weft is Weft's one command line tool: it starts jobs of many processes
// (weft run), runs the benchmark suites beside the C MPIs (weft bench) and
// describes this build (weft info).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/mpi"
)

const usage = `weft: MPI for Go, every rank a goroutine.

Usage:
  weft run -n N [options] PROGRAM [ARGS...]
                  start a job of N ranks as OS processes, here or on other hosts
                  (weft run --help for the options)
  weft bench SUITE... | all [options]
                  run benchmark suites beside MPICH and Open MPI and report the ratios
                  (weft bench list for the suites, weft bench --help for the options)
  weft info       print the version, build, thread levels, transports and every tunable
  weft version    print the version
  weft help       print this help

A Weft program needs no launcher: "go run ./examples/ring -np 8" runs 8 ranks as
goroutines of one process. Tunables are set by environment variables (see weft info)
or by options to mpi.Run.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runJob(args[1:], os.Stdin, stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case bench.WorkerCommand:
		// weft bench's own child: Weft's side of one run of a suite.
		bench.Work(suites, args[1:])
	case "info":
		info(stdout)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, mpi.LibraryVersion())
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "weft: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return 0
}

func info(w io.Writer) {
	major, minor := mpi.Version()
	fmt.Fprintf(w, "version:       %s\n", mpi.LibraryVersion())
	fmt.Fprintf(w, "MPI standard:  %d.%d (point-to-point and environment chapters)\n", major, minor)
	fmt.Fprintf(w, "build:         %s\n", build())
	fmt.Fprintf(w, "cpus:          %d (GOMAXPROCS %d)\n", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "thread levels: %s, %s, %s, %s (default %s; every level is provided)\n",
		mpi.ThreadSingle, mpi.ThreadFunneled, mpi.ThreadSerialized, mpi.ThreadMultiple, mpi.ThreadMultiple)
	fmt.Fprintf(w, "transports:    self (ranks of one process: one copy, sender buffer to receiver buffer)\n")
	fmt.Fprintf(w, "               shm (processes of one host: shared-memory rings over a Unix domain socket; WEFT_NET_SHM=false for the socket alone)\n")
	fmt.Fprintf(w, "               unix (processes of one host: Unix domain sockets; WEFT_NET_UNIX=false for tcp)\n")
	fmt.Fprintf(w, "               tcp (processes of other hosts)\n")
	fmt.Fprintf(w, "               (between processes: authenticated connections made on first use)\n")
	fmt.Fprintf(w, "\ntunables (environment variable, option, value in force, default):\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, t := range mpi.Tunables() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", t.Env, t.Name, t.Value, t.Default, t.Doc)
	}
	fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", "WEFT_NP", "-np N", envOr("WEFT_NP", "(NumCPU)"), "NumCPU", "ranks started by mpi.Main when -np is absent")
	fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", "WEFT_PER_PROC", "", envOr("WEFT_PER_PROC", "1"), "1", "ranks per process under mpiexec or srun (weft run: --per-proc)")
	tw.Flush()
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// build describes the toolchain and, when known, the commit this binary was built from.
func build() string {
	s := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" {
			s += ", commit " + kv.Value
		}
		if kv.Key == "vcs.modified" && kv.Value == "true" {
			s += " (modified)"
		}
	}
	return s
}

// settled reports a subcommand's command line that ends it before it runs: a
// request for help (its usage on stdout, status 0) or an error (with the
// synopsis on stderr, status 2). done is false when the command may go on.
func settled(name string, err error, usage, synopsis string, stdout, stderr io.Writer) (code int, done bool) {
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "weft %s: %v\nUsage: %s; weft %s --help for more.\n", name, err, synopsis, name)
		return 2, true
	}
	return 0, false
}
