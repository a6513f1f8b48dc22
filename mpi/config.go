package mpi

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
	"github.com/weft-mpi/weft/internal/netd"
	"github.com/weft-mpi/weft/internal/p2p"
)

// ThreadLevel is MPI's level of thread support.
type ThreadLevel int

// The thread levels, in increasing order.
const (
	ThreadSingle     ThreadLevel = iota // one goroutine per rank calls Weft
	ThreadFunneled                      // only the rank's own goroutine calls Weft
	ThreadSerialized                    // any goroutine, one at a time
	ThreadMultiple                      // any goroutines, concurrently (the default)
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "single"
	case ThreadFunneled:
		return "funneled"
	case ThreadSerialized:
		return "serialized"
	case ThreadMultiple:
		return "multiple"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}

// An Option adjusts a job started by Run or Main. Options win over environment variables.
type Option func(*config)

type config struct {
	level   ThreadLevel
	p2p     p2p.Config
	netSpin time.Duration // how long a network receive daemon polls before blocking
	// netSpinSet: netSpin was chosen (option or environment), so a crowded host
	// does not lower it.
	netSpinSet bool
	crowded    bool          // this host runs more procs than it has CPUs
	netDelay   time.Duration // emulated one-way delay of every message to another proc
	netUnix    bool          // procs of one host connect through Unix domain sockets
	netShm     bool          // ... and move their bytes through shared memory
	hostColl   bool          // communicators within one host meet in a shared segment
	netCC      string        // TCP congestion control: "auto", "system" or a name
}

// WithThreadLevel requests a thread level. Weft provides every level, so the
// provided level (Comm.ThreadLevel) is the requested one. The engine is the same at
// every level: Multiple costs nothing extra.
func WithThreadLevel(l ThreadLevel) Option { return func(c *config) { c.level = l } }

// WithEagerLimit sets the largest standard send, in bytes, that is copied into the
// pool when its receive is not posted yet, so that the sender returns at once.
func WithEagerLimit(bytes int) Option { return func(c *config) { c.p2p.EagerLimit = bytes } }

// WithNetEagerLimit sets the largest message, in bytes, sent to a rank of another
// proc at once; a larger one waits until its receive is posted and then goes
// straight into the receive buffer (three-phase).
func WithNetEagerLimit(bytes int) Option { return func(c *config) { c.p2p.NetEagerLimit = bytes } }

// WithPoolCap bounds the bytes that eager copies may hold in one process (each counts
// its payload and the 256 bytes that hold it); past it a standard send waits for its
// receiver instead.
func WithPoolCap(bytes int64) Option { return func(c *config) { c.p2p.PoolCap = bytes } }

// WithSpin sets how long a waiting rank polls before it parks its goroutine
// (0: park at once).
func WithSpin(d time.Duration) Option { return func(c *config) { c.p2p.Spin = d } }

// WithNetSpin sets how long a receive daemon of the network device polls its
// socket before it blocks in the kernel (0: block at once). A poll that catches the
// next message saves a kernel wake-up (about 28 µs across vCPUs on a small VM).
//
// By default it is DefaultNetSpin, or CrowdedNetSpin on a host that runs more
// procs of the job than it has CPUs: there a polling proc holds a CPU that the
// proc it waits for needs (4 procs on 2 cores: 4x slower collectives at 200 µs).
func WithNetSpin(d time.Duration) Option {
	return func(c *config) { c.netSpin, c.netSpinSet = d, true }
}

// WithNetDelay holds every message to another proc for d before it is sent: an
// emulated one-way wire delay (a slow network's latency where the kernel has no
// netem), in order per link. 0, the default, costs nothing.
func WithNetDelay(d time.Duration) Option { return func(c *config) { c.netDelay = d } }

// WithNetUnix chooses how the procs of one host reach each other: through a Unix
// domain socket (true, the default: 8-byte latency and bandwidth about 1.5x those
// of loopback TCP here) or over TCP on loopback, as procs of different hosts do.
func WithNetUnix(on bool) Option { return func(c *config) { c.netUnix = on } }

// WithNetCongestion chooses the TCP congestion control of the links between
// procs over TCP: "auto" (the default) keeps the system's unless it paces its
// sends, as BBR does, and then takes cubic, or reno where cubic is not allowed
// (a job's bursts are what a pacer spreads out: 1 MiB ping-pong over loopback
// 115-117 µs one way under Reno against 168-187 under BBR); "system" keeps the
// system's; any other name is asked of the kernel, and a link whose kernel
// refuses it keeps the system's (logged once per proc). Linux only.
func WithNetCongestion(name string) Option { return func(c *config) { c.netCC = name } }

// WithNetShm chooses whether the procs of one host that connect through a Unix
// domain socket move their bytes through shared-memory rings (true, the
// default: a copy in and a copy out, no system call while the reader polls; the
// socket stays as doorbell and liveness check) or through the socket itself.
// Linux only; procs of a job may differ in it.
func WithNetShm(on bool) Option { return func(c *config) { c.netShm = on } }

// WithHostColl chooses whether the leaders of a communicator whose procs all
// run on one host meet in a segment of memory they share (true, the default:
// their collectives then cost stores and loads instead of messages) or on the collective channel, as across hosts. Linux only; every
// proc of a job must choose the same.
func WithHostColl(on bool) Option { return func(c *config) { c.hostColl = on } }

// WithErrorsReturn keeps a job that spans procs running when one of its procs
// dies or its link breaks, as MPI's MPI_ERRORS_RETURN: the operations that involve
// the lost proc's ranks fail with ErrProcFailed and the survivors go on (see
// docs/launch.md, "When a proc dies"). By default such a loss ends the job. Start
// the job with `weft run --errors-return`, which sets WEFT_ERRORS=return and keeps
// the launcher from tearing the job down.
func WithErrorsReturn() Option { return func(c *config) { c.p2p.ErrorsReturn = true } }

// crowd lowers the network poll budget to CrowdedNetSpin, unless it was chosen,
// on a host whose procs outnumber its cpus.
func (c *config) crowd(procs, cpus int) {
	c.crowded = procs > cpus
	if c.crowded && !c.netSpinSet {
		c.netSpin = CrowdedNetSpin
	}
}

// Tunable describes one setting of Weft, for `weft info`.
type Tunable struct {
	Name    string // the Option that sets it
	Env     string // the environment variable that sets it
	Value   string // the value in force in this process (environment or default)
	Default string
	Doc     string
}

type tunable struct {
	Tunable
	apply func(c *config, v string) error
}

// Defaults of the tunables; docs/architecture.md explains how they were chosen.
const (
	DefaultEagerLimit    = 16 << 10
	DefaultNetEagerLimit = 64 << 10
	DefaultPoolCap       = 64 << 20
	DefaultSpin          = 20 * time.Microsecond
	DefaultNetSpin       = 200 * time.Microsecond
	CrowdedNetSpin       = 20 * time.Microsecond
)

var tunables = []tunable{
	{Tunable{Name: "WithEagerLimit", Env: "WEFT_EAGER_LIMIT", Default: strconv.Itoa(DefaultEagerLimit),
		Doc: "bytes: largest standard send copied into the pool so the sender returns before its receive is posted"},
		func(c *config, v string) (err error) {
			c.p2p.EagerLimit, err = bytesSetting[int](v)
			return err
		}},
	{Tunable{Name: "WithNetEagerLimit", Env: "WEFT_NET_EAGER_LIMIT", Default: strconv.Itoa(DefaultNetEagerLimit),
		Doc: "bytes: largest message sent to another proc at once (eager); larger ones wait for the receive (three-phase)"},
		func(c *config, v string) (err error) {
			c.p2p.NetEagerLimit, err = bytesSetting[int](v)
			return err
		}},
	{Tunable{Name: "WithPoolCap", Env: "WEFT_POOL_CAP", Default: strconv.Itoa(DefaultPoolCap),
		Doc: "bytes: cap on what eager copies (sent and received) hold in one process; past it a send waits for its receiver"},
		func(c *config, v string) (err error) {
			c.p2p.PoolCap, err = bytesSetting[int64](v)
			return err
		}},
	{Tunable{Name: "WithSpin", Env: "WEFT_SPIN", Default: DefaultSpin.String(),
		Doc: "duration: how long a waiting rank polls before parking its goroutine (0 parks at once)"},
		func(c *config, v string) (err error) {
			c.p2p.Spin, err = durationSetting(v)
			return err
		}},
	{Tunable{Name: "WithNetSpin", Env: "WEFT_NET_SPIN", Default: DefaultNetSpin.String(),
		Doc: "duration: how long a network receive daemon polls its socket before it blocks (0 blocks at once; " +
			CrowdedNetSpin.String() + " by default where a host runs more procs than it has CPUs)"},
		func(c *config, v string) (err error) {
			c.netSpin, err = durationSetting(v)
			c.netSpinSet = true
			return err
		}},
	{Tunable{Name: "WithNetDelay", Env: "WEFT_NET_DELAY", Default: time.Duration(0).String(),
		Doc: "duration: emulated one-way network delay added to every message to another proc (0: none)"},
		func(c *config, v string) (err error) {
			c.netDelay, err = durationSetting(v)
			return err
		}},
	{Tunable{Name: "WithNetUnix", Env: "WEFT_NET_UNIX", Default: "true",
		Doc: "true or false: whether procs of one host connect through Unix domain sockets (false: TCP over loopback, as between hosts)"},
		func(c *config, v string) (err error) {
			c.netUnix, err = strconv.ParseBool(v)
			return err
		}},
	{Tunable{Name: "WithNetCongestion", Env: "WEFT_NET_CONGESTION", Default: netd.CongestionAuto,
		Doc: "auto, system or an algorithm's name: the TCP congestion control of links between procs (auto: the system's, unless it paces its sends as BBR does, then cubic or reno)"},
		func(c *config, v string) error {
			c.netCC = v
			return nil
		}},
	{Tunable{Name: "WithNetShm", Env: "WEFT_NET_SHM", Default: "true",
		Doc: "true or false: whether procs of one host that use Unix domain sockets move their bytes through shared-memory rings (false: through the sockets)"},
		func(c *config, v string) (err error) {
			c.netShm, err = strconv.ParseBool(v)
			return err
		}},
	{Tunable{Name: "WithHostColl", Env: "WEFT_HOST_COLL", Default: "true",
		Doc: "true or false: whether the procs of a communicator within one host run their collectives in a shared segment (false: on the collective channel, as between hosts)"},
		func(c *config, v string) (err error) {
			c.hostColl, err = strconv.ParseBool(v)
			return err
		}},
	{Tunable{Name: "WithErrorsReturn", Env: "WEFT_ERRORS", Default: "fatal",
		Doc: "fatal or return: whether a lost proc ends the job, or only fails what involves it (ErrProcFailed)"},
		func(c *config, v string) error {
			switch v {
			case "fatal":
				c.p2p.ErrorsReturn = false
			case "return":
				c.p2p.ErrorsReturn = true
			default:
				return fmt.Errorf("want fatal or return")
			}
			return nil
		}},
	{Tunable{Name: "WithThreadLevel", Env: "WEFT_THREAD_LEVEL", Default: "multiple",
		Doc: "single, funneled, serialized or multiple: the thread level requested"},
		func(c *config, v string) error {
			for l := ThreadSingle; l <= ThreadMultiple; l++ {
				if l.String() == v {
					c.level = l
					return nil
				}
			}
			return fmt.Errorf("want single, funneled, serialized or multiple")
		}},
}

// netCCSystem is the WithNetCongestion that keeps the system's algorithm (the
// other that is not one is netd.CongestionAuto).
const netCCSystem = "system"

// validCC reports whether name may be a WithNetCongestion: the kernel's names
// are at most 15 bytes (TCP_CA_NAME_MAX).
func validCC(name string) bool {
	if name == "" || len(name) > 15 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// netCongestion is the netd.Config.Congestion of a WithNetCongestion.
func (c *config) netCongestion() string {
	if c.netCC == netCCSystem {
		return ""
	}
	return c.netCC
}

// maxNetEager is the largest eager message: one wire fragment (wire.MaxFrag).
const maxNetEager = 1 << 30

// bytesSetting reads a non-negative byte count.
func bytesSetting[T int | int64](v string) (T, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && n < 0 {
		err = fmt.Errorf("want a non-negative number of bytes")
	}
	return T(n), err
}

// durationSetting reads a non-negative duration.
func durationSetting(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative")
	}
	return d, err
}

// Tunables lists every setting with the value in force in this process.
func Tunables() []Tunable {
	out := make([]Tunable, len(tunables))
	for i, t := range tunables {
		out[i] = t.Tunable
		out[i].Value = t.Default
		if v, ok := os.LookupEnv(t.Env); ok {
			out[i].Value = v
		}
	}
	return out
}

// newConfig applies defaults, then the environment, then opts.
func newConfig(opts []Option) (config, error) {
	c := config{level: ThreadMultiple, netSpin: DefaultNetSpin, netUnix: true, netShm: true, hostColl: true, netCC: netd.CongestionAuto, p2p: p2p.Config{EagerLimit: DefaultEagerLimit, NetEagerLimit: DefaultNetEagerLimit, PoolCap: DefaultPoolCap, Spin: DefaultSpin}}
	for _, t := range tunables {
		if v, ok := os.LookupEnv(t.Env); ok {
			if err := t.apply(&c, v); err != nil {
				return c, errs.New(errs.Arg, "Run", errs.None, "%s=%q: %v", t.Env, v, err)
			}
		}
	}
	for _, o := range opts {
		o(&c)
	}
	if c.level < ThreadSingle || c.level > ThreadMultiple {
		return c, errs.New(errs.Arg, "Run", errs.None, "thread level %d is not one of ThreadSingle..ThreadMultiple", int(c.level))
	}
	if c.p2p.EagerLimit < 0 || c.p2p.NetEagerLimit < 0 || c.p2p.PoolCap < 0 || c.p2p.Spin < 0 || c.netSpin < 0 || c.netDelay < 0 {
		return c, errs.New(errs.Arg, "Run", errs.None, "eager limits, pool cap, spins and the network delay must not be negative")
	}
	if !validCC(c.netCC) {
		return c, errs.New(errs.Arg, "Run", errs.None, "TCP congestion control (WEFT_NET_CONGESTION, WithNetCongestion) %q is not auto, system or an algorithm's name (up to 15 letters, digits, '-' or '_')", c.netCC)
	}
	if c.p2p.NetEagerLimit > maxNetEager {
		return c, errs.New(errs.Arg, "Run", errs.None, "network eager limit (WEFT_NET_EAGER_LIMIT, WithNetEagerLimit) %d is above %d, the largest message sent in one piece", c.p2p.NetEagerLimit, maxNetEager)
	}
	return c, nil
}
