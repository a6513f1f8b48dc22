// Ring passes a token around all ranks several times; each rank adds its rank to it.
//
//	go run ./examples/ring -np 8
package main

import (
	"flag"
	"fmt"

	"github.com/weft-mpi/weft/mpi"
)

func main() {
	laps := flag.Int("laps", 3, "times the token goes round")
	mpi.Main(func(c *mpi.Comm) error {
		flag.Parse() // Main has already taken -np out of the arguments
		rank, size := c.Rank(), c.Size()
		next, prev := (rank+1)%size, (rank+size-1)%size
		token := []int64{0}
		for lap := 0; lap < *laps; lap++ {
			if rank == 0 {
				if err := mpi.Send(c, token, next, lap); err != nil {
					return err
				}
			}
			if _, err := mpi.Recv(c, token, prev, lap); err != nil {
				return err
			}
			token[0] += int64(rank)
			if rank == 0 {
				fmt.Printf("lap %d: token %d\n", lap, token[0])
				continue
			}
			if err := mpi.Send(c, token, next, lap); err != nil {
				return err
			}
		}
		return nil
	})
}
