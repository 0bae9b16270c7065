#include "runtime/base/config.h"

#include <cstdlib>

#include "runtime/base/error.h"

namespace weft {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

int64_t env_int(const EnvLookup& env, const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  auto v = env(name);
  if (!v || v->empty()) return fallback;
  size_t pos = 0;
  int64_t x = 0;
  try {
    x = std::stoll(*v, &pos, 10);
  } catch (...) {
    pos = 0;
  }
  if (pos != v->size()) fail(ErrorCode::kInvalidArgument, "{}='{}' is not an integer", name, *v);
  if (x < min || x > max) fail(ErrorCode::kInvalidArgument, "{}={} is outside [{}, {}]", name, x, min, max);
  return x;
}

CommConfig CommConfig::from_env(const EnvLookup& env) {
  CommConfig c;
  c.timeout = std::chrono::milliseconds(env_int(env, "WEFT_TIMEOUT_MS", c.timeout.count(), 1, int64_t{1} << 40));
  c.spin = std::chrono::microseconds(env_int(env, "WEFT_SPIN_US", c.spin.count(), 0, 10'000'000));
  c.direct_bytes = env_int(env, "WEFT_DIRECT_BYTES", c.direct_bytes, -1, 4 << 20);
  c.direct_piece_bytes = env_int(env, "WEFT_DIRECT_PIECE_BYTES", c.direct_piece_bytes, -1, 64 << 20);
  c.slice_bytes = static_cast<uint64_t>(env_int(env, "WEFT_SLICE_BYTES", static_cast<int64_t>(c.slice_bytes), 4096, int64_t{1} << 30));
  c.channels = static_cast<int>(env_int(env, "WEFT_NCHANNELS", c.channels, 1, 16));
  if (auto a = env("WEFT_ALGO")) c.algo = *a;
  c.deterministic = env_int(env, "WEFT_DETERMINISTIC", 0, 0, 1) == 1;
  if (auto w = env("WEFT_WIRE_DTYPE"); w && !w->empty() && *w != "float32") {
    if (*w != "bfloat16" && *w != "float16")
      fail(ErrorCode::kInvalidArgument, "WEFT_WIRE_DTYPE='{}' is not bfloat16, float16 or float32", *w);
    c.wire_dtype = *w;
  }
  if (auto t = env("WEFT_TRANSPORT"); t && !t->empty()) {
    if (*t != "ucx" && *t != "auto") fail(ErrorCode::kInvalidArgument, "WEFT_TRANSPORT='{}' is not auto or ucx", *t);
    c.transport = *t;
  }
  if (auto m = env("WEFT_UCX_ERR_MODE"); m && !m->empty()) {
    if (*m != "peer" && *m != "none") fail(ErrorCode::kInvalidArgument, "WEFT_UCX_ERR_MODE='{}' is not peer or none", *m);
    c.ucx_peer_errors = *m == "peer";
  }
  c.gpu_hierarchical = env_int(env, "WEFT_GPU_HIERARCHICAL", 0, 0, 1) == 1;
  c.gpu_chunk_bytes = static_cast<uint64_t>(env_int(env, "WEFT_GPU_CHUNK_BYTES", static_cast<int64_t>(c.gpu_chunk_bytes), 4096,
                                                    int64_t{1} << 30));
  c.trace_buffer = static_cast<uint64_t>(env_int(env, "WEFT_TRACE_BUFFER", static_cast<int64_t>(c.trace_buffer), 0, 1 << 20));
  return c;
}

}  // namespace weft
