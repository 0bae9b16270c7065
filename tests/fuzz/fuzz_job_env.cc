// Fuzzes the launcher-environment parser: the input is a list of NAME=VALUE lines (any bytes),
// looked up as the environment by detect_job and CommConfig::from_env. Bad input must be a
// weft::Error (kInvalidArgument) naming the variable; accepted input must be consistent.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "runtime/base/config.h"
#include "runtime/base/error.h"
#include "runtime/bootstrap/job_env.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> vars;
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  try {
    JobInfo job = detect_job(env);
    if (job.size < 1 || job.rank < 0 || job.rank >= job.size) std::abort();
    if (job.local_rank >= 0 && job.local_size > 0 && job.local_rank >= job.local_size) std::abort();
    if (!job.master_addr.empty() && (job.master_port < 1 || job.master_port > 65535)) std::abort();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) std::abort();
  }
  try {
    CommConfig c = CommConfig::from_env(env);
    if (c.timeout.count() < 1 || c.channels < 1 || c.channels > 16 || c.slice_bytes < 4096) std::abort();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) std::abort();
  }
  return 0;
}
