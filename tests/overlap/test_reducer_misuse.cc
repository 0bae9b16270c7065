// Misuse is an error, never a hang; the timeline file; the step metrics; the C API's checks.
#include <weft/weft.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unistd.h>

#include "reducer_fixture.h"

using namespace weft;
using namespace weft::overlap;
using namespace weft::overlap::test;

namespace {

std::string error_of(const std::function<void()>& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ReducerMisuse, ParameterMarkedTwice) {
  run_ranks(1, TransportKind::kInproc, [&](Communicator& c) {
    Reducer red(shared(c), small_caps());
    Model m = make_model(red, toy_sizes(), false);
    red.mark_ready(3);
    ErrorCode code{};
    std::string msg = error_of([&] { red.mark_ready(3); }, &code);
    EXPECT_EQ(code, ErrorCode::kInvalidUsage);
    EXPECT_NE(msg.find("'layer3' (index 3) was already marked"), std::string::npos) << msg;
    EXPECT_NE(error_of([&] { red.mark_ready(99); }).find("no parameter 99"), std::string::npos);
    EXPECT_NE(error_of([&] { red.add_param(nullptr, 1, DataType::kFloat32, "late"); }).find("before the first step"),
              std::string::npos);
  });
}

// Rank 1 forgets a parameter: it fails naming it, aborts the communicator, and rank 0 (whose
// buckets are all in flight) gets an error instead of waiting for all-reduces that never come.
TEST(ReducerMisuse, MissingParametersFailEveryRankWithoutHanging) {
  std::vector<std::string> errors(2);
  auto t0 = std::chrono::steady_clock::now();
  run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
    Reducer red(shared(c), small_caps());
    Model m = make_model(red, toy_sizes(), false);
    // Rank 0 meets rank 1's failure in finalize, or already in a mark_ready whose bucket (or the
    // layout check before it) was still in flight when rank 1 aborted: either way, an error.
    errors[c.rank()] = error_of([&] {
      for (int p = static_cast<int>(m.grads.size()) - 1; p >= 0; --p) {
        if (c.rank() == 0 || p != 4) red.mark_ready(p);
      }
      red.finalize();
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_NE(errors[1].find("not marked ready in step 1: 'layer4'"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("not marked ready"), std::string::npos) << errors[0];  // the peer's reason
}

TEST(ReducerMisuse, LayoutMismatchAcrossRanksFailsOnEveryRank) {
  std::vector<std::string> errors(2);
  run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
    Reducer red(shared(c), small_caps());
    auto sizes = toy_sizes();
    if (c.rank() == 1) sizes[2] += 1;  // one parameter of a different size
    Model m = make_model(red, sizes, false);
    errors[c.rank()] = error_of([&] {
      for (int p = static_cast<int>(m.grads.size()) - 1; p >= 0; --p) red.mark_ready(p);
      red.finalize();
    });
    // The reducer stays failed and says why.
    EXPECT_NE(error_of([&] { red.finalize(); }).find("failed earlier"), std::string::npos);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("bucket layouts differ across ranks"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 1 has 8 parameters"), std::string::npos) << errors[r];
  }
}

// Marks spaced out by sleeps (a simulated backward): the metrics are consistent, and without
// overlap all of the communication is exposed.
TEST(ReducerMetrics, SaneWithAndWithoutOverlap) {
  for (bool overlap : {true, false}) {
    run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
      ReducerOptions o = small_caps();
      o.overlap = overlap;
      o.rebuild_buckets = false;
      Reducer red(shared(c), o);
      std::vector<uint64_t> sizes(6, 200000);  // 800 KB each: one bucket per parameter
      Model m = make_model(red, sizes, false);
      for (int step = 0; step < 2; ++step) {
        red.begin_step();
        for (int p = 5; p >= 0; --p) {
          std::this_thread::sleep_for(std::chrono::milliseconds(4));
          red.mark_ready(p);
        }
        StepStats s = red.finalize();
        EXPECT_EQ(s.buckets, 6);
        EXPECT_GT(s.comm_ms, 0.0);
        EXPECT_LE(s.exposed_comm_ms, s.comm_ms + 1e-9);
        EXPECT_LE(s.exposed_comm_ms, s.tail_ms + 1e-9);
        EXPECT_GE(s.overlap_ratio, 0.0);
        EXPECT_LE(s.overlap_ratio, 1.0);
        EXPECT_GE(s.backward_ms, 20.0);
        EXPECT_GE(s.step_ms, s.backward_ms);
        EXPECT_NEAR(s.sync_overhead, s.exposed_comm_ms / s.step_ms, 1e-12);
        if (!overlap) {
          EXPECT_NEAR(s.overlap_ratio, 0.0, 1e-9);
        }
      }
    });
  }
}

TEST(ReducerTimeline, ValidChromeTraceWithTheExpectedEvents) {
  std::string pattern = "/tmp/weft-overlap-test-" + std::to_string(getpid()) + "-%r.json";
  run_ranks(2, TransportKind::kInproc, [&](Communicator& c) {
    ReducerOptions o = small_caps();
    o.timeline_path = pattern;
    Reducer red(shared(c), o);
    Model m = make_model(red, toy_sizes(), false);
    for (int step = 0; step < 2; ++step) {
      for (int p = static_cast<int>(m.grads.size()) - 1; p >= 0; --p) red.mark_ready(p);
      red.finalize();
    }
  });
  for (int r = 0; r < 2; ++r) {
    std::string path = Timeline::rank_path(pattern, r);
    std::ifstream f(path);
    ASSERT_TRUE(f.good()) << path;
    nlohmann::json doc = nlohmann::json::parse(f);  // throws if not valid JSON
    std::set<std::string> names;
    for (const auto& e : doc["traceEvents"]) {
      names.insert(e["name"].get<std::string>());
      if (e["ph"] == "X") {
        EXPECT_EQ(e["pid"], r);
        EXPECT_GE(e["dur"].get<double>(), 0.0);
      }
    }
    for (const char* want : {"step 1", "step 2", "backward", "finalize", "fill bucket 0", "all-reduce bucket 0",
                             "layout check", "agree on ready order", "process_name"}) {
      EXPECT_TRUE(names.count(want)) << want << " missing from " << path;
    }
    std::remove(path.c_str());
  }
}

TEST(ReducerCApi, ArgumentChecks) {
  weftReducerConfig_t cfg;
  ASSERT_EQ(weftReducerConfigInit(&cfg), weftSuccess);
  EXPECT_EQ(cfg.bucketCapBytes, 25u << 20);
  EXPECT_EQ(cfg.firstBucketCapBytes, 1u << 20);
  EXPECT_EQ(cfg.average, 1);
  weftReducer_t r = nullptr;
  EXPECT_EQ(weftReducerCreate(nullptr, &cfg, &r), weftInvalidArgument);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(weftReducerMarkReady(nullptr, 0), weftInvalidArgument);
  EXPECT_EQ(weftReducerMarkReadyStream(nullptr, 0, nullptr), weftInvalidArgument);
  EXPECT_EQ(weftReducerFinalizeStream(nullptr, nullptr, nullptr), weftInvalidArgument);
  EXPECT_NE(std::string(weftGetLastErrorMessage()).find("reducer is NULL"), std::string::npos);
  EXPECT_EQ(weftReducerDestroy(reinterpret_cast<weftReducer_t>(&cfg)), weftInvalidUsage);
}
