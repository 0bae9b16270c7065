#include "launcher/local_job.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>

#include "launcher/doctor.h"
#include "launcher/mpi_command.h"
#include "launcher/spawner.h"
#include "runtime/base/error.h"
#include "runtime/comm/membership.h"
#include "runtime/store/tcp_store.h"

extern char** environ;

namespace weft::launcher {

std::string generate_job_secret() {
  unsigned char bytes[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open(/dev/urandom)");
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::read(fd, bytes + got, sizeof bytes - got);
    if (n <= 0) {
      ::close(fd);
      fail_errno("read(/dev/urandom)");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

namespace {

// A port free on 127.0.0.1 now (the kernel's pick; torchrun does the same).
std::string free_local_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail_errno("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    fail_errno("bind(127.0.0.1:0)");
  }
  ::close(fd);
  return std::to_string(ntohs(a.sin_port));
}

// The variables weftrun sets for one rank, in the order it prints them.
std::vector<std::pair<std::string, std::string>> rank_vars(const LaunchOptions& o, int rank, const RankBinding& b,
                                                           const std::string& port, const std::string& secret,
                                                           const std::string& torch_port) {
  std::vector<std::pair<std::string, std::string>> v{
      {"WEFT_RANK", std::to_string(rank)},      {"WEFT_WORLD_SIZE", std::to_string(o.np)},
      {"WEFT_LOCAL_RANK", std::to_string(rank)}, {"WEFT_LOCAL_SIZE", std::to_string(o.np)},
      {"WEFT_MASTER_ADDR", "127.0.0.1"},        {"WEFT_MASTER_PORT", port},
      {"WEFT_JOB_SECRET", secret},              {"WEFT_STORE_EXTERNAL", "1"}};
  // torch.distributed's env:// variables, as torchrun sets them, so that init_process_group("weft")
  // needs nothing by hand under weftrun; MASTER_ADDR / MASTER_PORT the user set are kept.
  v.emplace_back("RANK", std::to_string(rank));
  v.emplace_back("WORLD_SIZE", std::to_string(o.np));
  v.emplace_back("LOCAL_RANK", std::to_string(rank));
  v.emplace_back("LOCAL_WORLD_SIZE", std::to_string(o.np));
  if (!std::getenv("MASTER_ADDR")) v.emplace_back("MASTER_ADDR", "127.0.0.1");
  if (!std::getenv("MASTER_PORT")) v.emplace_back("MASTER_PORT", torch_port);
  if (!o.timeline.empty()) v.emplace_back("WEFT_TIMELINE", timeline_for_rank(o.timeline, rank));
  if (!b.cuda_device.empty()) {
    v.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    v.emplace_back("CUDA_VISIBLE_DEVICES", b.cuda_device);
  }
  if (!b.nic.empty()) v.emplace_back("UCX_NET_DEVICES", b.nic);
  for (const auto& [name, value] : o.env) {
    if (value) v.emplace_back(name, *value);  // -x NAME alone: already inherited
  }
  return v;
}

}  // namespace

int run_local(const LaunchOptions& o, const NodeTopology& topo) {
  std::string path = find_on_path(o.program.front());
  if (path.empty() && !o.dry_run) {
    std::cerr << "weftrun: cannot find program '" << o.program.front() << "'\n";
    return 127;
  }
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<RankBinding> bindings =
      plan_binding(o.bind, topo, o.np, cvd ? std::optional<std::string>(cvd) : std::nullopt);
  if (o.verbose) {
    std::cerr << "weftrun: binding " << bind_mode_name(resolve_bind_mode(o.bind, topo, o.np)) << " (" << topo.numa.size()
              << " NUMA node(s), " << topo.gpus.size() << " GPU(s), " << topo.nics.size() << " RDMA NIC(s))\n";
    for (int r = 0; r < o.np; ++r) std::cerr << "weftrun: rank " << r << ": " << bindings[r].explanation << "\n";
  }
  if (o.dry_run) {
    for (int r = 0; r < o.np; ++r) {
      std::vector<std::string> words;
      for (auto& [name, value] : rank_vars(o, r, bindings[r], "<ephemeral>", "<generated>", "<ephemeral>")) {
        words.push_back(name + "=" + value);
      }
      words.insert(words.end(), o.program.begin(), o.program.end());
      std::cout << shell_join(words);
      if (!bindings[r].cpus.empty()) std::cout << "  # CPUs " << format_cpu_list(bindings[r].cpus);
      std::cout << "\n";
    }
    return 0;
  }

  std::string secret = generate_job_secret();
  TcpStoreServer server(secret, "127.0.0.1", 0);
  if (o.verbose) std::cerr << "weftrun: store at 127.0.0.1:" << server.port() << "\n";
  const std::string torch_port = free_local_port();  // torch's own TCPStore (MASTER_PORT)

  // The inherited environment, less anything weftrun decides per rank.
  std::map<std::string, std::string> base;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    if (is_job_identity_var(name) || name == "WEFT_TIMELINE") continue;
    base[name] = kv.substr(eq + 1);
  }
  std::vector<ProcessSpec> procs;
  bool stdin_is_tty = ::isatty(STDIN_FILENO);
  for (int r = 0; r < o.np; ++r) {
    std::map<std::string, std::string> env = base;
    for (auto& [name, value] : rank_vars(o, r, bindings[r], std::to_string(server.port()), secret, torch_port)) env[name] = value;
    ProcessSpec p;
    p.label = "rank " + std::to_string(r);
    p.tag = "[" + std::to_string(r) + "] ";
    p.path = path;
    p.argv = o.program;
    for (auto& [name, value] : env) p.env.push_back(name + "=" + value);
    p.cpus = bindings[r].cpus;
    p.inherit_stdin = r == 0 && !stdin_is_tty;  // a pipe goes to rank 0; a terminal to nobody
    procs.push_back(std::move(p));
  }
  SuperviseOptions so;
  so.tag_output = o.tag_output;
  so.timeout_s = o.timeout_s;
  so.verbose = o.verbose;
  so.keep_going = o.keep_going;
  if (!o.dump_dir.empty()) so.dump_signal = SIGUSR1;
  std::vector<int> statuses;
  so.statuses = &statuses;
  // The ranks waiting for one that never joins learn from the store whether its process ended.
  TcpStore notes("127.0.0.1", server.port(), secret, Millis(10000));
  notes.set(kWeftrunSupervisedKey, to_bytes("1"));
  so.on_exit = [&](size_t r, int status) {
    try {
      notes.set(kWeftrunExitKey + std::to_string(r), to_bytes(describe_exit(status)));
    } catch (const std::exception&) {
      // The store is going (weftrun is stopping): nobody is left to ask.
    }
  };
  int rc = supervise(procs, so);
  server.stop();
  std::error_code ec;
  if (rc != 0 && !o.dump_dir.empty() && std::filesystem::is_directory(o.dump_dir, ec)) {
    // For weft-doctor: a rank without a dump may have exited normally (a call short), not died.
    std::map<int, std::string> exits;
    for (size_t r = 0; r < statuses.size(); ++r)
      if (statuses[r] >= 0) exits[static_cast<int>(r)] = describe_exit(statuses[r]);
    write_exits(o.dump_dir, exits);
  }
  return rc;
}

}  // namespace weft::launcher
