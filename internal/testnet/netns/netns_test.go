//go:build linux

package netns

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for s, want := range map[string]float64{"1gbit": 1e9, "100mbit": 1e8, "2.5Gbit": 2.5e9, "500kbit": 5e5, "64000bit": 64000} {
		if got, err := ParseRate(s); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "gbit", "0gbit", "-1mbit", "1gbps", "1 gbit", "NaNgbit", "100tbit"} {
		if _, err := ParseRate(s); err == nil {
			t.Errorf("ParseRate(%q) succeeded", s)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, n := range []int{0, -1, 251} {
		if _, err := Create(n, Options{}); err == nil {
			t.Errorf("Create(%d) succeeded", n)
		}
	}
	if _, err := Create(1, Options{Rate: "fast"}); err == nil || !strings.Contains(err.Error(), "fast") {
		t.Errorf("Create with rate fast: %v", err)
	}
}

// create makes a Net or skips where namespaces cannot be made.
func create(t *testing.T, n int, o Options) *Net {
	nw, err := Create(n, o)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Close() })
	return nw
}

// TestShaped: both ends of every veth pair carry a tbf qdisc of the rate, a
// transfer to a namespace takes at least its size over the rate, and Close
// leaves nothing behind.
func TestShaped(t *testing.T) {
	const rate, bits = "40mbit", 40e6
	nw := create(t, 2, Options{Prefix: "weft-shaped-", Rate: rate})
	for _, h := range nw.Hosts {
		for _, argv := range [][]string{{"tc", "qdisc", "show", "dev", h.Veth}, {"tc", "-n", h.NS, "qdisc", "show", "dev", "eth0"}} {
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "40Mbit") {
				t.Errorf("%s: %s %v, want a tbf of 40Mbit", strings.Join(argv, " "), out, err)
			}
		}
	}
	ln := listenIn(t, nw.Hosts[0].NS, nw.Hosts[0].Addr)
	const size = 2 << 20
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := <-got; n != size {
		t.Fatalf("received %d bytes, want %d", n, size)
	}
	if took, least := time.Since(start), time.Duration(0.9*size*8/bits*float64(time.Second)); took < least {
		t.Errorf("%d bytes at %s took %v, want at least %v", size, rate, took, least)
	}
	ln.Close() // a socket keeps its namespace alive
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	// The veth pairs go when the kernel dismantles the namespaces, which
	// may be later: only the names and the bridge are Close's to remove.
	links, _ := exec.Command("ip", "-br", "link").CombinedOutput()
	spaces, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	for _, h := range nw.Hosts {
		if strings.Contains(string(spaces), h.NS) {
			t.Errorf("namespace %s left after Close", h.NS)
		}
	}
	if strings.Contains(string(links), nw.Bridge+" ") {
		t.Errorf("bridge %s left after Close", nw.Bridge)
	}
}

// listenIn listens on addr inside namespace ns: a socket stays in the
// namespace of the thread that made it.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	type result struct {
		ln  net.Listener
		err error
	}
	if sysSetns == 0 {
		t.Skip("setns(2)'s number is not known for " + runtime.GOARCH)
	}
	res := make(chan result, 1)
	go func() {
		// The thread is left locked and so dies with the goroutine: it never
		// runs anything else in the namespace.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			res <- result{nil, err}
			return
		}
		defer f.Close()
		if _, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			res <- result{nil, e}
			return
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		res <- result{ln, err}
	}()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

// TestNetem: the answer is yes, or no with a reason (this kernel has no
// sch_netem).
func TestNetem(t *testing.T) {
	if err := Available(true); err != nil {
		t.Skip(err)
	}
	ok, why := NetemAvailable()
	t.Logf("netem: %v %s", ok, why)
	if !ok && why == "" {
		t.Error("netem unavailable without a reason")
	}
}
