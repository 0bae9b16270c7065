// A one-rank world from WEFT_* variables (a store on a random local port), for the GPU tests and
// weft-gpu-check. No launcher needed.
#pragma once
#include <unistd.h>
#include <weft/weft.h>

#include "tests/support/spawn.h"

#include <cstdlib>
#include <random>
#include <string>

namespace weft::test {

inline weftResult_t init_one_rank(weftComm_t* comm, int timeout_ms = 60000) {
  setenv("WEFT_RANK", "0", 1);
  setenv("WEFT_WORLD_SIZE", "1", 1);
  setenv("WEFT_MASTER_ADDR", "127.0.0.1", 1);
  setenv("WEFT_MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  setenv("WEFT_JOB_SECRET", "gpu-test", 1);
  setenv("WEFT_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
  return weftCommInitFromEnv(comm);
}

}  // namespace weft::test
