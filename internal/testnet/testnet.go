//go:build linux

// Package testnet builds small networks of Linux network namespaces for tests:
// hosts with addresses of their own, which a launcher reaches through
// `ip netns exec NS`, all on one bridge with the test machine. Multi-host
// behaviour is then tested on one machine, and only on addresses the test
// created.
//
// It needs Linux, root and iproute2's ip; without root or ip, New skips the
// test.
package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Net is a bridge on the test machine and namespaces joined to it.
type Net struct {
	Bridge string // the bridge's device name
	Addr   string // the test machine's address on the bridge, 10.77.X.1
	Hosts  []Host
}

// Host is one network namespace.
type Host struct {
	NS   string // its name: `ip netns exec NS cmd` runs cmd there
	Addr string // its address on the bridge, 10.77.X.(i+2)
}

// New creates a bridge with the address 10.77.X.1/24, for an X no other
// interface of the machine uses, and n namespaces, namespace i with lo up, an
// interface eth0 of address 10.77.X.(i+2)/24 joined to the bridge by a veth
// pair, and a default route through the bridge. Names carry a random id, so
// tests and packages running at once do not collide. t.Cleanup removes it all.
func New(t testing.TB, n int) *Net {
	t.Helper()
	if n < 1 || n > 250 {
		t.Fatalf("testnet: %d namespaces, want 1 to 250", n)
	}
	if os.Geteuid() != 0 {
		t.Skip("testnet: creating network namespaces needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("testnet: iproute2's ip is not on PATH (Debian: apt-get install iproute2)")
	}
	id := randomHex(3)
	nw := &Net{Bridge: "wb" + id}
	// The first namespace tells whether this machine lets us make any (a
	// container without CAP_SYS_ADMIN does not): skip, not fail, if not.
	first := "weft-" + id + "-0"
	if out, err := exec.Command("ip", "netns", "add", first).CombinedOutput(); err != nil {
		t.Skipf("testnet: this machine cannot create a network namespace: ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	undo(t, "netns", "del", first)

	prefix := nw.addBridge(t)
	nw.Addr = prefix + "1"
	for i := range n {
		h := Host{NS: "weft-" + id + "-" + strconv.Itoa(i), Addr: prefix + strconv.Itoa(i+2)}
		if i > 0 {
			must(t, "netns", "add", h.NS)
			undo(t, "netns", "del", h.NS)
		}
		veth := "wv" + id + strconv.Itoa(i)
		must(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS)
		must(t, "link", "set", veth, "master", nw.Bridge, "up")
		must(t, "-n", h.NS, "addr", "add", h.Addr+"/24", "dev", "eth0")
		must(t, "-n", h.NS, "link", "set", "eth0", "up")
		must(t, "-n", h.NS, "link", "set", "lo", "up")
		must(t, "-n", h.NS, "route", "add", "default", "via", nw.Addr)
		nw.Hosts = append(nw.Hosts, h)
	}
	return nw
}

// addBridge creates the bridge with a /24 of 10.77 no interface uses, and
// returns the subnet's first three bytes and a dot. A lock file makes choosing
// and taking the subnet one step for every test on the machine.
func (nw *Net) addBridge(t testing.TB) string {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "weft-testnet.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("testnet: %v", err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("testnet: locking %s: %v", lock.Name(), err)
	}
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("testnet: %v", err)
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
		t.Fatal("testnet: every subnet 10.77.X.0/24 is in use")
	}
	prefix := fmt.Sprintf("10.77.%d.", x)
	must(t, "link", "add", nw.Bridge, "type", "bridge")
	undo(t, "link", "del", nw.Bridge)
	must(t, "addr", "add", prefix+"1/24", "dev", nw.Bridge)
	must(t, "link", "set", nw.Bridge, "up")
	return prefix
}

// ip runs iproute2's ip.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testnet: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// must runs ip and ends the test if it fails.
func must(t testing.TB, args ...string) {
	t.Helper()
	if err := ip(args...); err != nil {
		t.Fatal(err)
	}
}

// undo removes what a successful ip command made, at the test's end.
func undo(t testing.TB, args ...string) {
	t.Cleanup(func() {
		if err := ip(args...); err != nil {
			t.Error(err)
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
