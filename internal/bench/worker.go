package bench

import (
	"fmt"
	"os"

	"github.com/weft-mpi/weft/mpi"
)

// Work is the body of a worker process, started by the runner as
// PROGRAM bench-worker SUITE ARGS...: it runs the named suite's Body in every
// rank under mpi.Main (WEFT_NP ranks here, or this proc's ranks of a job of
// weft run) and exits. args are the words after bench-worker.
func Work(suites []Suite, args []string) {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "%s: which suite? (%s SUITE ARGS...)\n", WorkerCommand, WorkerCommand)
		os.Exit(2)
	}
	for _, s := range suites {
		if s.Name == args[0] {
			rest := args[1:]
			mpi.Main(func(c *mpi.Comm) error { return s.Body(c, rest) })
		}
	}
	fmt.Fprintf(os.Stderr, "%s: unknown suite %q\n", WorkerCommand, args[0])
	os.Exit(2)
}
