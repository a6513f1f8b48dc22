package netd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// Ping-pong between two OS processes, as a job runs: the test binary starts
// itself as the peer (TestEchoProc). BenchmarkTCPPingPongProcs is the same
// exchange over plain blocking Go TCP, the peer to compare with.

const echoEnv = "WEFT_NETD_ECHO" // "netd,<proc 0's address>,<spin>" or "tcp", for TestEchoProc

// TestEchoProc is the peer process of the Procs benchmarks when started by them;
// otherwise it does nothing. It prints its address and answers every message
// with the same bytes until its stdin closes: as proc 1 of a job whose handler
// answers with Post, or as a plain TCP echo of wire.Size+8-byte messages.
func TestEchoProc(t *testing.T) {
	env := os.Getenv(echoEnv)
	if env == "" {
		t.Skip("started by the Procs benchmarks only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(env, ",")
	if args[0] == "tcp" {
		fmt.Println(ln.Addr())
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var buf [wire.Size + 8]byte
		for {
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				return
			}
			if _, err := c.Write(buf[:]); err != nil {
				return
			}
		}
	}
	spin, err := time.ParseDuration(args[2])
	if err != nil {
		t.Fatal(err)
	}
	var d *Device
	echo := &handler{fn: func(proc int, h *wire.Header, pl *Payload) error {
		buf := make([]byte, pl.Len())
		if err := pl.ReadInto(buf); err != nil {
			return err
		}
		d.Post(proc, ChannelP2P, &wire.Header{Kind: wire.Eager, SendReq: h.SendReq, Len: h.Len}, buf, nil)
		return nil
	}}
	d, err = New(Config{Self: 1, Procs: 2, Job: testJob, Key: testKey, Listener: ln, Spin: spin, P2P: echo, Coll: echo,
		Addrs: func(int) ([]string, error) { return []string{args[1]}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	fmt.Println(ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = d.Close()
}

// startEcho starts TestEchoProc with env and returns its address; the process
// ends with the benchmark.
func startEcho(b *testing.B, env string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestEchoProc$")
	cmd.Env = append(os.Environ(), echoEnv+"="+env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(addr)
}

// BenchmarkPingPongProcs: 8-byte messages between this process (proc 0: Send,
// then a handler wakes the waiting goroutine) and a child (proc 1: its handler
// answers with Post); ns/op is a round trip.
func BenchmarkPingPongProcs(b *testing.B) {
	for _, spin := range spins {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			addr1 := startEcho(b, fmt.Sprintf("netd,%s,%v", ln.Addr(), spin))
			pong := make(chan struct{}, 1)
			var buf [8]byte
			h0 := &handler{fn: func(proc int, h *wire.Header, pl *Payload) error {
				if err := pl.ReadInto(buf[:]); err != nil {
					return err
				}
				pong <- struct{}{}
				return nil
			}}
			d, err := New(Config{Self: 0, Procs: 2, Job: testJob, Key: testKey, Listener: ln, Spin: spin, P2P: h0, Coll: h0,
				Addrs: func(int) ([]string, error) { return []string{addr1}, nil }})
			if err != nil {
				b.Fatal(err)
			}
			d.Start()
			defer d.Close()
			ping := []byte("pingping")
			h := &wire.Header{Kind: wire.Eager, Len: 8}
			round := func(i int) {
				h.SendReq = uint64(i + 1)
				if err := d.Send(1, ChannelP2P, h, ping); err != nil {
					b.Fatal(err)
				}
				<-pong
			}
			round(0) // connect
			b.ResetTimer()
			for i := range b.N {
				round(i)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
		})
	}
}

// BenchmarkTCPPingPongProcs: the peer of BenchmarkPingPongProcs, the same bytes
// over blocking Go TCP between the same two processes and nothing else.
func BenchmarkTCPPingPongProcs(b *testing.B) {
	tcpPingPong(b, startEcho(b, "tcp"))
}
