/* The least an MPI program does: start and finish (bench/run.py startup's baseline). */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Finalize();
  return 0;
}
