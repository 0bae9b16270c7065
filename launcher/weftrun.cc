// weftrun: launch a Weft job. See docs/LAUNCHING.md.
#include <unistd.h>

#include <iostream>

#include "launcher/local_job.h"
#include "launcher/mpi_command.h"
#include "launcher/node_topology.h"
#include "launcher/options.h"
#include "launcher/spawner.h"
#include "runtime/base/error.h"

extern char** environ;

using namespace weft::launcher;

namespace {

int run_mpi(const LaunchOptions& o, const LaunchPlan& plan, const NodeTopology& topo) {
  MpiContext ctx;
  ctx.as_root = ::geteuid() == 0;
  ctx.local_cores = topo.cores > 0 ? topo.cores : 1;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("WEFT_", 0) == 0 && !weft::launcher::is_job_identity_var(name) && name != "WEFT_TIMELINE") {
      ctx.forward.push_back(name);
    }
  }
  std::vector<std::string> cmd = build_mpi_command(o, plan.flavor, plan.mpirun, ctx);
  if (o.dry_run) {
    std::cout << shell_join(cmd) << "\n";
    return 0;
  }
  if (o.verbose) std::cerr << "weftrun: " << shell_join(cmd) << "\n";
  ProcessSpec p;
  p.label = plan.mpirun;
  p.path = find_on_path(plan.mpirun);
  p.argv = cmd;
  for (char** e = environ; *e; ++e) p.env.push_back(*e);
  p.inherit_stdin = true;  // mpirun forwards stdin to rank 0 itself
  SuperviseOptions so;
  so.timeout_s = o.timeout_s;
  so.verbose = o.verbose;
  so.grace = std::chrono::milliseconds(10000);  // mpirun needs time to tear down remote daemons
  return supervise({p}, so);
}

}  // namespace

int main(int argc, char** argv) {
  block_job_signals();  // before any thread (the store server) exists
  try {
    auto opts = parse_command_line(argc, argv);
    if (!opts) return 0;
    LaunchPlan plan = decide_launch(*opts);
    if (opts->verbose) std::cerr << "weftrun: " << plan.reason << "\n";
    NodeTopology topo = probe_node_topology();
    return plan.use_mpi ? run_mpi(*opts, plan, topo) : run_local(*opts, topo);
  } catch (const UsageError& e) {
    std::cerr << "weftrun: " << e.message << "\nusage: weftrun -np N [options] [--] program [args...]"
              << " (weftrun --help)\n";
    return 2;
  } catch (const weft::Error& e) {
    std::cerr << "weftrun: " << e.what() << "\n";
    return e.code() == weft::ErrorCode::kInvalidUsage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "weftrun: " << e.what() << "\n";
    return 1;
  }
}
