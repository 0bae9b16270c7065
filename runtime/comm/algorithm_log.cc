#include "runtime/comm/algorithm_log.h"

#include <algorithm>

#include "runtime/base/log.h"
#include "runtime/comm/algorithm_choice.h"
#include "runtime/trace/telemetry.h"

namespace weft {

void AlgorithmLog::call_ended(const CallEnd& e) {
  const CollectiveArgs& a = e.args;
  if (log_level() < LogLevel::kInfo || a.kind == CollectiveKind::kSend || a.kind == CollectiveKind::kRecv) return;
  constexpr uint32_t kMeasured = 10;  // calls after the first, whose mean is compared with the prediction
  const double us = std::chrono::duration<double, std::micro>(e.t1 - e.t0).count();
  const std::string algo = e.algorithm;
  const uint64_t bytes = std::max(send_bytes(a, rank_, size_), recv_bytes(a, rank_, size_));
  auto& cls = telemetry_.algorithm_class(a.kind, bytes);
  const uint64_t low = bytes ? uint64_t{1} << (63 - __builtin_clzll(bytes)) : 0;
  const std::string range = low ? fmt::format("{}-{} B", low, 2 * low - 1) : std::string("0 B");
  if (cls.algorithm != algo) {  // the class's first call, or another algorithm took it over
    cls = Telemetry::AlgorithmClass{};
    cls.algorithm = algo;
    const std::string why = choice_.explain(a, e.forced, e.algorithm, &cls.predicted_us);
    WEFT_LOG_INFO("{} on {} ({} ranks), {}: algorithm '{}' for {}: {}", collective_name(a.kind), comm_, size_, range, algo,
                  describe_call(a, e.seq), why);
  }
  if (cls.calls == 0) cls.first_us = us;
  else cls.sum_us += us;
  if (++cls.calls != kMeasured + 1) return;
  const double mean = cls.sum_us / kMeasured;
  WEFT_LOG_INFO("{} on {}, {}: algorithm '{}' measured {:.2f} us (mean of {} calls after the first, which took {:.2f} us){}",
                collective_name(a.kind), comm_, range, algo, mean, kMeasured, cls.first_us,
                cls.predicted_us >= 0 ? fmt::format(" against {:.2f} us predicted ({:.2f}x)", cls.predicted_us, mean / cls.predicted_us)
                                      : std::string(" (no prediction for it)"));
}

}  // namespace weft
