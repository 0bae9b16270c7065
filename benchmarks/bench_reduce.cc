// Throughput of the host reduction kernels: every type x op at 64 KiB, 1 MiB and 64 MiB per
// buffer, next to a plain float `a[i] += b[i]` loop (built with the project's ordinary flags) and
// memcpy. Bytes per second count what each loop moves: reduce_into and the plain loop read two
// buffers and write one (3 x bytes), memcpy reads one and writes one (2 x bytes).
//
//   ./build/benchmarks/bench_reduce [--benchmark_filter=float32] [--benchmark_min_time=0.2]
//   WEFT_REDUCE_ISA=avx2 ./build/benchmarks/bench_reduce   # force a lower variant
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "collectives/datatype.h"
#include "collectives/reduce_kernels.h"
#include "collectives/reduce_kernels_internal.h"

using namespace weft;

namespace {

constexpr size_t kMaxBytes = size_t{64} << 20;
const int64_t kSizes[] = {64 << 10, 1 << 20, 64 << 20};

// Three 64 MiB buffers, 64-byte aligned, allocated and touched once for the whole run.
struct Buffers {
  unsigned char* dst;
  unsigned char* a;
  unsigned char* b;
  int filled_type = -1;  // the element type a and b currently hold
  Buffers() {
    dst = static_cast<unsigned char*>(std::aligned_alloc(64, kMaxBytes));
    a = static_cast<unsigned char*>(std::aligned_alloc(64, kMaxBytes));
    b = static_cast<unsigned char*>(std::aligned_alloc(64, kMaxBytes));
    if (dst == nullptr || a == nullptr || b == nullptr) std::abort();
    std::memset(dst, 0, kMaxBytes);
    std::memset(a, 0, kMaxBytes);
    std::memset(b, 0, kMaxBytes);
  }
};

Buffers& buffers() {
  static Buffers bufs;
  return bufs;
}

// Values that keep every op in the normal range (no denormals, no overflow to Inf/NaN, which
// would measure slow paths rather than the kernels).
void fill_for(DataType t, unsigned char* p, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DataType::kInt8: case DataType::kUint8: p[i] = static_cast<unsigned char>(rng()); break;
      case DataType::kInt32: { uint32_t v = static_cast<uint32_t>(rng()); std::memcpy(p + 4 * i, &v, 4); break; }
      case DataType::kInt64: { uint64_t v = rng(); std::memcpy(p + 8 * i, &v, 8); break; }
      case DataType::kFloat16: { uint16_t v = float_to_half(u(rng)); std::memcpy(p + 2 * i, &v, 2); break; }
      case DataType::kBfloat16: { uint16_t v = float_to_bf16(u(rng)); std::memcpy(p + 2 * i, &v, 2); break; }
      case DataType::kFloat32: { float v = u(rng); std::memcpy(p + 4 * i, &v, 4); break; }
      case DataType::kFloat64: { double v = u(rng); std::memcpy(p + 8 * i, &v, 8); break; }
    }
  }
}

void prepare(DataType t) {
  Buffers& bufs = buffers();
  if (bufs.filled_type == static_cast<int>(t)) return;
  const size_t n = kMaxBytes / dtype_size(t);
  fill_for(t, bufs.a, n, 1);
  fill_for(t, bufs.b, n, 2);
  bufs.filled_type = static_cast<int>(t);
}

void BM_Reduce(benchmark::State& state, DataType t, RedOp op) {
  prepare(t);
  Buffers& bufs = buffers();
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / dtype_size(t);
  for (auto _ : state) {
    reduce_into(t, op, bufs.dst, bufs.a, bufs.b, count);
    benchmark::DoNotOptimize(bufs.dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}

// The baseline a collective would have without the kernels: compiled with the project's flags
// only (-O2 in RelWithDebInfo, no -m flags, no -O3).
__attribute__((noinline)) void plain_add(float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

void BM_PlainFloatAdd(benchmark::State& state) {
  prepare(DataType::kFloat32);
  Buffers& bufs = buffers();
  const size_t bytes = static_cast<size_t>(state.range(0));
  // In place on dst (a copy of a), so that a keeps its values for the other benchmarks; b holds
  // values in [0.5, 2), so dst grows slowly and stays finite.
  std::memcpy(bufs.dst, bufs.a, bytes);
  for (auto _ : state) {
    plain_add(reinterpret_cast<float*>(bufs.dst), reinterpret_cast<const float*>(bufs.b), bytes / 4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}

void BM_Memcpy(benchmark::State& state) {
  Buffers& bufs = buffers();
  const size_t bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    std::memcpy(bufs.dst, bufs.a, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * bytes));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("weft_reduce_isa", reduce_kernel_isa());
  benchmark::AddCustomContext("weft_reduce_best_isa", kern::isa_name(kern::best_isa()));

  for (int64_t s : kSizes) benchmark::RegisterBenchmark("memcpy", BM_Memcpy)->Arg(s);
  for (int64_t s : kSizes) benchmark::RegisterBenchmark("plain_float_add", BM_PlainFloatAdd)->Arg(s);
  const DataType types[] = {DataType::kFloat32, DataType::kInt8,     DataType::kUint8,   DataType::kInt32,
                            DataType::kInt64,   DataType::kFloat16, DataType::kBfloat16, DataType::kFloat64};
  const RedOp ops[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};
  for (DataType t : types) {
    for (RedOp op : ops) {
      const std::string name = "reduce/" + std::string(dtype_name(t)) + "/" + std::string(redop_name(op));
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, t, op);
      for (int64_t s : kSizes) b->Arg(s);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
