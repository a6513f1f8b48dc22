package mpi

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weft-mpi/weft/internal/boot"
	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/p2p"
	"github.com/weft-mpi/weft/internal/xcoll"
)

// job is what the ranks of one Run share.
type job struct {
	world   *p2p.World
	level   ThreadLevel
	nextCtx atomic.Uint32 // context ids of new communicators
	colls   *coll.Job     // the collectives' state shared by the job's communicators; aborted with the job
	net     *xcoll.Net    // the collective channel to the other procs; nil for a job of one proc
}

// Run runs fn as n ranks, each a goroutine with its own world communicator, and
// returns when all have returned. The ranks' errors are joined, each naming its rank.
// A rank that panics or returns an error ends the job as mpiexec would: every
// operation still waiting, in any rank, returns an error naming the failed rank
// (ErrProcFailed) instead of hanging.
func Run(n int, fn func(*Comm) error, opts ...Option) error {
	if n < 1 {
		return errs.New(errs.Arg, "Run", errs.None, "%d ranks requested; want at least 1", n)
	}
	if fn == nil {
		return errs.New(errs.Arg, "Run", errs.None, "the rank function is nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	j := &job{world: p2p.NewWorld(n, cfg.p2p), level: cfg.level, colls: coll.NewJob()}
	return j.run(0, n, fn, &cfg)
}

// run runs the world ranks first..first+n-1, this proc's, and returns their joined
// errors once all have returned.
func (j *job) run(first, n int, fn func(*Comm) error, cfg *config) error {
	size := len(j.world.Endpoints)
	world := &commCore{Comm: p2p.Comm{Peers: j.world.Endpoints, World: j.world}, job: j, world: true, spans: n < size}
	if !world.spans { // else its collectives are made on first use (commCore.across)
		world.coll = coll.New(j.colls, size, cfg.p2p.Spin)
	}
	results := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go j.runRank(world, first+i, fn, &results[i], &wg)
	}
	wg.Wait()
	err := joinRanks(first, results)
	if cause := j.world.Cause(); cause != nil && cause.Class == errs.Aborted && !errors.Is(err, errs.Aborted) {
		err = errors.Join(cause, err) // Abort ends the job even if every rank then returns nil
	}
	return err
}

func (j *job) runRank(world *commCore, rank int, fn func(*Comm) error, out *error, wg *sync.WaitGroup) {
	defer wg.Done()
	returned := false
	defer func() {
		p := recover()
		switch {
		case p != nil:
			*out = &Error{Class: errs.Panic, Op: "rank function", Rank: rank, Peer: NoValue, Tag: NoValue,
				Detail: fmt.Sprintf("%v\n%s", p, debug.Stack())}
			j.fail(rank, fmt.Sprintf("rank %d panicked: %v", rank, p))
		case !returned: // runtime.Goexit, as t.FailNow calls it
			*out = &Error{Class: errs.Panic, Op: "rank function", Rank: rank, Peer: NoValue, Tag: NoValue,
				Detail: "the rank's goroutine exited through runtime.Goexit (t.FailNow or log.Fatal-like code?)"}
			j.fail(rank, fmt.Sprintf("rank %d exited through runtime.Goexit", rank))
		}
	}()
	err := fn(&Comm{core: world, rank: rank})
	returned = true
	if err != nil {
		*out = err
		j.fail(rank, fmt.Sprintf("rank %d returned an error: %v", rank, err))
	}
}

// fail ends the job because a rank failed; waiting ranks get ErrProcFailed.
func (j *job) fail(rank int, why string) {
	j.world.Abort(&Error{Class: errs.ProcFailed, Rank: NoValue, Peer: NoValue, Tag: NoValue, Detail: why})
	j.colls.Abort()
}

// joinRanks joins the errors of ranks first, first+1, ... in rank order, prefixing those that do not
// already name their rank.
func joinRanks(first int, results []error) error {
	var all []error
	for i, err := range results {
		if err == nil {
			continue
		}
		rank := first + i
		var e *Error
		if !errors.As(err, &e) || e.Rank != rank {
			err = fmt.Errorf("rank %d: %w", rank, err)
		}
		all = append(all, err)
	}
	return errors.Join(all...)
}

// Main runs fn as the ranks of a program and exits: with status 0 when every rank
// returns nil, else with the errors on stderr and status 1 (or the code given to Abort).
// The number of ranks is the -np N flag (removed from os.Args so that the program's
// own flag parsing never sees it), else WEFT_NP, else runtime.NumCPU().
func Main(fn func(*Comm) error, opts ...Option) {
	np, err := takeNP()
	var bj *boot.Job
	if err == nil {
		bj, err = boot.Join()
	}
	switch {
	case err != nil:
	case bj != nil:
		err = runJoined(bj, fn, opts)
	default:
		err = Run(np, fn, opts...)
	}
	// A proc of a launched job reports its error before it asks the launcher to
	// end the job: the launcher may kill it at once.
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, err)
	code := exitCode(err)
	if bj != nil {
		_ = bj.Abort(code, err.Error())
	}
	os.Exit(code)
}

// exitCode is the exit status of a proc whose ranks failed with err: the code given
// to Abort, else 1.
func exitCode(err error) int {
	var e *Error
	if errors.As(err, &e) && e.Class == errs.Aborted && e.Code != 0 {
		return e.Code
	}
	return 1
}

// takeNP finds and removes -np N (or -np=N, --np) in os.Args.
func takeNP() (int, error) {
	args := os.Args
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "np" {
			continue
		}
		drop := 1
		if !hasVal {
			if i+1 >= len(args) {
				return 0, errs.New(errs.Arg, "Main", errs.None, "flag -np needs a value")
			}
			val, drop = args[i+1], 2
		}
		os.Args = append(args[:i:i], args[i+drop:]...)
		return parseNP("-np", val)
	}
	if v, ok := os.LookupEnv("WEFT_NP"); ok {
		return parseNP("WEFT_NP", v)
	}
	return runtime.NumCPU(), nil
}

func parseNP(from, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errs.New(errs.Arg, "Main", errs.None, "%s %q: want a positive number of ranks", from, v)
	}
	return n, nil
}
