//go:build linux

package testnet

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Run with dialArg first, the test binary is a client inside a namespace: it
// dials the address after it and writes the rest of its words.
const dialArg = "testnet-dial"

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == dialArg {
		c, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintln(c, os.Args[3])
		c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestNamespaces: every namespace reaches the test machine at the bridge's
// address from its own address, two networks made at once do not collide,
// and cleanup leaves nothing behind.
func TestNamespaces(t *testing.T) {
	var mu sync.Mutex
	var made []*Net
	t.Run("group", func(t *testing.T) {
		for _, n := range []int{3, 2} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				t.Parallel()
				nw := New(t, n)
				mu.Lock()
				made = append(made, nw)
				mu.Unlock()
				checkReach(t, nw)
			})
		}
	})
	if len(made) == 2 && (made[0].Addr == made[1].Addr || made[0].Bridge == made[1].Bridge) {
		t.Errorf("two networks made at once share %s / %s", made[0].Addr, made[0].Bridge)
	}
	out, err := exec.Command("ip", "-br", "link").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, nw := range made {
		if strings.Contains(string(out), nw.Bridge) {
			t.Errorf("bridge %s is still there after cleanup", nw.Bridge)
		}
		for _, h := range nw.Hosts {
			if strings.Contains(string(list), h.NS) {
				t.Errorf("namespace %s is still there after cleanup", h.NS)
			}
		}
	}
}

// checkReach dials a listener on the bridge address from every namespace.
func checkReach(t *testing.T, nw *Net) {
	ln, err := net.Listen("tcp", net.JoinHostPort(nw.Addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range nw.Hosts {
		cmd := exec.Command("ip", "netns", "exec", h.NS, self, dialArg, ln.Addr().String(), fmt.Sprint(i))
		// A race-enabled binary sleeps a second at exit unless told otherwise.
		cmd.Env = append(os.Environ(), strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dialing from %s: %v: %s", h.NS, err, out)
		}
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		from := c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
		if strings.TrimSpace(line) != fmt.Sprint(i) || from != h.Addr {
			t.Errorf("namespace %s: got %q from %s, want %d from %s", h.NS, line, from, i, h.Addr)
		}
	}
}
