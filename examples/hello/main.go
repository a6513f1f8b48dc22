// Hello prints a line from every rank: the smallest Weft program.
//
//	go run ./examples/hello -np 4
package main

import (
	"fmt"

	"github.com/weft-mpi/weft/mpi"
)

func main() {
	mpi.Main(func(c *mpi.Comm) error {
		host, _ := mpi.ProcessorName()
		fmt.Printf("hello from rank %d of %d on %s\n", c.Rank(), c.Size(), host)
		return nil
	})
}
