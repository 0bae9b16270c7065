// Determinism and a long randomized sweep, thread-ranks over inproc and UCX.
//  - Determinism: for every algorithm of every collective, random (inexact) float inputs give
//    bitwise-identical results in two runs, and on every rank where the results must agree.
//  - Sweep: random (collective, algorithm, channels, type, op, count, rank count, placement,
//    transport) cases against the exact serial reference of collective_check.h, guard zones
//    included. Fixed seed; WEFT_SWEEP_SECONDS (default 30: CI time; longer runs by hand) bounds it, WEFT_SWEEP_SEED changes it.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "collectives/collective_runner.h"

using namespace weft;
using namespace weft::test;

namespace {

constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                     CollectiveKind::kAllGather, CollectiveKind::kBroadcast,
                                     CollectiveKind::kReduce,    CollectiveKind::kAllToAll};

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

class Determinism : public ::testing::TestWithParam<TransportKind> {};

TEST_P(Determinism, EveryAlgorithmBitwiseAcrossRunsAndRanks) {
  const TransportKind transport = GetParam();
  for (CollectiveKind kind : kKinds) {
    for (const AlgoChoice& algo : algo_choices(kind)) {
      const int n = 4;
      const uint64_t count = 3001;
      CommConfig cfg = test_config();
      cfg.algo = algo.id;
      cfg.channels = algo.channels;
      cfg.slice_bytes = 4096;
      std::vector<std::vector<uint32_t>> results(n);
      run_ranks(
          n, transport,
          [&](Communicator& comm) {
            const int r = comm.rank();
            CollectiveArgs a{kind, count, DataType::kFloat32, RedOp::kSum, 1, false};
            const uint64_t in = send_bytes(a, r, n) / 4, out = recv_bytes(a, r, n) / 4;
            for (int run = 0; run < 2; ++run) {
              std::vector<float> send(std::max<uint64_t>(in, 1)), recv(std::max<uint64_t>(out, 1), 0.0f);
              std::mt19937 g(static_cast<uint32_t>(r * 7919 + 17));
              for (auto& x : send) x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(g), static_cast<int>(g() % 16) - 8);
              comm.submit(a, send.data(), recv.data());
              for (uint64_t i = 0; i < out; ++i) {
                uint32_t bits;
                std::memcpy(&bits, &recv[i], 4);
                results[r].push_back(bits);
              }
            }
          },
          cfg);
      for (int r = 0; r < n; ++r) {
        const size_t half = results[r].size() / 2;
        SCOPED_TRACE(fmt::format("{} {} {} rank {}", transport_label(transport), collective_name(kind), algo.label(), r));
        ASSERT_TRUE(std::equal(results[r].begin(), results[r].begin() + half, results[r].begin() + half)) << "runs differ";
        bool same_everywhere = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
                               kind == CollectiveKind::kBroadcast;
        if (same_everywhere) {
          ASSERT_EQ(results[r], results[0]) << "differs from rank 0";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Determinism, ::testing::Values(TransportKind::kInproc, TransportKind::kUcx),
                         [](const auto& info) { return std::string(transport_label(info.param)); });

CollCase random_case(std::mt19937_64& g, CollectiveKind kind, int n) {
  static constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,   DataType::kInt64,
                                        DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};
  CollCase c;
  c.kind = kind;
  c.n = n;
  c.dt = kTypes[g() % 8];
  bool reducing = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kReduce;
  c.op = reducing ? static_cast<RedOp>(g() % 5) : RedOp::kSum;
  // Sizes: mostly small and odd, sometimes around slice boundaries, rarely large.
  switch (g() % 8) {
    case 0: c.count = g() % 4; break;
    case 1: case 2: case 3: c.count = 1 + g() % 200; break;
    case 4: case 5: c.count = 1 + g() % 5000; break;
    case 6: c.count = (uint64_t{1} << (10 + g() % 8)) + g() % 3 - 1; break;
    default: c.count = kind == CollectiveKind::kAllReduce ? 100000 + g() % 200000 : 1 + g() % 40000;
  }
  c.root = static_cast<int>(g() % static_cast<uint64_t>(n));
  c.in_place = g() % 2;
  return c;
}

TEST(Sweep, RandomCasesHaveZeroWrongElements) {
  const double seconds = env_double("WEFT_SWEEP_SECONDS", 30);
  const uint64_t seed = static_cast<uint64_t>(env_double("WEFT_SWEEP_SEED", 20240611));
  std::mt19937_64 g(seed);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t cases = 0, worlds = 0, elements = 0, wrong = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    // One world per (transport, ranks, collective, algorithm); a batch of cases on it.
    TransportKind transport = g() % 3 == 0 ? TransportKind::kUcx : TransportKind::kInproc;
    int n = 1 + static_cast<int>(g() % (transport == TransportKind::kUcx ? 4 : 8));
    CollectiveKind kind = kKinds[g() % 6];
    auto algos = algo_choices(kind);
    AlgoChoice algo = algos[g() % algos.size()];
    std::vector<CollCase> batch;
    for (int k = 0; k < 6; ++k) batch.push_back(random_case(g, kind, n));
    CommConfig cfg = test_config();
    cfg.algo = algo.id;
    cfg.channels = algo.channels;
    cfg.slice_bytes = g() % 2 ? 4096 : 512 * 1024;
    std::atomic<uint64_t> el{0}, bad{0};
    run_ranks(
        n, transport,
        [&](Communicator& comm) {
          for (const CollCase& c : batch) {
            RankBuffers b = make_buffers(c, comm.rank());
            comm.submit(CollectiveArgs{c.kind, c.count, c.dt, c.op, c.root, false}, b.send, b.recv);
            el += b.res_bytes / dtype_size(c.dt);
            std::string err = check_buffers(c, comm.rank(), b);
            if (!err.empty()) {
              if (bad++ < 5) ADD_FAILURE() << "seed " << seed << " " << transport_label(transport) << " " << algo.label()
                                          << " slice " << cfg.slice_bytes << ": " << c.label() << ": " << err;
            }
          }
        },
        cfg);
    cases += batch.size();
    ++worlds;
    elements += el.load();
    wrong += bad.load();
  }
  std::printf("[ figure ] sweep seed %llu: %llu cases on %llu worlds, %llu result elements checked, %llu wrong, %.0f s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(worlds), static_cast<unsigned long long>(elements),
              static_cast<unsigned long long>(wrong),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(cases, 0u);
}

}  // namespace
