/* Peer harness for benchmarks/compare: MPI_Allreduce (float32, sum, out of place) timed exactly
 * as weft-perf times Weft: buffers allocated once at the largest size and touched, W warm-up
 * calls, a barrier, N timed calls, time per call = elapsed / N, the MAXIMUM over ranks (weft-perf
 * and nccl-tests' -a 3: the call is done when its slowest rank is).
 *
 *   mpirun -np 2 peer_mpi_allreduce SIZE:ITERS:WARMUP[,...]
 * prints CSV on rank 0: size,time_us,algbw,busbw,wrong. Every rank sends rank+1 in every element,
 * so every element of the result must be n(n+1)/2; wrong = the elements of the last timed call's
 * result that differ from it, summed over ranks (0: all right). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: %s SIZE:ITERS:WARMUP[,...]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t sizes[64];
  int iters[64], warm[64], k = 0;
  size_t max = 4;
  for (char* tok = strtok(argv[1], ","); tok && k < 64; tok = strtok(NULL, ","), ++k) {
    unsigned long long s = 0;
    iters[k] = 20, warm[k] = 5;
    sscanf(tok, "%llu:%d:%d", &s, &iters[k], &warm[k]);
    sizes[k] = (size_t)s;
    if (sizes[k] > max) max = sizes[k];
  }
  float* send = malloc(max);
  float* recv = malloc(max);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t i = 0; i < max / sizeof(float); ++i) send[i] = (float)(rank + 1), recv[i] = 0;
  if (rank == 0) printf("size,time_us,algbw,busbw,wrong\n");
  for (int j = 0; j < k; ++j) {
    int count = (int)(sizes[j] / sizeof(float));
    if (count < 1) count = 1;
    for (int i = 0; i < warm[j]; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters[j]; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double per = (MPI_Wtime() - t0) / (iters[j] > 0 ? iters[j] : 1), t = 0;
    MPI_Allreduce(&per, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long wrong = 0, all = 0;
    const float want = (float)(n * (n + 1) / 2);
    for (int i = 0; i < count; ++i) wrong += recv[i] != want;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    double bytes = (double)count * sizeof(float), algbw = bytes / t / 1e9;
    if (rank == 0) {
      printf("%zu,%.3f,%.4f,%.4f,%ld\n", (size_t)count * sizeof(float), t * 1e6, algbw, algbw * 2.0 * (n - 1) / n, all);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
