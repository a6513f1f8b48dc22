package netd

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// Both Devices of these benchmarks live in one process and share its
// processors, so the figures only indicate; BenchmarkTCPPingPong is the same
// exchange over plain blocking Go TCP, measured in the same run, for a ratio.

var spins = []time.Duration{0, 50 * time.Microsecond}

// BenchmarkPingPong: 8-byte messages, proc 0 sends with Send and waits; proc 1's
// handler answers from Handle with Post; proc 0's handler wakes the waiting
// goroutine. ns/op is a round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, spin := range spins {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			pong := make(chan struct{}, 1)
			ping, answer := []byte("pingping"), []byte("pongpong")
			ps := startJob(b, 2, func(i int, cfg *Config, p *tproc) {
				cfg.Spin = spin
				var buf [8]byte
				p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
					if err := pl.ReadInto(buf[:]); err != nil {
						return err
					}
					if i == 0 {
						pong <- struct{}{}
						return nil
					}
					p.dev.Post(0, ChannelP2P, &wire.Header{Kind: wire.Eager, SendReq: h.SendReq, Len: 8}, answer, nil)
					return nil
				}
			})
			h := &wire.Header{Kind: wire.Eager, Len: 8}
			round := func(i int) {
				h.SendReq = uint64(i + 1)
				if err := ps[0].dev.Send(1, ChannelP2P, h, ping); err != nil {
					b.Fatal(err)
				}
				<-pong
			}
			round(0) // connect
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				round(i)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
		})
	}
}

// BenchmarkBandwidth: 4 MiB messages from proc 0 to proc 1, read straight into
// the handler's buffer, each acknowledged by a Post; at most 4 unacknowledged.
func BenchmarkBandwidth(b *testing.B) {
	const size, window = 4 << 20, 4
	for _, spin := range spins {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			acks := make(chan struct{}, window)
			data := make([]byte, size)
			ps := startJob(b, 2, func(i int, cfg *Config, p *tproc) {
				cfg.Spin = spin
				buf := make([]byte, size)
				p.p2p.fn = func(proc int, h *wire.Header, pl *Payload) error {
					if i == 0 {
						acks <- struct{}{}
						return nil
					}
					if err := pl.ReadInto(buf[:pl.Len()]); err != nil {
						return err
					}
					p.dev.Post(0, ChannelP2P, &wire.Header{Kind: wire.Ack, SendReq: h.SendReq}, nil, nil)
					return nil
				}
			})
			h := &wire.Header{Kind: wire.Eager, Len: size}
			send := func(i int) {
				h.SendReq = uint64(i + 1)
				if err := ps[0].dev.Send(1, ChannelP2P, h, data); err != nil {
					b.Fatal(err)
				}
			}
			send(0) // connect
			<-acks
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				if i >= window {
					<-acks
				}
				send(i)
			}
			for range min(b.N, window) {
				<-acks
			}
		})
	}
}

// BenchmarkTCPPingPong is the peer of BenchmarkPingPong: the same 80 bytes
// (header and payload) each way between two goroutines over loopback TCP with
// blocking reads and writes, and nothing else.
func BenchmarkTCPPingPong(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var buf [wire.Size + 8]byte
		for {
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				return
			}
			if _, err := c.Write(buf[:]); err != nil {
				return
			}
		}
	}()
	tcpPingPong(b, ln.Addr().String())
}

// tcpPingPong sends the bytes of a header and an 8-byte payload to an echo server
// at addr and reads them back, b.N times, with blocking Go TCP.
func tcpPingPong(b *testing.B, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var buf [wire.Size + 8]byte
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
}

// BenchmarkTCPBandwidth is the peer of BenchmarkBandwidth: 4 MiB messages
// over loopback TCP between two goroutines, read with io.ReadFull, each
// acknowledged by one byte, at most 4 unacknowledged.
func BenchmarkTCPBandwidth(b *testing.B) {
	const size, window = 4 << 20, 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf[:1]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	acks := make(chan struct{}, window)
	go func() {
		var ack [1]byte
		for {
			if _, err := c.Read(ack[:]); err != nil {
				return
			}
			acks <- struct{}{}
		}
	}()
	data := make([]byte, size)
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		if i >= window {
			<-acks
		}
		if _, err := c.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	for range min(b.N, window) {
		<-acks
	}
}
