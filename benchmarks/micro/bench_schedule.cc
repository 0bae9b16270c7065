// Schedule generation: build_schedule (build + finish + validate) for the all-reduce algorithms at
// several sizes and rank counts. A schedule is built once per call shape and then cached, so this
// is the cost of the first call of each shape. See docs/PERFORMANCE.md, "Micro-benchmarks".
#include <benchmark/benchmark.h>

#include "collectives/collective.h"
#include "runtime/trace/flight_recorder.h"

namespace {

void BM_BuildSchedule(benchmark::State& state, const char* algo_id) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  const int nranks = static_cast<int>(state.range(1));
  const weft::Algorithm* algo = weft::find_algorithm(algo_id, weft::CollectiveKind::kAllReduce);
  if (!algo) return state.SkipWithError("no such algorithm");
  weft::CollectiveArgs args;
  args.kind = weft::CollectiveKind::kAllReduce;
  args.dtype = weft::DataType::kFloat32;
  args.op = weft::RedOp::kSum;
  args.count = bytes / 4;
  weft::AlgoOptions opt;
  size_t steps = 0;
  for (auto _ : state) {
    weft::Schedule s = weft::build_schedule(*algo, args, nranks / 2, nranks, opt);
    steps = s.steps.size();
    benchmark::DoNotOptimize(s);
  }
  state.counters["steps"] = static_cast<double>(steps);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : {int64_t{8}, int64_t{64} << 10, int64_t{1} << 20, int64_t{64} << 20})
    for (int64_t n : {2, 4, 8, 16, 64}) b->Args({bytes, n});
  b->ArgNames({"bytes", "ranks"});
}

BENCHMARK_CAPTURE(BM_BuildSchedule, ring, "ring")->Apply(Args);
BENCHMARK_CAPTURE(BM_BuildSchedule, rhd, "rhd")->Apply(Args);
BENCHMARK_CAPTURE(BM_BuildSchedule, tree, "tree")->Apply(Args);

// What the flight recorder adds to one blocking call (docs/OBSERVABILITY.md): its hooks as the
// communicator calls them (started, algorithm, wait_note, finished), ring of `slots` slots.
void BM_FlightRecorderCall(benchmark::State& state) {
  weft::FlightRecorder rec(static_cast<size_t>(state.range(0)));
  weft::CollectiveArgs args;
  args.count = 2;
  uint64_t i = 0;
  const auto t = std::chrono::steady_clock::now();
  for (auto _ : state) {
    rec.started(i, i, args, t, false);
    rec.algorithm(i, "direct");
    benchmark::DoNotOptimize(rec.wait_note(i));
    rec.finished(i, t, 0);
    ++i;
  }
}
BENCHMARK(BM_FlightRecorderCall)->Arg(16)->Arg(2048)->ArgName("slots");

}  // namespace

BENCHMARK_MAIN();
