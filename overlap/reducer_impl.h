// Reducer's private parts, shared by reducer.cc (registration, marks, launches) and
// reducer_finalize.cc (finalize, stats, rebuild, timeline).
#pragma once
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "overlap/reducer.h"
#include "overlap/reducer_device.h"
#include "runtime/comm/operation.h"

namespace weft::overlap {

struct Reducer::Param {
  void* grad = nullptr;
  int bucket = -1;
  uint64_t offset = 0;       // elements into the bucket
  bool ready = false;        // marked in this step
  bool accumulated = false;  // marked in a no_sync step since the last synced step
};

struct Reducer::Bucket {
  BucketPlan plan;
  std::vector<uint64_t> storage;  // the flat buffer (8-byte aligned), host gradients
  std::shared_ptr<void> device;   // the flat buffer on the device, device gradients
  std::vector<uint16_t> wire;     // the 16-bit copy when compressed
  bool compressed = false;
  int pending = 0;                // parameters not yet marked this step
  bool launched = false;
  bool any_mark = false;
  std::shared_ptr<Operation> work;
  Clock::time_point first_mark, ready;  // first mark of the step; complete (launch begins)
  void* data() { return device ? device.get() : storage.data(); }
  uint64_t wire_bytes() const { return compressed ? plan.count * 2 : plan.bytes(); }
};

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace weft::overlap
