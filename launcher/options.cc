#include "launcher/options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>

#include "weft/config.h"

namespace weft::launcher {
namespace {

int parse_slots(const std::string& text, const std::string& where) {
  try {
    size_t used = 0;
    int n = std::stoi(text, &used);
    if (used == text.size() && n > 0) return n;
  } catch (...) {
  }
  throw UsageError{"bad slot count '" + text + "' in " + where};
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) throw UsageError{"empty host name in -H '" + text + "'"};
    HostSlots h;
    size_t colon = item.rfind(':');
    h.host = item.substr(0, colon);
    if (colon != std::string::npos) h.slots = parse_slots(item.substr(colon + 1), "-H '" + text + "'");
    if (h.host.empty()) throw UsageError{"empty host name in -H '" + text + "'"};
    out.push_back(h);
  }
  if (out.empty()) throw UsageError{"-H needs at least one host"};
  return out;
}

std::vector<HostSlots> parse_hostfile_text(const std::string& text) {
  std::vector<HostSlots> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::stringstream ls(line);
    std::string word;
    ls >> word;
    HostSlots h;
    size_t colon = word.rfind(':');
    h.host = word.substr(0, colon);
    if (colon != std::string::npos) h.slots = parse_slots(word.substr(colon + 1), "hostfile line '" + line + "'");
    while (ls >> word) {
      if (word.rfind("slots=", 0) == 0) h.slots = parse_slots(word.substr(6), "hostfile line '" + line + "'");
    }
    out.push_back(h);
  }
  return out;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return false;
  std::string self = name;
  std::string self_short = self.substr(0, self.find('.'));
  return host == self || host == self_short;
}

std::optional<LaunchOptions> parse_command_line(int argc, const char* const* argv) {
  // CLI11 has no multi-letter single-dash options: spell mpirun's "-np" as "--np" for it. The
  // program's own arguments are taken from the original argv (they are a suffix of it).
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-np") a = "--np";
    else if (a.rfind("-np=", 0) == 0) a = "-" + a;
    args.push_back(a);
  }
  LaunchOptions o;
  std::string mpi = "auto", bind = "auto";
  std::vector<std::string> env;
  CLI::App app{"weftrun: start a Weft job on this machine, or on many through MPI"};
  app.set_version_flag("--version", std::string("weftrun ") + WEFT_VERSION_STRING);
  app.name("weftrun");
  app.footer("usage: weftrun -np N [options] [--] program [args...]   (-np is --np; docs/LAUNCHING.md)");
  app.prefix_command();
  app.add_option("-n,--np", o.np, "number of ranks")->required();
  app.add_option("-H,--host", o.host_arg, "hosts: host[:slots],... (localhost only: run locally)");
  app.add_option("--hostfile", o.hostfile, "hostfile (Open MPI 'host slots=N' or MPICH 'host:N')");
  app.add_option("--mpi", mpi, "auto|openmpi|mpich|none (auto: MPI only for remote hosts)");
  app.add_option("--mpirun", o.mpirun, "the MPI launcher to run (default: mpirun/mpiexec on PATH)");
  app.add_option("--bind", bind, "none|numa|gpu|cores|auto (auto: gpu if GPUs, numa if >1 NUMA node, cores if the ranks fit on the CPUs)");
  app.add_option("-x", env, "pass VAR (from this environment) or set VAR=VALUE in every rank")
      ->allow_extra_args(false);
  app.add_option("--timeout", o.timeout_s, "stop the job after this many seconds");
  app.add_option("--timeline", o.timeline, "per-rank timeline path (%r or {rank} = rank; else suffixed)");
  app.add_flag("--tag-output", o.tag_output, "prefix every output line with [rank]");
  app.add_flag("--keep-going", o.keep_going,
               "when a rank dies, report it and keep the others running (weftCommShrink); exit 75 if the others finish");
  app.add_flag("--dry-run", o.dry_run, "print what would be run and exit");
  app.add_flag("--verbose", o.verbose, "explain decisions and bindings on stderr");
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::CallForVersion&) {
    std::cout << "weftrun " << WEFT_VERSION_STRING << "\n";
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw UsageError{e.what()};
  }
  size_t rest = app.remaining_size();
  for (size_t i = static_cast<size_t>(argc) - rest; i < static_cast<size_t>(argc); ++i) o.program.push_back(argv[i]);
  if (!o.program.empty() && o.program.front() == "--") o.program.erase(o.program.begin());
  if (o.program.empty()) throw UsageError{"no program to run: weftrun -np N [options] [--] program [args...]"};
  if (o.np <= 0) throw UsageError{"-np must be at least 1 (got " + std::to_string(o.np) + ")"};
  if (mpi == "auto") o.mpi = MpiChoice::kAuto;
  else if (mpi == "openmpi") o.mpi = MpiChoice::kOpenMpi;
  else if (mpi == "mpich") o.mpi = MpiChoice::kMpich;
  else if (mpi == "none") o.mpi = MpiChoice::kNone;
  else throw UsageError{"--mpi must be auto, openmpi, mpich or none (got '" + mpi + "')"};
  auto b = parse_bind_mode(bind);
  if (!b) throw UsageError{"--bind must be none, numa, gpu, cores or auto (got '" + bind + "')"};
  o.bind = *b;
  if (o.timeout_s < 0) throw UsageError{"--timeout must not be negative"};
  if (!o.host_arg.empty() && !o.hostfile.empty()) throw UsageError{"give -H or --hostfile, not both"};
  if (!o.host_arg.empty()) o.hosts = parse_host_list(o.host_arg);
  if (!o.hostfile.empty()) {
    std::ifstream in(o.hostfile);
    if (!in) throw UsageError{"cannot read hostfile '" + o.hostfile + "'"};
    std::stringstream ss;
    ss << in.rdbuf();
    o.hosts = parse_hostfile_text(ss.str());
    if (o.hosts.empty()) throw UsageError{"hostfile '" + o.hostfile + "' names no host"};
  }
  for (const std::string& e : env) {
    size_t eq = e.find('=');
    std::string name = e.substr(0, eq);
    if (!valid_env_name(name)) throw UsageError{"-x '" + e + "': not a variable name"};
    if (eq == std::string::npos) o.env.emplace_back(name, std::nullopt);
    else o.env.emplace_back(name, e.substr(eq + 1));
  }
  return o;
}

}  // namespace weft::launcher

namespace weft::launcher {

std::string timeline_for_rank(const std::string& path, int rank) {
  std::string r = rank < 0 ? "%r" : std::to_string(rank);
  std::string out = path;
  bool replaced = false;
  for (const std::string ph : {"{rank}", "%r"}) {
    if (ph == r) continue;
    for (size_t p; (p = out.find(ph)) != std::string::npos;) {
      out.replace(p, ph.size(), r);
      replaced = true;
    }
  }
  if (replaced || (rank < 0 && out.find("%r") != std::string::npos)) return out;
  size_t slash = out.rfind('/');
  size_t dot = out.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1)) {
    return out + "." + r;
  }
  return out.substr(0, dot) + "." + r + out.substr(dot);
}

}  // namespace weft::launcher
