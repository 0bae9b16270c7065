// The algorithm log (WEFT_LOG_LEVEL=info, docs/OBSERVABILITY.md): for the first call of each
// collective and size class, the algorithm that ran and why (AlgorithmChoice::explain), then after
// 10 more calls their measured mean against the cost model's prediction. One of the dispatcher's
// observers, beside the flight recorder and the metrics.
#pragma once
#include <string>

#include "runtime/trace/observer.h"

namespace weft {

class AlgorithmChoice;
class Telemetry;

class AlgorithmLog final : public CallObserver {
 public:
  // comm: the communicator's name, for the lines.
  AlgorithmLog(AlgorithmChoice& choice, Telemetry& telemetry, const std::string& comm, int rank, int size)
      : choice_(choice), telemetry_(telemetry), comm_(comm), rank_(rank), size_(size) {}
  void call_ended(const CallEnd& e) override;

 private:
  AlgorithmChoice& choice_;
  Telemetry& telemetry_;
  const std::string& comm_;
  int rank_, size_;
};

}  // namespace weft
