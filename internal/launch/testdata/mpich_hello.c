/* A C MPI program for TestMPICH: it joins weft run through MPICH's own libpmi.
   With an argument R, rank R calls MPI_Abort(MPI_COMM_WORLD, 9) after the
   Allreduce. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, one, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %d\n", rank, size, sum);
    fflush(stdout);
    if (argc > 1 && rank == atoi(argv[1]))
        MPI_Abort(MPI_COMM_WORLD, 9);
    MPI_Finalize();
    return 0;
}
