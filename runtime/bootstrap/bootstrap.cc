#include "runtime/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdio>
#include <fstream>

#include "runtime/bootstrap/job_env.h"
#include "runtime/base/log.h"
#include "runtime/store/tcp_store.h"
#include "runtime/base/secret.h"
#include "weft/config.h"

#if WEFT_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace weft {

std::string local_address(const EnvLookup& env) {
  auto want = env("WEFT_SOCKET_IFNAME");
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "127.0.0.1";
  std::string found;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (want ? *want != i->ifa_name : (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    found = buf;
    break;
  }
  freeifaddrs(ifs);
  if (want && found.empty()) fail(ErrorCode::kInvalidArgument, "WEFT_SOCKET_IFNAME={}: no IPv4 address on that interface", *want);
  return found.empty() ? "127.0.0.1" : found;
}

namespace {

struct MpiBootstrap {
  std::string addr, secret;
  int port = 0;
  std::shared_ptr<TcpStoreServer> server;
  std::function<void()> finalize;
};

#if WEFT_HAVE_MPI
MpiBootstrap bootstrap_through_mpi(const JobInfo& job, const EnvLookup& env) {
  MpiBootstrap out;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) fail(ErrorCode::kSystemError, "MPI_Init failed");
    out.finalize = [] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    };
  }
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (r != job.rank || n != job.size) {
    fail(ErrorCode::kInvalidUsage, "MPI says rank {} of {} but the environment says rank {} of {}", r, n, job.rank, job.size);
  }
  char buf[512] = {};
  if (r == 0) {
    std::string secret = job.secret.empty() ? random_secret() : job.secret;
    out.server = std::make_shared<TcpStoreServer>(secret, "0.0.0.0", job.master_port > 0 ? job.master_port : 0);
    bool all_local = job.local_size == job.size;
    std::string addr = all_local ? "127.0.0.1" : local_address(env);
    std::snprintf(buf, sizeof buf, "%s %d %s", addr.c_str(), out.server->port(), secret.c_str());
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  char addr[256] = {}, secret[200] = {};
  if (std::sscanf(buf, "%255s %d %199s", addr, &out.port, secret) != 3) fail(ErrorCode::kInternalError, "MPI bootstrap: bad record");
  out.addr = addr;
  out.secret = secret;
  return out;
}
#endif

std::atomic<int> g_world_generation{0};

}  // namespace

std::shared_ptr<Communicator> init_world_from_env(const EnvLookup& env) {
  JobInfo job = detect_job(env);
  CommConfig config = CommConfig::from_env(env);
  set_log_rank(job.rank);
  std::shared_ptr<TcpStoreServer> server;
  std::function<void()> on_destroy;
  std::string addr = job.master_addr, secret = job.secret;
  int port = job.master_port;
  if (addr.empty()) {
#if WEFT_HAVE_MPI
    if (job.launcher == Launcher::kOpenMpi) {
      MpiBootstrap mb = bootstrap_through_mpi(job, env);
      addr = mb.addr;
      port = mb.port;
      secret = mb.secret;
      server = mb.server;
      on_destroy = mb.finalize;
    }
#endif
    if (addr.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "{} launched this process (rank {} of {}) but WEFT_MASTER_ADDR and WEFT_MASTER_PORT are not set: set them "
           "to the address of rank 0 and a free port{}",
           launcher_name(job.launcher), job.rank, job.size,
           WEFT_HAVE_MPI ? " (only Open MPI's mpirun can bootstrap without them)" : "");
    }
  }
  if (secret.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "WEFT_JOB_SECRET is not set: every rank must present the job's secret to the store (weftrun and the mpirun "
         "bootstrap generate one; by hand, export the same random string to every rank)");
  }
  if (job.rank == 0 && !job.store_external && !server) {
    server = std::make_shared<TcpStoreServer>(secret, "0.0.0.0", port);
  }
  auto store = std::make_shared<TcpStore>(addr, port, secret, config.timeout);
  CommInit init;
  init.store = std::make_shared<PrefixStore>(store, fmt::format("world{}", g_world_generation++));
  init.rank = job.rank;
  init.size = job.size;
  init.transport = TransportKind::kUcx;
  init.node_id = job.node_id;
  init.config = config;
  init.on_destroy = on_destroy;
  init.keep_alive = server;
  init.world = true;
  init.name = "world";
  try {
    return Communicator::create(std::move(init));
  } catch (...) {
    if (on_destroy) on_destroy();
    throw;
  }
}

}  // namespace weft
