// Public entry points of the host reduction kernels and the run-time dispatch: every variant's
// table is built once; the one in use is chosen once (best the CPU supports, or
// WEFT_REDUCE_ISA=scalar|sse2|avx2|avx512 to force a lower one) and cached.
#include "collectives/reduce_kernels.h"

#include <array>
#include <cstdlib>
#include <cstring>

#include "collectives/reduce_kernels_impl.h"
#include "runtime/base/log.h"

namespace weft {

float half_to_float(uint16_t h) { return kern::h2f(h); }
uint16_t float_to_half(float f) { return kern::f2h(f); }
float bf16_to_float(uint16_t b) { return kern::b2f(b); }
uint16_t float_to_bf16(float f) { return kern::f2b(f); }

namespace kern {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kSse2: return "sse2";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool parse_isa(const char* name, Isa* out) {
  for (int i = 0; i < kNumIsas; ++i) {
    if (std::strcmp(name, isa_name(static_cast<Isa>(i))) == 0) {
      *out = static_cast<Isa>(i);
      return true;
    }
  }
  return false;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
    case Isa::kSse2:
      return true;  // baseline of the target (SSE2 on x86-64)
#if defined(WEFT_REDUCE_X86)
    // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 state (XCR0).
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
#else
    case Isa::kAvx2:
    case Isa::kAvx512:
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  for (int i = kNumIsas - 1; i > 0; --i) {
    if (isa_supported(static_cast<Isa>(i))) return static_cast<Isa>(i);
  }
  return Isa::kScalar;
}

namespace {

Isa choose_isa() {
  const Isa best = best_isa();
  const char* env = std::getenv("WEFT_REDUCE_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa want;
  if (!parse_isa(env, &want)) {
    WEFT_LOG_WARN("WEFT_REDUCE_ISA={} is not one of scalar|sse2|avx2|avx512; using {}", env, isa_name(best));
    return best;
  }
  if (!isa_supported(want)) {
    WEFT_LOG_WARN("WEFT_REDUCE_ISA={}: not supported by this CPU or build; using {}", env, isa_name(best));
    return best;
  }
  WEFT_LOG_INFO("reduction kernels: {} (forced by WEFT_REDUCE_ISA)", isa_name(want));
  return want;
}

std::array<KernelTable, kNumIsas> build_tables() {
  std::array<KernelTable, kNumIsas> t{};
  fill_table_scalar(&t[static_cast<int>(Isa::kScalar)]);
  fill_table_sse2(&t[static_cast<int>(Isa::kSse2)]);
  // A variant's fill function is compiled for its ISA, and the compiler may store the pointers
  // with that ISA's instructions (it does: AVX-512 stores, SIGILL on an AVX2-only CPU). So only
  // variants the CPU runs are filled; the others get the best lower table, never called anyway.
#if defined(WEFT_REDUCE_X86)
  if (isa_supported(Isa::kAvx2)) {
    fill_table_avx2(&t[static_cast<int>(Isa::kAvx2)]);
  } else {
    t[static_cast<int>(Isa::kAvx2)] = t[static_cast<int>(Isa::kSse2)];
  }
  if (isa_supported(Isa::kAvx512)) {
    fill_table_avx512(&t[static_cast<int>(Isa::kAvx512)]);
  } else {
    t[static_cast<int>(Isa::kAvx512)] = t[static_cast<int>(Isa::kAvx2)];
  }
#else
  t[static_cast<int>(Isa::kAvx2)] = t[static_cast<int>(Isa::kSse2)];
  t[static_cast<int>(Isa::kAvx512)] = t[static_cast<int>(Isa::kSse2)];
#endif
  return t;
}

const KernelTable& active_table() {
  static const KernelTable* const t = &table(active_isa());
  return *t;
}

bool valid(DataType type, RedOp op) {
  return static_cast<unsigned>(type) < static_cast<unsigned>(kNumDataTypes) &&
         static_cast<unsigned>(op) < static_cast<unsigned>(kNumRedOps);
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

const KernelTable& table(Isa isa) {
  static const std::array<KernelTable, kNumIsas> tables = build_tables();
  return tables[static_cast<int>(isa)];
}

}  // namespace kern

void reduce_into(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  if (count == 0 || !kern::valid(type, op)) return;
  kern::active_table().reduce[static_cast<int>(type)][static_cast<int>(op)](dst, a, b, count);
}

void reduce_inplace(DataType type, RedOp op, void* dst, const void* src, size_t count) {
  reduce_into(type, op, dst, dst, src, count);
}

void finish_avg(DataType type, void* buf, size_t count, int nranks) {
  if (count == 0 || nranks <= 1 || !kern::valid(type, RedOp::kAvg)) return;
  kern::active_table().finish_avg[static_cast<int>(type)](buf, count, nranks);
}

void sum_avg_into(DataType type, void* dst, const void* a, const void* b, size_t count, int nranks) {
  if (count == 0 || !kern::valid(type, RedOp::kAvg)) return;
  const kern::KernelTable& t = kern::active_table();
  if (nranks > 1 && t.sum_avg[static_cast<int>(type)] != nullptr) {
    t.sum_avg[static_cast<int>(type)](dst, a, b, count, nranks);
    return;
  }
  reduce_into(type, RedOp::kAvg, dst, a, b, count);
  finish_avg(type, dst, count, nranks);
}

const char* reduce_kernel_isa() { return kern::isa_name(kern::active_isa()); }

}  // namespace weft
