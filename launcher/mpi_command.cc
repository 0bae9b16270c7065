#include "launcher/mpi_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace weft::launcher {

const char* mpi_flavor_name(MpiFlavor f) { return f == MpiFlavor::kOpenMpi ? "Open MPI" : "MPICH/Hydra"; }

std::string find_on_path(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(p)) return p;
  }
  return "";
}

std::optional<MpiFlavor> detect_mpi_flavor(const std::string& program) {
  std::string cmd = shell_quote(program) + " --version 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return std::nullopt;
  std::string text;
  std::array<char, 512> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), f)) text.append(buf.data(), n);
  ::pclose(f);
  if (text.find("Open MPI") != std::string::npos || text.find("OpenRTE") != std::string::npos) {
    return MpiFlavor::kOpenMpi;
  }
  if (text.find("HYDRA") != std::string::npos) return MpiFlavor::kMpich;
  return std::nullopt;
}

LaunchPlan decide_launch(const LaunchOptions& o) {
  LaunchPlan plan;
  std::string remote;
  for (const HostSlots& h : o.hosts) {
    if (!is_local_host(h.host)) {
      remote = h.host;
      break;
    }
  }
  if (o.mpi == MpiChoice::kNone) {
    if (!remote.empty()) {
      throw UsageError{"--mpi none launches on this machine only, but host '" + remote + "' is remote"};
    }
    plan.reason = "--mpi none: weftrun starts the ranks itself on this machine";
    return plan;
  }
  if (o.mpi == MpiChoice::kAuto && remote.empty()) {
    plan.reason = "--mpi auto and every host is this machine: weftrun starts the ranks itself";
    return plan;
  }
  plan.use_mpi = true;
  if (o.mpi == MpiChoice::kOpenMpi || o.mpi == MpiChoice::kMpich) {
    plan.flavor = o.mpi == MpiChoice::kOpenMpi ? MpiFlavor::kOpenMpi : MpiFlavor::kMpich;
    std::string name = !o.mpirun.empty() ? o.mpirun : plan.flavor == MpiFlavor::kOpenMpi ? "mpirun" : "mpiexec";
    std::string found = find_on_path(name);
    if (found.empty() && !o.dry_run) throw UsageError{"--mpi: cannot find '" + name + "' (use --mpirun PATH)"};
    plan.mpirun = name;  // as given: the printed command stays portable; exec searches PATH
    plan.reason = std::string("--mpi ") + (plan.flavor == MpiFlavor::kOpenMpi ? "openmpi" : "mpich") +
                  ": launching through " + (found.empty() ? name : found);
    return plan;
  }
  // auto with a remote host: find and recognise an MPI launcher.
  std::vector<std::string> names = o.mpirun.empty() ? std::vector<std::string>{"mpirun", "mpiexec"}
                                                     : std::vector<std::string>{o.mpirun};
  for (const std::string& name : names) {
    std::string found = find_on_path(name);
    if (found.empty()) continue;
    auto flavor = detect_mpi_flavor(found);
    if (!flavor) {
      throw UsageError{"'" + found + "' is neither Open MPI nor MPICH/Hydra; say which with --mpi openmpi|mpich"};
    }
    plan.flavor = *flavor;
    plan.mpirun = name;
    plan.reason = "--mpi auto and host '" + remote + "' is remote: launching through " + found + " (" +
                  mpi_flavor_name(*flavor) + ")";
    return plan;
  }
  throw UsageError{"host '" + remote + "' is remote, which needs MPI, but no mpirun or mpiexec is on PATH"};
}

bool is_job_identity_var(const std::string& n) {
  static const char* const kNames[] = {"WEFT_RANK",        "WEFT_WORLD_SIZE",  "WEFT_LOCAL_RANK",
                                       "WEFT_LOCAL_SIZE",  "WEFT_MASTER_ADDR", "WEFT_MASTER_PORT",
                                       "WEFT_JOB_SECRET",  "WEFT_STORE_EXTERNAL", "WEFT_NODE_ID"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

std::vector<std::string> build_mpi_command(const LaunchOptions& o, MpiFlavor flavor, const std::string& mpirun,
                                           const MpiContext& ctx) {
  // What every rank gets: forwarded settings, the timeline template, then -x in order.
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  for (const std::string& n : ctx.forward) env.emplace_back(n, std::nullopt);
  if (!o.timeline.empty()) env.emplace_back("WEFT_TIMELINE", timeline_for_rank(o.timeline, -1));
  for (const auto& e : o.env) env.push_back(e);

  int slots = 0;  // known slots; 0: unknown (hostfile without counts)
  if (o.hosts.empty()) {
    slots = ctx.local_cores;
  } else {
    for (const HostSlots& h : o.hosts) {
      if (h.slots == 0 && !o.hostfile.empty()) {
        slots = 0;
        break;
      }
      slots += h.slots > 0 ? h.slots : 1;
    }
  }
  bool oversubscribed = slots > 0 && o.np > slots;
  BindMode bind = o.bind == BindMode::kAuto ? (oversubscribed ? BindMode::kNone : BindMode::kNuma) : o.bind;

  std::vector<std::string> cmd{mpirun};
  if (flavor == MpiFlavor::kOpenMpi) {
    if (ctx.as_root) cmd.push_back("--allow-run-as-root");
    cmd.insert(cmd.end(), {"-np", std::to_string(o.np)});
    if (!o.host_arg.empty()) cmd.insert(cmd.end(), {"-H", o.host_arg});
    if (!o.hostfile.empty()) cmd.insert(cmd.end(), {"--hostfile", o.hostfile});
    if (oversubscribed) cmd.push_back("--oversubscribe");
    if (bind == BindMode::kNone) {
      cmd.insert(cmd.end(), {"--bind-to", "none"});
    } else if (bind == BindMode::kCores) {
      cmd.insert(cmd.end(), {"--map-by", "core", "--bind-to", oversubscribed ? "core:overload-allowed" : "core"});
    } else {  // numa and gpu: each rank on a NUMA node; the library picks the GPU by local rank
      cmd.insert(cmd.end(), {"--map-by", "numa", "--bind-to", oversubscribed ? "numa:overload-allowed" : "numa"});
    }
    if (o.tag_output) cmd.push_back("--tag-output");
    if (ctx.keep_going) cmd.push_back("--enable-recovery");
    for (const auto& [name, value] : env) cmd.insert(cmd.end(), {"-x", value ? name + "=" + *value : name});
  } else {
    cmd.insert(cmd.end(), {"-n", std::to_string(o.np)});
    std::string by_name;
    for (const auto& [name, value] : env) {
      if (value) {
        cmd.insert(cmd.end(), {"-genv", name, *value});
      } else {
        by_name += (by_name.empty() ? "" : ",") + name;
      }
    }
    if (!by_name.empty()) cmd.insert(cmd.end(), {"-genvlist", by_name});
    if (!o.host_arg.empty()) cmd.insert(cmd.end(), {"-hosts", o.host_arg});
    if (!o.hostfile.empty()) cmd.insert(cmd.end(), {"-f", o.hostfile});
    if (bind != BindMode::kNone) cmd.insert(cmd.end(), {"-bind-to", bind == BindMode::kCores ? "core" : "numa"});
    if (o.tag_output) cmd.push_back("-prepend-rank");
    if (ctx.keep_going) cmd.push_back("-disable-auto-cleanup");
  }
  cmd.insert(cmd.end(), o.program.begin(), o.program.end());
  return cmd;
}

std::string shell_quote(const std::string& w) {
  if (w.empty()) return "''";
  bool safe = true;
  for (char c : w) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./:=,@%+^").find(c) != std::string::npos)) {
      safe = false;
      break;
    }
  }
  if (safe) return w;
  std::string out = "'";
  for (char c : w) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

}  // namespace weft::launcher
