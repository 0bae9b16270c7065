// Run-time settings from WEFT_* environment variables, parsed once per communicator with clear
// errors for bad values. docs/ENVIRONMENT.md lists them.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "runtime/base/collective_kind.h"

namespace weft {

// Looks a variable up (std::getenv in production; a map in tests).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

struct CommConfig {
  std::chrono::milliseconds timeout{300000};  // WEFT_TIMEOUT_MS: every blocking wait
  std::chrono::microseconds spin{50};          // WEFT_SPIN_US: busy-poll before sleeping
  std::string algo;                            // WEFT_ALGO: force an algorithm ("" = choose)
  // WEFT_DETERMINISTIC=1: reductions combine every element in rank order, whatever the size,
  // slicing, timing or algorithm (docs/DETERMINISM.md); weftCommSetDeterministic per communicator.
  bool deterministic = false;
  // WEFT_WIRE_DTYPE: "bfloat16" or "float16" puts float32 sums and averages on the wire at 16 bits,
  // summed in float32 and rounded once (the f32acc algorithm); "" (or "float32"): full precision.
  std::string wire_dtype;
  uint64_t slice_bytes = kDefaultSliceBytes;         // WEFT_SLICE_BYTES: pipelining granularity
  // WEFT_DIRECT_BYTES: the largest call of the shared-memory latency path (0: off; -1: automatic,
  // 32 KiB, or 256 KiB when the node's ranks outnumber its cores).
  int64_t direct_bytes = -1;
  // WEFT_DIRECT_PIECE_BYTES: all-reduces above direct_bytes (above 32 KiB if that is smaller:
  // ShmDirect's kAllReduceRoundBytesWithPieces) take the direct path in pieces of
  // this size, each reduce-scattered and all-gathered through the slots (0: off; -1: automatic,
  // 256 KiB when the node's ranks outnumber its cores, else off).
  int64_t direct_piece_bytes = -1;
  int channels = 1;                            // WEFT_NCHANNELS: parallel rings/trees (1..16)
  std::string transport = "auto";              // WEFT_TRANSPORT: auto (shm in a node, UCX across) | ucx
  bool ucx_peer_errors = false;                // WEFT_UCX_ERR_MODE=peer|none
  bool gpu_hierarchical = false;               // WEFT_GPU_HIERARCHICAL=1: device all-reduce across nodes through the host
  uint64_t gpu_chunk_bytes = 4 << 20;          // WEFT_GPU_CHUNK_BYTES: its pipelining chunk
  uint64_t trace_buffer = 2048;                // WEFT_TRACE_BUFFER: flight recorder slots per communicator (0: off)

  static CommConfig from_env(const EnvLookup& env);
};

// Strict integer parsing of an environment variable; throws kInvalidArgument naming it.
int64_t env_int(const EnvLookup& env, const std::string& name, int64_t fallback, int64_t min, int64_t max);

}  // namespace weft
