// Reducer: finalize(), the step's statistics and timeline, the bucket rebuild after the first
// synced step, and the read-only accessors.
#include <algorithm>

#include "overlap/reducer_impl.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/trace/metrics.h"

namespace weft::overlap {

StepStats Reducer::finalize() { return finalize(nullptr); }

StepStats Reducer::finalize(void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable_locked("finalize");
  auto fin_begin = Clock::now();
  if (!in_step_) begin_step_locked(true, fin_begin);
  if (sync_ && marked_ < static_cast<int>(params_.size())) {
    std::vector<int> missing;
    for (size_t p = 0; p < params_.size(); ++p) {
      if (!params_[p].ready) missing.push_back(static_cast<int>(p));
    }
    if (opt_.find_unused) {
      for (int p : missing) mark_locked(p, true, "finalize");
    } else {
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 8; ++i) names += (i ? ", '" : "'") + specs_[missing[i]].name + "'";
      if (missing.size() > 8) names += fmt::format(" and {} more", missing.size() - 8);
      // Buckets may already be in flight here and on the peers; aborting the communicator ends
      // them everywhere instead of leaving the peers to wait for all-reduces that never come.
      fail_locked(ErrorCode::kInvalidUsage,
                  fmt::format("reducer finalize: rank {}: {} of {} parameters were not marked ready in step {}: {} "
                              "(mark_unused() them, or enable find_unused); the communicator is aborted",
                              comm_->rank(), missing.size(), params_.size(), steps_ + 1, names),
                  true);
    }
  }
  if (sync_) {
    if (!verified_) verify_layout_locked();
    try_launch_locked();  // everything is complete now (and nothing was launched without overlap)
    for (size_t i = 0; i < buckets_.size(); ++i) {
      Bucket& b = buckets_[i];
      try {
        while (!b.work->wait(std::chrono::hours(1))) {
        }
      } catch (const Error& e) {
        fail_locked(e.code(), fmt::format("reducer finalize: the all-reduce of bucket {} failed: {}", i, e.what()), false);
      }
      if (b.compressed) {
        auto t0 = Clock::now();
        decompress(opt_.compression, b.wire.data(), static_cast<float*>(b.data()), b.plan.count);
        compress_ms_ += ms_between(t0, Clock::now());
      }
      if (!opt_.gradient_as_bucket_view) {
        for (size_t k = 0; k < b.plan.params.size(); ++k) {
          int p = b.plan.params[k];
          uint64_t esz = dtype_size(specs_[p].dtype);
          const char* src = static_cast<char*>(b.data()) + b.plan.offsets[k] * esz;
          if (dev_) {
            dev_->copy(params_[p].grad, src, specs_[p].count * esz);
          } else {
            std::memcpy(params_[p].grad, src, specs_[p].count * esz);
          }
        }
      }
    }
    if (dev_) dev_->release_to(stream);  // the caller's stream waits for the results, not the host
  }
  auto end = Clock::now();
  in_step_ = false;
  ++steps_;
  StepStats s = compute_stats_locked(end);
  if (sync_) {
    for (Param& p : params_) p.accumulated = false;
  }
  trace_step_locked(s, fin_begin, end);
  if (MetricsRegistry::enabled()) MetricsRegistry::instance().record_step("reducer", s.step_ms / 1e3, s.exposed_comm_ms / 1e3);
  WEFT_LOG_INFO("reducer step {}{}: step {:.3f} ms, backward {:.3f} ms, comm {:.3f} ms, exposed {:.3f} ms "
                "(sync overhead {:.1f}%), overlap ratio {:.2f}, {} buckets, {} bytes",
                s.step, s.synced ? "" : " (no_sync)", s.step_ms, s.backward_ms, s.comm_ms, s.exposed_comm_ms,
                100 * s.sync_overhead, s.overlap_ratio, s.buckets, s.wire_bytes);
  if (sync_ && opt_.rebuild_buckets && !rebuilt_) {
    rebuilt_ = true;
    rebuild_order_locked();
  }
  last_ = s;
  return s;
}

StepStats Reducer::compute_stats_locked(Clock::time_point end) {
  StepStats s;
  s.step = steps_;
  s.synced = sync_;
  Clock::time_point last = any_user_mark_ ? last_mark_ : step_begin_;
  s.step_ms = ms_between(step_begin_, end);
  s.backward_ms = reported_backward_ms_ >= 0 ? reported_backward_ms_ : std::max(0.0, ms_between(backward_begin_, last));
  s.tail_ms = ms_between(last, end);
  s.compress_ms = compress_ms_;
  if (sync_) {
    // Buckets may be in flight at once (the progress engine): communication time is the union of
    // their spans, and what is exposed the part of that union after the last gradient was ready.
    s.buckets = static_cast<int>(buckets_.size());
    std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
    for (const Bucket& b : buckets_) {
      spans.emplace_back(b.work->started_at(), b.work->finished_at());
      s.wire_bytes += b.wire_bytes();
    }
    std::sort(spans.begin(), spans.end());
    Clock::time_point from{}, to{};
    auto close = [&] {
      if (to <= from) return;
      s.comm_ms += ms_between(from, to);
      s.exposed_comm_ms += std::max(0.0, ms_between(std::max(from, last), to));
    };
    for (size_t i = 0; i < spans.size(); ++i) {
      if (i == 0 || spans[i].first > to) {
        if (i) close();
        from = spans[i].first, to = spans[i].second;
      } else {
        to = std::max(to, spans[i].second);
      }
    }
    if (!spans.empty()) close();
  }
  s.overlap_ratio = s.comm_ms > 0 ? std::clamp(1.0 - s.exposed_comm_ms / s.comm_ms, 0.0, 1.0) : 0.0;
  s.sync_overhead = s.step_ms > 0 ? s.exposed_comm_ms / s.step_ms : 0.0;
  return s;
}

void Reducer::trace_step_locked(const StepStats& s, Clock::time_point fin_begin, Clock::time_point end) {
  if (!timeline_.enabled()) return;
  Clock::time_point last = any_user_mark_ ? last_mark_ : step_begin_;
  Clock::time_point bw_end = reported_backward_ms_ >= 0
                                 ? backward_begin_ + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double, std::milli>(reported_backward_ms_))
                                 : last;
  timeline_.add({fmt::format("step {}", s.step), "step", Track::kStep, step_begin_, end,
                 fmt::format(R"({{"synced":{},"step_ms":{},"backward_ms":{},"comm_ms":{},"exposed_comm_ms":{},)"
                             R"("overlap_ratio":{},"sync_overhead":{}}})",
                             s.synced, s.step_ms, s.backward_ms, s.comm_ms, s.exposed_comm_ms, s.overlap_ratio,
                             s.sync_overhead)});
  timeline_.add({"backward", "compute", Track::kCompute, backward_begin_, bw_end, {}});
  timeline_.add({"finalize", "reducer", Track::kCompute, fin_begin, end, {}});
  if (!s.synced) return;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    std::string args = fmt::format(R"({{"bucket":{},"params":{},"dtype":"{}","bytes":{},"wire_bytes":{}}})", i,
                                   b.plan.params.size(), dtype_name(b.plan.dtype), b.plan.bytes(), b.wire_bytes());
    if (b.any_mark) timeline_.add({fmt::format("fill bucket {}", i), "bucket", Track::kBuckets, b.first_mark, b.ready, args});
    timeline_.add({fmt::format("all-reduce bucket {}", i), "comm", Track::kComm, b.ready, b.work->finished_at(), args});
  }
}

// Rank 0's ready order of the first synced step goes to every rank (a broadcast), so all ranks
// compute the same new layout; it is applied at the next begin_step().
void Reducer::rebuild_order_locked() {
  auto t0 = Clock::now();
  size_t n = params_.size();
  if (n == 0) return;
  std::vector<int64_t> order(n, -1);
  if (comm_->rank() == 0) std::copy(ready_order_.begin(), ready_order_.end(), order.begin());
  CollectiveArgs a;
  a.kind = CollectiveKind::kBroadcast;
  a.count = n;
  a.dtype = DataType::kInt64;
  a.root = 0;
  try {
    comm_->submit(a, order.data(), order.data());
  } catch (const Error& e) {
    fail_locked(e.code(), fmt::format("reducer: broadcasting the ready order for the bucket rebuild failed: {}", e.what()), false);
  }
  std::vector<int> perm(order.begin(), order.end());
  std::vector<char> seen(n, 0);
  for (int p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= n || seen[p]) {
      fail_locked(ErrorCode::kInvalidUsage, "reducer: rank 0's ready order is not a permutation of this rank's parameters", true);
    }
    seen[p] = 1;
  }
  auto plans = plan_buckets(specs_, perm, opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
  if (layout_hash(plans, specs_) != layout_hash(plans_, specs_)) pending_order_ = std::move(perm);
  timeline_.add({"agree on ready order", "reducer", Track::kStep, t0, Clock::now(), {}});
  WEFT_LOG_DEBUG("reducer: ready order agreed; {}", pending_order_.empty() ? "layout unchanged" : "rebuild at the next step");
}

StepStats Reducer::last_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

std::vector<BucketInfo> Reducer::buckets() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<BucketPlan>* plans = &plans_;
  std::vector<BucketPlan> preview;
  if (generation_ == 0 || !pending_order_.empty()) {  // what the next step will use
    std::vector<int> order = pending_order_;
    if (order.empty()) {
      for (int p = static_cast<int>(params_.size()) - 1; p >= 0; --p) order.push_back(p);
    }
    preview = plan_buckets(specs_, order, opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
    plans = &preview;
  }
  std::vector<BucketInfo> out;
  for (const BucketPlan& p : *plans) {
    bool compressed = opt_.compression != Compression::kNone && p.dtype == DataType::kFloat32;
    out.push_back(BucketInfo{p.dtype, p.count, p.bytes(), compressed ? p.count * 2 : p.bytes(), p.params});
  }
  return out;
}

std::string Reducer::layout() {
  std::vector<BucketInfo> b = buckets();
  std::vector<BucketPlan> plans;
  for (const BucketInfo& i : b) plans.push_back(BucketPlan{i.dtype, i.params, {}, i.count});
  return describe_layout(plans);
}

uint64_t Reducer::layout_generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

int Reducer::num_params() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(params_.size());
}

void Reducer::write_timeline() { timeline_.write(); }

}  // namespace weft::overlap
