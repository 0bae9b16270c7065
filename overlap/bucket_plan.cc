#include "overlap/bucket_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "runtime/base/error.h"

namespace weft::overlap {

std::vector<BucketPlan> plan_buckets(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                                     uint64_t cap_bytes, uint64_t first_cap_bytes) {
  require(cap_bytes > 0 && first_cap_bytes > 0, "bucket caps must be positive");
  struct Open {
    BucketPlan plan;
    size_t first_pos = 0;
    bool first_of_type = true;  // this type has not closed a bucket yet
  };
  std::map<DataType, Open> open;
  std::vector<std::pair<size_t, BucketPlan>> closed;  // (position of first parameter, bucket)
  auto close = [&](Open& o) {
    if (o.plan.params.empty()) return;
    closed.emplace_back(o.first_pos, std::move(o.plan));
    o.plan = BucketPlan{};
    o.first_of_type = false;
  };
  for (size_t pos = 0; pos < order.size(); ++pos) {
    int p = order[pos];
    require(p >= 0 && static_cast<size_t>(p) < params.size(), "bucket order names parameter {} of {}", p, params.size());
    const ParamSpec& s = params[p];
    Open& o = open[s.dtype];
    uint64_t cap = o.first_of_type ? first_cap_bytes : cap_bytes;
    uint64_t bytes = s.count * dtype_size(s.dtype);
    if (!o.plan.params.empty() && o.plan.bytes() + bytes > cap) {
      close(o);
      cap = cap_bytes;
    }
    if (o.plan.params.empty()) {
      o.plan.dtype = s.dtype;
      o.first_pos = pos;
    }
    o.plan.params.push_back(p);
    o.plan.offsets.push_back(o.plan.count);
    o.plan.count += s.count;
    if (o.plan.bytes() >= cap) close(o);
  }
  for (auto& [type, o] : open) close(o);
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketPlan> out;
  out.reserve(closed.size());
  for (auto& c : closed) out.push_back(std::move(c.second));
  return out;
}

uint64_t layout_hash(const std::vector<BucketPlan>& buckets, const std::vector<ParamSpec>& params) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(params.size());
  for (const BucketPlan& b : buckets) {
    mix(static_cast<uint64_t>(b.dtype));
    mix(b.count);
    for (int p : b.params) {
      mix(static_cast<uint64_t>(p));
      mix(params[p].count);
    }
  }
  return h;
}

std::string describe_layout(const std::vector<BucketPlan>& buckets) {
  std::string s = fmt::format("{} buckets:", buckets.size());
  for (size_t i = 0; i < buckets.size(); ++i) {
    const BucketPlan& b = buckets[i];
    s += fmt::format(" [{}] {} {:.2f} MiB ({} params)", i, dtype_name(b.dtype), b.bytes() / 1048576.0, b.params.size());
  }
  return s;
}

}  // namespace weft::overlap
