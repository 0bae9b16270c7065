// Deciding between MPI and local launch, and translating weftrun's options into an Open MPI
// (mpirun) or MPICH/Hydra (mpiexec) command line.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/options.h"

namespace weft::launcher {

enum class MpiFlavor { kOpenMpi, kMpich };
const char* mpi_flavor_name(MpiFlavor f);

// Full path of an executable found on PATH (or name itself when it contains '/'); "" if none.
std::string find_on_path(const std::string& name);
// Runs `program --version`: "Open MPI"/"OpenRTE" -> Open MPI, "HYDRA" -> MPICH; else nullopt.
std::optional<MpiFlavor> detect_mpi_flavor(const std::string& program);

struct LaunchPlan {
  bool use_mpi = false;
  MpiFlavor flavor = MpiFlavor::kOpenMpi;
  std::string mpirun;  // the program to run when use_mpi
  std::string reason;  // one line for --verbose
};

// The auto rule: MPI when --mpi openmpi|mpich is explicit, or when --mpi auto and some host is
// not this machine (then mpirun/mpiexec must be on PATH and recognised). Otherwise local. Throws
// UsageError when the request cannot be met (remote hosts with --mpi none, no MPI launcher).
LaunchPlan decide_launch(const LaunchOptions& o);

struct MpiContext {
  bool as_root = false;
  int local_cores = 1;  // slots when no host is given
  // Variables forwarded by name from weftrun's environment (WEFT_* settings, and the store's
  // address and secret that weftrun sets for the launcher), in order.
  std::vector<std::string> forward;
  // --keep-going: the launcher must not tear the job down when a rank dies (Open MPI
  // --enable-recovery, MPICH -disable-auto-cleanup).
  bool keep_going = false;
};

// The job identity variables weftrun sets itself; never forwarded from its own environment.
bool is_job_identity_var(const std::string& name);

// The whole command, argv[0] first.
std::vector<std::string> build_mpi_command(const LaunchOptions& o, MpiFlavor flavor, const std::string& mpirun,
                                           const MpiContext& ctx);

// POSIX shell quoting: bare when safe, else single-quoted.
std::string shell_quote(const std::string& word);
std::string shell_join(const std::vector<std::string>& words);

}  // namespace weft::launcher
