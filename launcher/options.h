// weftrun's command line: what the user asked for, validated, before anything is decided.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/binding.h"

namespace weft::launcher {

enum class MpiChoice { kAuto, kOpenMpi, kMpich, kNone };

struct HostSlots {
  std::string host;
  int slots = 0;  // 0: not given
};

struct LaunchOptions {
  int np = 0;
  std::vector<HostSlots> hosts;  // from -H or --hostfile
  std::string host_arg;          // -H exactly as given
  std::string hostfile;          // --hostfile path
  MpiChoice mpi = MpiChoice::kAuto;
  std::string mpirun;            // --mpirun: the MPI launcher to run (default: found on PATH)
  BindMode bind = BindMode::kAuto;
  std::vector<std::pair<std::string, std::optional<std::string>>> env;  // -x VAR[=VALUE]
  double timeout_s = 0;          // 0: none
  std::string timeline;
  bool tag_output = false, dry_run = false, verbose = false;
  bool keep_going = false;       // --keep-going: a rank's death does not stop the others
  std::vector<std::string> program;  // program and its arguments
  // Set by weftrun (not the command line): where the ranks write their flight recorder dumps
  // (WEFT_DUMP_DIR; "" when WEFT_TRACE_BUFFER=0). A failed local job's ranks get SIGUSR1 first.
  std::string dump_dir;
};

// Bad usage: main prints the message and exits 2.
struct UsageError {
  std::string message;
};

// Parses argv. Returns nullopt when --help or --version was printed (exit 0). Throws UsageError.
std::optional<LaunchOptions> parse_command_line(int argc, const char* const* argv);

// "a:2,b,c:4" -> hosts. Throws UsageError.
std::vector<HostSlots> parse_host_list(const std::string& text);
// Open MPI ("host slots=N") and MPICH ("host:N") hostfiles; '#' comments. Throws UsageError.
std::vector<HostSlots> parse_hostfile_text(const std::string& text);
// localhost, 127.x, ::1, this machine's hostname (short or full).
bool is_local_host(const std::string& host);

}  // namespace weft::launcher

namespace weft::launcher {

// --timeline PATH for one rank: "%r" or "{rank}" replaced by the rank, else ".<rank>" inserted
// before the extension ("trace.json" -> "trace.3.json"). rank < 0 gives the template with "%r"
// (what MPI ranks get: the library substitutes its rank).
std::string timeline_for_rank(const std::string& path, int rank);

}  // namespace weft::launcher
