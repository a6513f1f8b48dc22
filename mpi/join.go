package mpi

import (
	"fmt"
	"os"
	"runtime"

	"github.com/weft-mpi/weft/internal/boot"
	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/p2p"
	"github.com/weft-mpi/weft/internal/transport/shm"
	"github.com/weft-mpi/weft/internal/xcoll"
)

// runJoined runs this proc's ranks of a job that a launcher started: it listens for
// the other procs, publishes where, and connects to them on first use. It returns
// once this proc's ranks have returned and, if none failed, every proc's have.
func runJoined(bj *boot.Job, fn func(*Comm) error, opts []Option) error {
	fail := func(err error) error {
		return errs.New(errs.Intern, "Main", errs.None, "proc %d joining its job: %v", bj.Proc, err)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	cfg.crowd(shareCPUs(bj), runtime.NumCPU())
	wd, err := p2p.NewJobWorld(bj.Layout, bj.Proc, cfg.p2p)
	if err != nil {
		return fail(err)
	}
	ln, addrs, err := netd.Listen(cfg.netUnix)
	if err != nil {
		return fail(err)
	}
	if err := bj.Exchange(addrs); err != nil {
		ln.Close()
		return fail(err)
	}
	j := &job{world: wd, level: cfg.level, colls: coll.NewJob()}
	// A lost proc aborts the world (the p2p handler, told first) and must also
	// release the ranks waiting in this proc's shared-memory collectives.
	xn := xcoll.NewNet(bj.Proc, wd.Aborted(), func(int) { j.colls.Abort() })
	j.net = xn
	ring := 0
	if cfg.netShm {
		ring = shm.DefaultRing
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "weft: proc %d: %s\n", bj.Proc, fmt.Sprintf(format, args...))
	}
	dev, err := netd.New(netd.Config{
		Self: bj.Proc, Procs: bj.Layout.Procs(), Job: bj.ID, Key: bj.Key,
		Listener: ln, Addrs: bj.Addrs, P2P: wd, Coll: xn, Spin: cfg.netSpin, Shm: ring, Delay: cfg.netDelay,
		Congestion: cfg.netCongestion(), Log: logf,
	})
	if err != nil {
		ln.Close()
		return fail(err)
	}
	wd.Connect(dev)
	xn.Connect(dev)
	switch {
	case ring != 0 && !cfg.crowded:
		// Waiting ranks handle what the rings bring themselves.
		wd.PollNet(dev)
		xn.PollNet(dev, cfg.p2p.Spin)
	case ring != 0:
		// On a crowded host a rank that polls holds the CPU that the proc it
		// waits for needs, and the daemons, which yield it to the OS between
		// polls, do better (1x4 Barrier 30-33 µs against 17 through them): a
		// collective's Recv looks once before it parks.
		xn.PollNet(dev, 0)
	}
	if cfg.hostColl {
		xn.HostMode(func(proc int) int {
			h, _ := bj.Layout.HostOf(proc)
			return h
		}, cfg.crowded, logf)
	}
	dev.Start() // now that its handlers are ready for what the others send
	if cfg.p2p.ErrorsReturn {
		// Survivors must hear of a death even from a proc they never sent to.
		if err := dev.ConnectAll(netd.ChannelP2P); err != nil {
			dev.Close()
			return fail(err)
		}
	}
	first, n, _ := bj.Layout.ProcRanks(bj.Proc)
	if err := j.run(first, n, fn, &cfg); err != nil {
		return err // Main aborts the job through the launcher
	}
	// Every proc's ranks are done before any proc closes its connections: a peer
	// may still pull data from us until its receives have completed.
	if err := bj.Barrier(); err != nil {
		return fail(err)
	}
	if err := dev.Close(); err != nil {
		return fail(err)
	}
	return bj.Finalize()
}

// shareCPUs gives each proc of a host its share of the host's CPUs, as MPI
// launchers bind processes to cores: procs that each ran NumCPU threads would spin
// and poll against each other on the same cores. GOMAXPROCS in the environment wins.
// It returns how many procs the host runs.
func shareCPUs(bj *boot.Job) (procs int) {
	host, _ := bj.Layout.HostOf(bj.Proc)
	_, procs, _ = bj.Layout.HostProcs(host)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/max(1, procs)))
	}
	return procs
}
