/* Baseline for the dependency-hop benchmark: a value bounces between ranks 0 and 1,
 * each rank adding 1 before passing it on, N hops; rank 0 prints seconds per hop. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long hops = argc > 1 ? atol(argv[1]) : 1000;
  double x = 0.0;
  MPI_Barrier(MPI_COMM_WORLD); /* dhir's harness is in step here too: it has just broadcast the inputs */
  double start = MPI_Wtime();
  for (long i = 0; i < hops; i++) {
    int owner = (int)(i % 2);
    if (i > 0 && rank == owner)
      MPI_Recv(&x, 1, MPI_DOUBLE, 1 - owner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == owner) {
      x += 1.0;
      if (i + 1 < hops) MPI_Send(&x, 1, MPI_DOUBLE, 1 - owner, 0, MPI_COMM_WORLD);
    }
  }
  double seconds = MPI_Wtime() - start;
  if (rank == 0) printf("%.9f\n", seconds / (double)(hops - 1));
  MPI_Finalize();
  return 0;
}
