//go:build linux

// Package netns builds small emulated clusters of Linux network namespaces on
// one machine: hosts with addresses of their own, which a launcher reaches
// through `ip netns exec NS`, all on one bridge with this machine, their links
// optionally shaped to a bandwidth with tc's token bucket filter. Tests use it
// through internal/testnet; weft bench's cluster suite directly.
//
// It needs Linux, root and iproute2 (ip, and tc for shaping); Create says which
// is missing with an error wrapping ErrUnavailable.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnavailable wraps Create's error when this machine cannot make namespaces
// at all (not root, no iproute2, a container without CAP_SYS_ADMIN): callers
// skip rather than fail.
var ErrUnavailable = errors.New("netns: network namespaces unavailable")

// Net is a bridge on this machine and namespaces joined to it.
type Net struct {
	Bridge string // the bridge's device name
	Addr   string // this machine's address on the bridge, 10.77.X.1
	Subnet string // the bridge's subnet, 10.77.X.0/24
	Hosts  []Host
	undo   [][]string // ip commands that remove what was made, last made first
}

// Host is one network namespace.
type Host struct {
	NS   string // its name: `ip netns exec NS cmd` runs cmd there
	Addr string // its address on the bridge, 10.77.X.(i+2)
	Veth string // this machine's end of its veth pair (eth0 is the other end)
}

// Options shape a Net.
type Options struct {
	// Prefix begins every namespace's name (default "weft-"); a random id and
	// the host's index follow.
	Prefix string
	// Rate, when not "", limits each host's link to that many bits per second
	// in each direction, with a tc tbf qdisc on both ends of its veth pair: tc's
	// syntax, such as "1gbit", "100mbit" or "500kbit" (see ParseRate).
	Rate string
}

// Create makes a bridge with the address 10.77.X.1/24, for an X no other
// interface of the machine uses, and n namespaces, namespace i with lo up, an
// interface eth0 of address 10.77.X.(i+2)/24 joined to the bridge by a veth
// pair, and a default route through the bridge; with o.Rate, the pair is
// shaped. Names carry a random id, so Nets made at once do not collide. On
// error nothing is left behind; otherwise Close removes it all.
func Create(n int, o Options) (*Net, error) {
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("netns: %d namespaces, want 1 to 250", n)
	}
	var rateBits float64
	if o.Rate != "" {
		var err error
		if rateBits, err = ParseRate(o.Rate); err != nil {
			return nil, err
		}
	}
	if err := Available(o.Rate != ""); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = "weft-"
	}
	id := randomHex(3)
	nw := &Net{Bridge: "wb" + id}
	// The first namespace tells whether this machine lets us make any.
	first := o.Prefix + id + "-0"
	if err := nw.make([]string{"netns", "add", first}, "netns", "del", first); err != nil {
		return nil, fmt.Errorf("%w: this machine cannot create a network namespace: %w", ErrUnavailable, err)
	}
	fail := func(err error) (*Net, error) {
		if cerr := nw.Close(); cerr != nil {
			err = fmt.Errorf("%w; cleaning up: %w", err, cerr)
		}
		return nil, err
	}
	prefix, err := nw.addBridge()
	if err != nil {
		return fail(err)
	}
	nw.Addr, nw.Subnet = prefix+"1", prefix+"0/24"
	for i := range n {
		h := Host{NS: o.Prefix + id + "-" + strconv.Itoa(i), Addr: prefix + strconv.Itoa(i+2), Veth: "wv" + id + strconv.Itoa(i)}
		if i > 0 {
			if err := nw.make([]string{"netns", "add", h.NS}, "netns", "del", h.NS); err != nil {
				return fail(err)
			}
		}
		// The namespace's end of the pair goes with it when it is deleted, and
		// takes this end with it.
		steps := [][]string{
			{"link", "add", h.Veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
			{"link", "set", h.Veth, "master", nw.Bridge, "up"},
			{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			{"-n", h.NS, "link", "set", "eth0", "up"},
			{"-n", h.NS, "link", "set", "lo", "up"},
			{"-n", h.NS, "route", "add", "default", "via", nw.Addr},
		}
		for _, s := range steps {
			if err := run("ip", s...); err != nil {
				return fail(err)
			}
		}
		if rateBits > 0 {
			for _, dev := range [][]string{{h.Veth}, {"-n", h.NS, "eth0"}} {
				if err := shape(dev, o.Rate, rateBits); err != nil {
					return fail(err)
				}
			}
		}
		nw.Hosts = append(nw.Hosts, h)
	}
	return nw, nil
}

// Available says whether Create can work here: root, ip on PATH, and tc too
// when shaping is wanted. Its error wraps ErrUnavailable and says what to do.
func Available(shaping bool) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: creating network namespaces needs root", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: iproute2's ip is not on PATH (Debian: apt-get install iproute2)", ErrUnavailable)
	}
	if _, err := exec.LookPath("tc"); err != nil && shaping {
		return fmt.Errorf("%w: iproute2's tc is not on PATH (Debian: apt-get install iproute2)", ErrUnavailable)
	}
	return nil
}

// shape puts a tbf qdisc of rate on the device dev names (["veth"] or ["-n",
// NS, "eth0"]): a bucket of 1 ms at the rate, at least 16 KiB (more than a
// frame), and 10 ms of queue before packets are dropped.
func shape(dev []string, rate string, bits float64) error {
	burst := max(int(bits/8/1000), 16<<10)
	args := append(dev[:len(dev)-1:len(dev)-1], "qdisc", "add", "dev", dev[len(dev)-1], "root", "tbf",
		"rate", rate, "burst", strconv.Itoa(burst), "latency", "10ms")
	return run("tc", args...)
}

// NetemAvailable says whether the kernel has netem (tc's delay and loss
// emulation), trying it on a dummy link of a scratch namespace; when not, why.
func NetemAvailable() (bool, string) {
	if err := Available(true); err != nil {
		return false, err.Error()
	}
	ns := "weft-netem-" + randomHex(3)
	if err := run("ip", "netns", "add", ns); err != nil {
		return false, err.Error()
	}
	defer run("ip", "netns", "del", ns)
	err := run("tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
	if err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Close removes every namespace and the bridge (qdiscs and veth pairs go with
// them). It reports what it could not remove, after trying it all; a second
// call does nothing.
func (nw *Net) Close() error {
	var errs []error
	for i := len(nw.undo) - 1; i >= 0; i-- {
		if err := run("ip", nw.undo[i]...); err != nil {
			errs = append(errs, err)
		}
	}
	nw.undo = nil
	return errors.Join(errs...)
}

// make runs ip with args and, if it succeeds, records undo for Close.
func (nw *Net) make(args []string, undo ...string) error {
	if err := run("ip", args...); err != nil {
		return err
	}
	nw.undo = append(nw.undo, undo)
	return nil
}

// addBridge creates the bridge with a /24 of 10.77 no interface uses, and
// returns the subnet's first three bytes and a dot. A lock file makes choosing
// and taking the subnet one step for every user on the machine.
func (nw *Net) addBridge() (string, error) {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "weft-testnet.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("netns: %w", err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("netns: locking %s: %w", lock.Name(), err)
	}
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("netns: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if v4 := ipn.IP.To4(); v4 != nil && v4[0] == 10 && v4[1] == 77 {
				used[int(v4[2])] = true
			}
		}
	}
	x := -1
	for i := range 256 {
		if !used[i] {
			x = i
			break
		}
	}
	if x < 0 {
		return "", errors.New("netns: every subnet 10.77.X.0/24 is in use")
	}
	prefix := fmt.Sprintf("10.77.%d.", x)
	if err := nw.make([]string{"link", "add", nw.Bridge, "type", "bridge"}, "link", "del", nw.Bridge); err != nil {
		return "", err
	}
	for _, s := range [][]string{{"addr", "add", prefix + "1/24", "dev", nw.Bridge}, {"link", "set", nw.Bridge, "up"}} {
		if err := run("ip", s...); err != nil {
			return "", err
		}
	}
	return prefix, nil
}

// run runs an iproute2 command.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
