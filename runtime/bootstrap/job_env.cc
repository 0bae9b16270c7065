#include "runtime/bootstrap/job_env.h"

#include "runtime/base/error.h"

namespace weft {

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::kWeft: return "weft";
    case Launcher::kOpenMpi: return "Open MPI";
    case Launcher::kMpich: return "MPICH/Hydra";
    case Launcher::kSlurm: return "Slurm";
    case Launcher::kTorchrun: return "torchrun";
  }
  return "?";
}

namespace {

struct Names {
  Launcher launcher;
  const char *rank, *size, *local_rank, *local_size;
};

constexpr Names kLaunchers[] = {
    {Launcher::kWeft, "WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE"},
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::kMpich, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

}  // namespace

JobInfo detect_job(const EnvLookup& env) {
  JobInfo job;
  const Names* found = nullptr;
  for (const Names& n : kLaunchers) {
    if (env(n.rank) || env(n.size)) {
      found = &n;
      break;
    }
  }
  if (!found) {
    fail(ErrorCode::kInvalidArgument,
         "the environment does not describe a job: no rank variable was found (WEFT_RANK, OMPI_COMM_WORLD_RANK, "
         "PMI_RANK, SLURM_PROCID or RANK). Launch with weftrun or mpirun, or set WEFT_RANK, WEFT_WORLD_SIZE, "
         "WEFT_MASTER_ADDR, WEFT_MASTER_PORT and WEFT_JOB_SECRET");
  }
  job.launcher = found->launcher;
  // Set but empty counts as missing (env_int would return its fallback, -1, unchecked).
  auto given = [&](const char* name) {
    auto v = env(name);
    return v && !v->empty();
  };
  if (!given(found->size)) fail(ErrorCode::kInvalidArgument, "{} is set but {} is not (or is empty)", found->rank, found->size);
  if (!given(found->rank)) fail(ErrorCode::kInvalidArgument, "{} is set but {} is not (or is empty)", found->size, found->rank);
  job.size = static_cast<int>(env_int(env, found->size, -1, 1, 1 << 24));
  job.rank = static_cast<int>(env_int(env, found->rank, -1, 0, job.size - 1));
  if (found->local_rank) job.local_rank = static_cast<int>(env_int(env, found->local_rank, -1, 0, job.size - 1));
  if (found->local_size) job.local_size = static_cast<int>(env_int(env, found->local_size, -1, 1, job.size));
  if (job.local_rank >= 0 && job.local_size > 0 && job.local_rank >= job.local_size) {
    fail(ErrorCode::kInvalidArgument, "{}={} is not below {}={}", found->local_rank, job.local_rank, found->local_size,
         job.local_size);
  }

  auto addr = env("WEFT_MASTER_ADDR");
  auto port_name = "WEFT_MASTER_PORT";
  if (!addr && job.launcher == Launcher::kTorchrun) {
    addr = env("MASTER_ADDR");
    port_name = "MASTER_PORT";
  }
  if (addr && !addr->empty()) {
    job.master_addr = *addr;
    if (!given(port_name)) fail(ErrorCode::kInvalidArgument, "WEFT_MASTER_ADDR is set but {} is not (or is empty)", port_name);
    job.master_port = static_cast<int>(env_int(env, port_name, -1, 1, 65535));
  } else if (env(port_name)) {
    job.master_port = static_cast<int>(env_int(env, port_name, -1, 1, 65535));
  }
  if (auto s = env("WEFT_JOB_SECRET")) job.secret = *s;
  if (auto e = env("WEFT_STORE_EXTERNAL")) job.store_external = *e == "1";
  if (auto n = env("WEFT_NODE_ID")) job.node_id = *n;
  return job;
}

}  // namespace weft
