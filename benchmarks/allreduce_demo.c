/* The main demonstration: an all-reduce across the job's ranks through the C API alone, its
 * result checked against a reference computed independently, and its bus bandwidth printed.
 *
 *   mpirun -np 4 ./weft-allreduce-demo [MiB=64] [iterations=20]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Small integers: every partial sum is exact in float32, whatever the order. */
static float input(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 13) % 101) - 50); }

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    weftResult_t r_ = (call);                                                                              \
    if (r_ != weftSuccess) {                                                                               \
      fprintf(stderr, "%s failed: %s: %s\n", #call, weftGetErrorString(r_),                                \
              comm ? weftCommGetLastError(comm) : weftGetLastErrorMessage());                              \
      return 1;                                                                                            \
    }                                                                                                      \
  } while (0)

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  weftComm_t comm = NULL;
  CHECK(weftCommInitFromEnv(&comm));
  int rank = 0, size = 0;
  CHECK(weftCommRank(comm, &rank));
  CHECK(weftCommCount(comm, &size));
  size_t count = mib * 1024 * 1024 / sizeof(float);
  if (count == 0) count = 1;
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  if (!send || !recv) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < count; ++i) send[i] = input(rank, i);
  memset(recv, 0, count * sizeof(float));

  CHECK(weftAllReduce(send, recv, count, weftFloat32, weftSum, comm)); /* warm-up and check */
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double ref = 0;
    for (int r = 0; r < size; ++r) ref += input(r, i);
    if (recv[i] != (float)ref) wrong++;
  }
  CHECK(weftBarrier(comm));
  double t0 = now_s();
  for (int it = 0; it < iters; ++it) CHECK(weftAllReduce(send, recv, count, weftFloat32, weftSum, comm));
  double dt = (now_s() - t0) / iters;
  size_t wrong_total = 0;
  uint64_t w64 = wrong, all = 0;
  CHECK(weftAllReduce(&w64, &all, 1, weftInt64, weftSum, comm));
  wrong_total = (size_t)all;
  if (rank == 0) {
    double bytes = (double)count * sizeof(float);
    double algbw = bytes / dt / 1e9, busbw = algbw * 2.0 * (size - 1) / size;
    printf("weft all-reduce: %d ranks, %zu MiB float32 sum, %d iterations\n", size, mib, iters);
    printf("  time %.3f ms   algbw %.2f GB/s   busbw %.2f GB/s   wrong elements %zu\n", dt * 1e3, algbw, busbw,
           wrong_total);
    printf("%s\n", wrong_total == 0 ? "RESULT OK" : "RESULT WRONG");
  }
  CHECK(weftCommDestroy(comm));
  comm = NULL;
  free(send);
  free(recv);
  return wrong_total == 0 ? 0 : 1;
}
