module github.com/weft-mpi/weft

go 1.26
