// Pi integrates 4/(1+x^2) over [0,1] with the midpoint rule, each rank taking every
// size-th interval; rank 0 sums the parts with point-to-point messages.
//
//	go run ./examples/pi -np 4 -n 10000000
package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/weft-mpi/weft/mpi"
)

func main() {
	n := flag.Int("n", 1_000_000, "intervals")
	mpi.Main(func(c *mpi.Comm) error {
		flag.Parse()
		rank, size := c.Rank(), c.Size()
		start := mpi.Wtime()
		h, sum := 1/float64(*n), 0.0
		for i := rank; i < *n; i += size {
			x := h * (float64(i) + 0.5)
			sum += 4 / (1 + x*x)
		}
		part := []float64{h * sum}
		if rank != 0 {
			return mpi.Send(c, part, 0, 0)
		}
		pi := part[0]
		for r := 1; r < size; r++ {
			if _, err := mpi.Recv(c, part, mpi.AnySource, 0); err != nil {
				return err
			}
			pi += part[0]
		}
		fmt.Printf("pi is about %.16f, error %.2e, %d ranks, %.3f ms\n", pi, math.Abs(pi-math.Pi), size, (mpi.Wtime()-start)*1e3)
		return nil
	})
}
