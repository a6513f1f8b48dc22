// Package limits measures what this machine allows, so that Weft's figures can be
// read against it: memory copy bandwidth, and the cost of handing a value from one
// goroutine to another by spinning on a shared word and by a channel (which parks).
package limits

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkCopy is Go's copy() at message sizes; MB/s is the copy bandwidth.
func BenchmarkCopy(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			src, dst := make([]byte, size), make([]byte, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkSpinHandoff is a round trip between two goroutines that spin on one
// shared word: two cache-line hand-offs between cores, the floor of any hand-off.
func BenchmarkSpinHandoff(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two processors")
	}
	var turn atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); i < int64(b.N); i++ {
			for turn.Load() != 2*i+1 {
			}
			turn.Store(2*i + 2)
		}
	}()
	for i := int64(0); i < int64(b.N); i++ {
		turn.Store(2*i + 1)
		for turn.Load() != 2*i+2 {
		}
	}
	<-done
}

// BenchmarkChanHandoff is a round trip through two unbuffered channels: each side
// parks until the other wakes it.
func BenchmarkChanHandoff(b *testing.B) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	for i := 0; i < b.N; i++ {
		ping <- i
		<-pong
	}
	close(ping)
}
