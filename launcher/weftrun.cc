// weftrun: launch a Weft job. See docs/LAUNCHING.md.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "launcher/job_store.h"
#include "launcher/doctor.h"
#include "launcher/local_job.h"
#include "launcher/mpi_command.h"
#include "launcher/node_topology.h"
#include "launcher/options.h"
#include "launcher/spawner.h"
#include "runtime/base/error.h"
#include "runtime/bootstrap/bootstrap.h"

extern char** environ;

using namespace weft::launcher;

namespace {

// The store's variables, set for the MPI launcher and forwarded by name (the secret never
// appears on a command line).
const char* const kStoreVars[] = {"WEFT_MASTER_ADDR", "WEFT_MASTER_PORT", "WEFT_JOB_SECRET", "WEFT_STORE_EXTERNAL"};

int run_mpi(const LaunchOptions& o, const LaunchPlan& plan, const NodeTopology& topo) {
  MpiContext ctx;
  ctx.as_root = ::geteuid() == 0;
  ctx.local_cores = topo.cores > 0 ? topo.cores : 1;
  ctx.keep_going = o.keep_going;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("WEFT_", 0) == 0 && !weft::launcher::is_job_identity_var(name) && name != "WEFT_TIMELINE") {
      ctx.forward.push_back(name);
    }
  }
  ctx.forward.insert(ctx.forward.end(), std::begin(kStoreVars), std::end(kStoreVars));
  std::vector<std::string> cmd = build_mpi_command(o, plan.flavor, plan.mpirun, ctx);
  if (o.dry_run) {
    std::cout << shell_join(cmd) << "\n";
    return 0;
  }
  if (o.verbose) std::cerr << "weftrun: " << shell_join(cmd) << "\n";
  // weftrun serves the job's store itself (docs/LAUNCHING.md): on loopback when every host is
  // this machine, else on every interface, published as WEFT_SOCKET_IFNAME's address.
  bool all_local = true;
  for (const HostSlots& h : o.hosts) all_local = all_local && is_local_host(h.host);
  JobStore store(all_local ? "127.0.0.1" : "0.0.0.0", o.keep_going);
  const std::string addr = all_local ? "127.0.0.1" : weft::local_address(weft::process_env());
  if (o.verbose) std::cerr << "weftrun: store at " << addr << ":" << store.port() << "\n";
  ProcessSpec p;
  p.label = plan.mpirun;
  p.path = find_on_path(plan.mpirun);
  p.argv = cmd;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!is_job_identity_var(kv.substr(0, kv.find('=')))) p.env.push_back(kv);
  }
  for (const std::string& kv : {"WEFT_MASTER_ADDR=" + addr, "WEFT_MASTER_PORT=" + std::to_string(store.port()),
                                "WEFT_JOB_SECRET=" + store.secret(), std::string("WEFT_STORE_EXTERNAL=1")})
    p.env.push_back(kv);
  p.inherit_stdin = true;  // mpirun forwards stdin to rank 0 itself
  SuperviseOptions so;
  so.timeout_s = o.timeout_s;
  so.verbose = o.verbose;
  so.grace = std::chrono::milliseconds(10000);  // mpirun needs time to tear down remote daemons
  int rc = supervise({p}, so);
  // Asked to keep going, mpirun exits 0 even when ranks died: the store's notices tell.
  const std::vector<std::string> deaths = store.deaths();
  if (o.keep_going && !deaths.empty() && rc == 0) {
    std::string names;
    for (const std::string& d : deaths) names += (names.empty() ? "" : "; ") + d;
    std::cerr << "weftrun: --keep-going: the job finished; lost: " << names << "; exit status " << kFinishedWithLostRanks << "\n";
    rc = kFinishedWithLostRanks;
  }
  return rc;
}

// Where the ranks' flight recorders go: WEFT_DUMP_DIR, else a folder of this job's own (set in
// weftrun's environment, so that local ranks inherit it and mpirun forwards it). "" when off.
std::string prepare_dump_dir() {
  const char* buffer = std::getenv("WEFT_TRACE_BUFFER");
  if (buffer && std::string(buffer) == "0") return "";
  if (const char* d = std::getenv("WEFT_DUMP_DIR"); d && *d) return d;
  const std::string dir = "/tmp/weft-dumps/weftrun-" + std::to_string(::getpid());
  ::setenv("WEFT_DUMP_DIR", dir.c_str(), 1);
  return dir;
}

// After a failed job: what weft-doctor finds in the dumps this job wrote.
void run_doctor(const std::string& dir, double since) {
  try {
    auto report = diagnose_dir(dir, since);
    std::cerr << "weftrun: weft-doctor " << dir << ":\n";
    std::string text = doctor_text(report), line;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '\n') {
        line += text[i];
        continue;
      }
      std::cerr << "weftrun:   " << line << "\n";
      line.clear();
    }
  } catch (const std::exception&) {
    // No dump this job (a program that is not a Weft job, or ranks that died first): nothing to say.
  }
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
    if (!opts->dry_run) opts->dump_dir = prepare_dump_dir();
    const double started =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - 1.0;
    const int rc = plan.use_mpi ? run_mpi(*opts, plan, topo) : run_local(*opts, topo);
    if (rc != 0 && !opts->dump_dir.empty()) run_doctor(opts->dump_dir, started);
    return rc;
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
