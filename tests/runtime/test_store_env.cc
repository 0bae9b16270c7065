// The store (in memory and over TCP with the job secret) and reading the job from each launcher's
// environment.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "runtime/base/error.h"
#include "runtime/bootstrap/job_env.h"
#include "runtime/store/memory_store.h"
#include "runtime/store/tcp_store.h"

using namespace weft;
using namespace std::chrono_literals;

namespace {

void exercise(Store& a, Store& b) {
  a.set("k", to_bytes("v1"));
  EXPECT_EQ(to_string(b.get("k", 1000ms)), "v1");
  EXPECT_TRUE(b.check("k"));
  EXPECT_FALSE(b.check("absent"));
  EXPECT_EQ(a.add("n", 5), 5);
  EXPECT_EQ(b.add("n", -2), 3);
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    a.set("later", to_bytes("x"));
  });
  b.wait({"k", "later"}, 5000ms);
  late.join();
  try {
    b.get("never", 100ms);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos);
  }
  b.erase("k");
  EXPECT_FALSE(a.check("k"));
  auto all = [&] {
    std::vector<Bytes> out;
    std::thread t([&] { store_all_gather(a, "ag", 0, 2, to_bytes("zero"), 2000ms); });
    out = store_all_gather(b, "ag", 1, 2, to_bytes("one"), 2000ms);
    t.join();
    return out;
  }();
  EXPECT_EQ(to_string(all[0]), "zero");
  EXPECT_EQ(to_string(all[1]), "one");
}

TEST(Store, MemoryStore) {
  MemoryStore s;
  exercise(s, s);
}

TEST(Store, TcpStoreBetweenTwoClients) {
  TcpStoreServer server("s3cret", "127.0.0.1", 0);
  TcpStore a("127.0.0.1", server.port(), "s3cret", 2000ms), b("127.0.0.1", server.port(), "s3cret", 2000ms);
  exercise(a, b);
  PrefixStore pa(std::make_shared<TcpStore>("127.0.0.1", server.port(), "s3cret", 2000ms), "p");
  pa.set("x", to_bytes("1"));
  EXPECT_TRUE(a.check("p/x"));
}

TEST(Store, WrongSecretIsRefused) {
  TcpStoreServer server("right", "127.0.0.1", 0);
  try {
    TcpStore bad("127.0.0.1", server.port(), "wrong", 2000ms);
    FAIL() << "a wrong secret was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("WEFT_JOB_SECRET"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.refused_connections(), 1u);
  TcpStore good("127.0.0.1", server.port(), "right", 2000ms);  // the server is still fine
  good.set("a", to_bytes("b"));
}

TEST(Store, DisconnectNoticeFiresOnlyWhenNotCancelledAndNeverOverwrites) {
  TcpStoreServer server("s", "127.0.0.1", 0);
  TcpStore watcher("127.0.0.1", server.port(), "s", 2000ms);
  {
    TcpStore dying("127.0.0.1", server.port(), "s", 2000ms);
    dying.set_on_disconnect("dead", to_bytes("rank 1 died"));
  }
  EXPECT_EQ(to_string(watcher.get("dead", 2000ms)), "rank 1 died");
  {
    TcpStore clean("127.0.0.1", server.port(), "s", 2000ms);
    clean.set_on_disconnect("gone", to_bytes("x"));
    clean.cancel_on_disconnect("gone");
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(watcher.check("gone"));
  watcher.set("cause", to_bytes("first"));
  {
    TcpStore late("127.0.0.1", server.port(), "s", 2000ms);
    late.set_on_disconnect("cause", to_bytes("second"));
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(to_string(watcher.get("cause", 100ms)), "first");
}

TEST(Store, ConnectTimeoutNamesTheAddress) {
  try {
    TcpStore s("127.0.0.1", 1, "x", 300ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos);
  }
}

EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(JobEnv, EachLauncher) {
  JobInfo w = detect_job(env_of({{"WEFT_RANK", "2"}, {"WEFT_WORLD_SIZE", "4"}, {"WEFT_LOCAL_RANK", "0"},
                                 {"WEFT_LOCAL_SIZE", "2"}, {"WEFT_MASTER_ADDR", "10.1.2.3"}, {"WEFT_MASTER_PORT", "29500"},
                                 {"WEFT_JOB_SECRET", "abc"}, {"WEFT_STORE_EXTERNAL", "1"}}));
  EXPECT_EQ(w.launcher, Launcher::kWeft);
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_addr, "10.1.2.3");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.secret, "abc");
  EXPECT_TRUE(w.store_external);

  JobInfo o = detect_job(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  EXPECT_EQ(o.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_TRUE(o.master_addr.empty());

  JobInfo m = detect_job(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}));
  EXPECT_EQ(m.launcher, Launcher::kMpich);
  EXPECT_EQ(m.local_size, 2);

  JobInfo s = detect_job(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(s.launcher, Launcher::kSlurm);
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.local_rank, 1);

  JobInfo t = detect_job(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(t.launcher, Launcher::kTorchrun);
  EXPECT_EQ(t.master_addr, "127.0.0.1");
  EXPECT_EQ(t.master_port, 1234);
}

void expect_error(std::map<std::string, std::string> m, const std::string& names) {
  try {
    detect_job(env_of(std::move(m)));
    FAIL() << "accepted; expected an error naming " << names;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(JobEnv, ClearErrorsNameWhatIsWrong) {
  expect_error({}, "WEFT_RANK");
  expect_error({{"WEFT_RANK", "0"}}, "WEFT_WORLD_SIZE");
  expect_error({{"WEFT_RANK", "4"}, {"WEFT_WORLD_SIZE", "4"}}, "WEFT_RANK");
  expect_error({{"WEFT_RANK", "x"}, {"WEFT_WORLD_SIZE", "4"}}, "WEFT_RANK");
  expect_error({{"WEFT_RANK", "0"}, {"WEFT_WORLD_SIZE", "2"}, {"WEFT_MASTER_ADDR", "h"}}, "WEFT_MASTER_PORT");
  expect_error({{"WEFT_RANK", "0"}, {"WEFT_WORLD_SIZE", "2"}, {"WEFT_MASTER_ADDR", "h"}, {"WEFT_MASTER_PORT", "70000"}},
               "WEFT_MASTER_PORT");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"}}, "OMPI_COMM_WORLD_SIZE");
}

TEST(JobEnv, ConfigValuesAreChecked) {
  EXPECT_EQ(CommConfig::from_env(env_of({{"WEFT_TIMEOUT_MS", "1500"}})).timeout, 1500ms);
  EXPECT_THROW(CommConfig::from_env(env_of({{"WEFT_TIMEOUT_MS", "soon"}})), Error);
  EXPECT_THROW(CommConfig::from_env(env_of({{"WEFT_TRANSPORT", "carrier-pigeon"}})), Error);
  EXPECT_THROW(CommConfig::from_env(env_of({{"WEFT_SLICE_BYTES", "12"}})), Error);
  EXPECT_FALSE(CommConfig::from_env(env_of({})).gpu_hierarchical);
  EXPECT_TRUE(CommConfig::from_env(env_of({{"WEFT_GPU_HIERARCHICAL", "1"}})).gpu_hierarchical);
  EXPECT_THROW(CommConfig::from_env(env_of({{"WEFT_GPU_HIERARCHICAL", "yes"}})), Error);
  EXPECT_EQ(CommConfig::from_env(env_of({})).gpu_chunk_bytes, 4u << 20);
  EXPECT_EQ(CommConfig::from_env(env_of({{"WEFT_GPU_CHUNK_BYTES", "65536"}})).gpu_chunk_bytes, 65536u);
  EXPECT_THROW(CommConfig::from_env(env_of({{"WEFT_GPU_CHUNK_BYTES", "100"}})), Error);
}

}  // namespace
