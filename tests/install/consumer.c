/* A program outside the project, written against weft.h alone: all-reduces and checks. */
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

int main(void) {
  weftComm_t comm;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    fprintf(stderr, "init: %s\n", weftGetLastErrorMessage());
    return 1;
  }
  int rank, size;
  weftCommRank(comm, &rank);
  weftCommCount(comm, &size);
  enum { N = 100003 };
  float* buf = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) buf[i] = (float)(rank + i % 17);
  if (weftAllReduce(buf, buf, N, weftFloat32, weftSum, comm) != weftSuccess) {
    fprintf(stderr, "allreduce: %s\n", weftCommGetLastError(comm));
    return 1;
  }
  int wrong = 0;
  for (int i = 0; i < N; ++i) wrong += buf[i] != (float)(size * (size - 1) / 2 + size * (i % 17));
  printf("consumer rank %d of %d: %s\n", rank, size, wrong ? "WRONG" : "OK");
  free(buf);
  weftCommDestroy(comm);
  return wrong != 0;
}
