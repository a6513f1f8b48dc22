package bench

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Machine is what a reader needs to weigh the figures: the hardware, the
// software, how busy the machine was, and two of its limits measured at the
// start (a figure is read against the peers' and against these).
type Machine struct {
	OS        string `json:"os"`    // "Linux 6.1.0"
	CPU       string `json:"cpu"`   // model name
	Cores     int    `json:"cores"` // logical CPUs
	Go        string `json:"go"`    // toolchain of this binary
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
	// With Options.Quiet: the most of the CPUs others used in the pause
	// before a test, in percent, the seconds spent waiting for them, and the
	// tests that started under load all the same.
	OthersMax int     `json:"others_max_percent,omitempty"`
	Waited    float64 `json:"waited_seconds,omitempty"`
	Loaded    int     `json:"loaded_tests,omitempty"`
	CopyGBs   float64 `json:"copy_gbs"`             // Go copy() of 4 MiB
	HandoffNs float64 `json:"handoff_ns,omitempty"` // round trip of two goroutines spinning on a word
}

func probeMachine() Machine {
	m := Machine{OS: runtime.GOOS, Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		LoadStart: loadavg()}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.OS = strings.TrimSpace(string(out))
	}
	m.CPU = cpuModel()
	m.CopyGBs = copyBandwidth()
	m.HandoffNs = spinHandoff()
	return m
}

// Summary is the machine in one line.
func (m Machine) Summary() string {
	s := m.OS + ", " + strconv.Itoa(m.Cores) + " cores"
	if m.CPU != "" {
		s += ", " + m.CPU
	}
	return s + "; " + m.Go
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadavg is the 1, 5 and 15 minute load averages, "" where unknown.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// copyBandwidth is the best of a few 4 MiB copies, in GB/s: the ceiling of
// any single-copy message transfer on this machine.
func copyBandwidth() float64 {
	const size, reps = 4 << 20, 16
	src, dst := make([]byte, size), make([]byte, size)
	best := time.Duration(1 << 62)
	for range 5 {
		t := time.Now()
		for range reps {
			copy(dst, src)
		}
		best = min(best, time.Since(t))
	}
	return float64(size*reps) / best.Seconds() / 1e9
}

// spinHandoff is the round trip of two goroutines passing a turn on one
// word, in ns: two cache-line hand-offs between cores, the floor of any
// message between ranks. It spends at most a tenth of a second: on a busy
// machine a spinning goroutine may wait a whole time slice for the other,
// and then it says 0 (unknown), as it does with a single processor.
func spinHandoff() float64 {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	const budget = 100 * time.Millisecond
	var turn atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); !stop.Load(); i++ {
			for turn.Load() != 2*i+1 {
				if stop.Load() {
					return
				}
			}
			turn.Store(2*i + 2)
		}
	}()
	start := time.Now()
	n := int64(0)
	for ; ; n++ {
		turn.Store(2*n + 1)
		for spins := 0; turn.Load() != 2*n+2; spins++ {
			if spins%1024 == 0 && time.Since(start) > budget {
				stop.Store(true)
				<-done
				return 0
			}
		}
		if n%1024 == 0 && time.Since(start) > budget/2 {
			break
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	<-done
	return float64(elapsed.Nanoseconds()) / float64(n+1)
}

// quietBelow is the share of the CPUs, in percent, others may use when a
// test starts.
const quietBelow = 10

// othersBusy is the share of all CPUs busy during a 1 s pause in which none
// of our processes runs: everyone else's load, in percent; -1 where
// /proc/stat cannot tell.
func othersBusy() int {
	a, ok1 := cpuTimes()
	time.Sleep(time.Second)
	b, ok2 := cpuTimes()
	busy, idle := b[0]-a[0], b[1]-a[1]
	if !ok1 || !ok2 || busy+idle <= 0 {
		return -1
	}
	return int(100 * busy / (busy + idle))
}

// cpuTimes is the busy and idle ticks of all CPUs since boot.
func cpuTimes() ([2]int64, bool) {
	var t [2]int64
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(first)
	if len(f) < 9 || f[0] != "cpu" {
		return t, false
	}
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return t, false
		}
		// user nice system idle iowait irq softirq steal
		if i == 4 || i == 5 {
			t[1] += v
		} else {
			t[0] += v
		}
	}
	return t, true
}

// waitQuiet waits, up to limit, until others use under quietBelow percent
// of the CPUs, and records what it found in m.
func (m *Machine) waitQuiet(limit time.Duration, note func(string, ...any)) {
	start := time.Now()
	for {
		busy := othersBusy()
		m.OthersMax = max(m.OthersMax, busy)
		if busy < quietBelow {
			break
		}
		if time.Since(start) >= limit {
			m.Loaded++
			note("others keep %d%% of the CPUs busy; the next test starts under load", busy)
			break
		}
		note("others keep %d%% of the CPUs busy; waiting for them (up to %v)", busy, limit)
		time.Sleep(5 * time.Second)
	}
	m.Waited += time.Since(start).Seconds()
}
