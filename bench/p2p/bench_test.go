package main

import (
	"testing"

	"github.com/weft-mpi/weft/mpi"
)

// BenchmarkMessageRate1P is the message rate of one pair of ranks (Thakur and
// Gropp's 1P-1P, inside one process); ns/op is per message.
func BenchmarkMessageRate1P(b *testing.B) {
	err := mpi.Run(2, func(c *mpi.Comm) error { return ratePair(c, c.Rank() == 0, 1-c.Rank(), 0, b.N) })
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMessageRate4T is the message rate of 4 goroutines of rank 0 sending to 4
// of rank 1 (Thakur and Gropp's 4T-4T); ns/op is per message.
func BenchmarkMessageRate4T(b *testing.B) {
	const pairs = 4
	err := mpi.Run(2, func(c *mpi.Comm) error {
		return concurrently(pairs, func(t int) error { return ratePair(c, c.Rank() == 0, 1-c.Rank(), t, b.N/pairs+1) })
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStream8B is OSU's bandwidth test at 8 bytes: windows of 64 Isend and
// Irecv, each completed with Waitall; ns/op is per message.
func BenchmarkStream8B(b *testing.B) {
	err := mpi.Run(2, func(c *mpi.Comm) error {
		bufs := make([][]byte, window)
		for i := range bufs {
			bufs[i] = make([]byte, 8)
		}
		reqs := make([]*mpi.Request, window)
		for i := 0; i < b.N/window+1; i++ {
			if err := streamWindow(c, bufs, reqs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
