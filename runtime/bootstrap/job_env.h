// Who am I in the job? Rank, world size, local rank and where the store is, read from whatever
// launched the process: weftrun / plain WEFT_* variables, Open MPI, MPICH (Hydra), Slurm, or
// torchrun-style RANK/WORLD_SIZE/MASTER_ADDR.
#pragma once
#include <string>

#include "runtime/base/config.h"

namespace weft {

enum class Launcher { kWeft, kOpenMpi, kMpich, kSlurm, kTorchrun };
const char* launcher_name(Launcher l);

struct JobInfo {
  Launcher launcher = Launcher::kWeft;
  int rank = -1, size = -1;
  int local_rank = -1, local_size = -1;  // -1: unknown (derived from node identities)
  std::string master_addr;               // empty: not given (MPI bootstrap may supply it)
  int master_port = -1;
  std::string secret;                    // WEFT_JOB_SECRET
  bool store_external = false;           // WEFT_STORE_EXTERNAL=1: rank 0 does not serve the store
  std::string node_id;                   // WEFT_NODE_ID, or empty (hostname)
};

// Reads the job from env. Throws kInvalidArgument naming what is missing or malformed.
JobInfo detect_job(const EnvLookup& env);

}  // namespace weft
