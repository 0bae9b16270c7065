// Reducer: registration, bucket building, marks and launches. finalize() and what follows it are
// in reducer_finalize.cc.
#include <algorithm>
#include <numeric>

#include "overlap/reducer_impl.h"
#include "runtime/base/config.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace weft::overlap {

namespace {
std::string timeline_path_for(const ReducerOptions& o, int rank) {
  std::string p = o.timeline_path;
  if (p.empty()) p = process_env()("WEFT_TIMELINE").value_or("");
  return p.empty() ? p : Timeline::rank_path(p, rank);
}
}  // namespace

Reducer::Reducer(std::shared_ptr<Communicator> comm, ReducerOptions options)
    : comm_(std::move(comm)),
      opt_(std::move(options)),
      timeline_(comm_ ? timeline_path_for(opt_, comm_->rank()) : "", comm_ ? comm_->rank() : 0) {
  require(comm_ != nullptr, "reducer: no communicator");
  require(opt_.bucket_cap_bytes > 0 && opt_.first_bucket_cap_bytes > 0, "reducer: bucket caps must be positive");
}

Reducer::~Reducer() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Bucket& b : buckets_) {
    if (!b.work) continue;
    try {
      while (!b.work->wait(std::chrono::hours(1))) {
      }
    } catch (const std::exception&) {
    }
  }
  if (dev_) {
    // The bucket memory goes after this. Stream all-reduces are waited for by nobody else: if one
    // never ends (a dead peer), abort the communicator, which ends NCCL's kernels.
    try {
      dev_->synchronize(comm_->config().timeout);
    } catch (const std::exception& e) {
      WEFT_LOG_WARN("reducer: {}; aborting the communicator", e.what());
      comm_->abort(e.what());
    }
  }
  try {
    timeline_.write();
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("reducer: {}", e.what());
  }
}

void Reducer::check_usable_locked(const char* fn) {
  if (!broken_.empty()) fail(ErrorCode::kInvalidUsage, "reducer {}: the reducer failed earlier: {}", fn, broken_);
}

void Reducer::fail_locked(ErrorCode code, const std::string& message, bool abort_comm) {
  broken_ = message;
  WEFT_LOG_ERROR("{}", message);
  if (abort_comm && comm_->size() > 1) comm_->abort(message);
  throw Error(code, message);
}

int Reducer::add_param(void* grad, uint64_t count, DataType dtype, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable_locked("add_param");
  if (!buckets_.empty() || generation_ > 0) {
    fail(ErrorCode::kInvalidUsage, "reducer add_param('{}'): parameters are registered before the first step", name);
  }
  require(dtype_valid(static_cast<int>(dtype)), "reducer add_param('{}'): invalid data type", name);
  require(count > 0, "reducer add_param('{}'): count is 0", name);
  require(grad != nullptr || opt_.gradient_as_bucket_view,
          "reducer add_param('{}'): the gradient pointer is null (allowed only in bucket-view mode)", name);
  if (name.empty()) name = "param" + std::to_string(params_.size());
  if (grad) {
    int dev = DeviceSide::device_of(grad);
    if (grad_device_ == -2) {
      if (dev >= 0 && opt_.compression != Compression::kNone) {
        fail(ErrorCode::kInvalidUsage, "reducer add_param('{}'): compression works on host gradients only; this one is on device {}",
             name, dev);
      }
      if (dev >= 0) dev_ = std::make_unique<DeviceSide>(dev);
      grad_device_ = dev;
    } else if (dev != grad_device_) {
      auto where = [](int d) { return d < 0 ? std::string("host memory") : fmt::format("device {}", d); };
      fail(ErrorCode::kInvalidArgument, "reducer add_param('{}'): the gradient is in {} but the earlier ones are in {}; all "
           "gradients of a reducer are host memory or all on one device", name, where(dev), where(grad_device_));
    }
  }
  Param p;
  p.grad = grad;
  params_.push_back(p);
  specs_.push_back(ParamSpec{count, dtype, std::move(name)});
  return static_cast<int>(params_.size()) - 1;
}

void Reducer::build_locked(const std::vector<int>& order) {
  std::vector<BucketPlan> plans = plan_buckets(specs_, order, opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
  std::vector<Bucket> fresh(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    Bucket& b = fresh[i];
    b.plan = plans[i];
    if (dev_) {
      b.device = dev_->alloc(b.plan.bytes());
    } else {
      b.storage.assign((b.plan.bytes() + 7) / 8, 0);
    }
    b.compressed = opt_.compression != Compression::kNone && b.plan.dtype == DataType::kFloat32;
    if (b.compressed) b.wire.assign(b.plan.count, 0);
  }
  // Move the contents (bucket views may hold accumulated gradients) and re-point the parameters.
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (size_t k = 0; k < fresh[i].plan.params.size(); ++k) {
      int p = fresh[i].plan.params[k];
      Param& pr = params_[p];
      uint64_t esz = dtype_size(specs_[p].dtype);
      char* dst = static_cast<char*>(fresh[i].data()) + fresh[i].plan.offsets[k] * esz;
      if (pr.bucket >= 0) {
        const char* src = static_cast<char*>(buckets_[pr.bucket].data()) + pr.offset * esz;
        if (dev_) {
          dev_->copy(dst, src, specs_[p].count * esz);
        } else {
          std::memcpy(dst, src, specs_[p].count * esz);
        }
      }
    }
  }
  // Device: the zero-fills and moves are done before a bucket view is handed out or an old bucket
  // is freed (below): one host wait per (re)build.
  if (dev_) dev_->synchronize(comm_->config().timeout);
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (size_t k = 0; k < fresh[i].plan.params.size(); ++k) {
      params_[fresh[i].plan.params[k]].bucket = static_cast<int>(i);
      params_[fresh[i].plan.params[k]].offset = fresh[i].plan.offsets[k];
    }
  }
  buckets_ = std::move(fresh);
  plans_ = std::move(plans);
  ++generation_;
  verified_ = false;
  WEFT_LOG_INFO("reducer: layout {}: {}", generation_, describe_layout(plans_));
}

void* Reducer::grad_view(int param) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable_locked("grad_view");
  require(param >= 0 && static_cast<size_t>(param) < params_.size(), "reducer grad_view: no parameter {}", param);
  if (generation_ == 0) {
    std::vector<int> order(params_.size());
    std::iota(order.rbegin(), order.rend(), 0);
    build_locked(order);
  }
  const Param& p = params_[param];
  return static_cast<char*>(buckets_[p.bucket].data()) + p.offset * dtype_size(specs_[param].dtype);
}

void Reducer::begin_step(bool sync) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable_locked("begin_step");
  if (in_step_) fail(ErrorCode::kInvalidUsage, "reducer begin_step: step {} is still in progress (call finalize first)", steps_ + 1);
  begin_step_locked(sync, Clock::now());
}

void Reducer::begin_step_locked(bool sync, Clock::time_point now) {
  if (generation_ == 0) {
    std::vector<int> order(params_.size());
    std::iota(order.rbegin(), order.rend(), 0);
    build_locked(order);
  }
  if (!pending_order_.empty()) {
    auto t0 = Clock::now();
    build_locked(pending_order_);
    pending_order_.clear();
    timeline_.add({"rebuild buckets", "reducer", Track::kStep, t0, Clock::now(), {}});
  }
  in_step_ = true;
  sync_ = sync;
  for (Param& p : params_) p.ready = false;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.plan.params.size());
    b.launched = b.any_mark = false;
    b.work.reset();
  }
  next_launch_ = marked_ = 0;
  ready_order_.clear();
  step_begin_ = backward_begin_ = now;
  any_user_mark_ = false;
  reported_backward_ms_ = -1;
  compress_ms_ = 0;
}

void Reducer::begin_backward() {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable_locked("begin_backward");
  if (!in_step_) begin_step_locked(true, Clock::now());
  backward_begin_ = Clock::now();
}

void Reducer::set_backward_ms(double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  require(ms >= 0, "reducer set_backward_ms: negative time");
  reported_backward_ms_ = ms;
}

void Reducer::mark_ready(int param) { mark_ready(param, nullptr); }

void Reducer::mark_ready(int param, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  mark_locked(param, false, "mark_ready", stream);
}

bool Reducer::on_device() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dev_ != nullptr;
}

void Reducer::mark_unused(int param) {
  std::lock_guard<std::mutex> lock(mu_);
  mark_locked(param, true, "mark_unused");
}

void Reducer::mark_locked(int param, bool unused, const char* fn, void* stream) {
  check_usable_locked(fn);
  require(param >= 0 && static_cast<size_t>(param) < params_.size(), "reducer {}: no parameter {} (there are {})", fn,
          param, params_.size());
  auto now = Clock::now();
  bool from_user = std::string_view(fn) != "finalize";
  if (!in_step_) begin_step_locked(true, now);
  Param& p = params_[param];
  if (p.ready) {
    fail(ErrorCode::kInvalidUsage, "reducer {}: parameter '{}' (index {}) was already marked in step {}", fn,
         specs_[param].name, param, steps_ + 1);
  }
  p.ready = true;
  ++marked_;
  ready_order_.push_back(param);
  if (from_user) {
    last_mark_ = now;
    any_user_mark_ = true;
  }
  if (!sync_) {
    if (!unused) p.accumulated = true;
    return;
  }
  if (unused && p.accumulated) unused = false;  // earlier no_sync steps left a gradient: send it
  Bucket& b = buckets_[p.bucket];
  if (!b.any_mark) {
    b.any_mark = true;
    b.first_mark = now;
  }
  uint64_t bytes = specs_[param].count * dtype_size(specs_[param].dtype);
  char* slot = static_cast<char*>(b.data()) + p.offset * dtype_size(specs_[param].dtype);
  if (dev_) {
    // On the communication stream, after what the producer's stream has done so far.
    if (unused) {
      dev_->zero(slot, bytes);
    } else {
      dev_->after(stream);
      if (!opt_.gradient_as_bucket_view) dev_->copy(slot, p.grad, bytes);
    }
  } else if (unused) {
    std::memset(slot, 0, bytes);
  } else if (!opt_.gradient_as_bucket_view) {
    std::memcpy(slot, p.grad, bytes);
  }
  --b.pending;
  if (opt_.overlap) try_launch_locked();
}

// Buckets go out strictly in index order, so every rank issues the same collectives in the same
// order whatever order its gradients arrive in.
void Reducer::try_launch_locked() {
  while (next_launch_ < static_cast<int>(buckets_.size()) && buckets_[next_launch_].pending == 0) {
    int i = next_launch_++;
    launch_locked(buckets_[i], i);
  }
}

void Reducer::launch_locked(Bucket& b, int index) {
  if (!verified_) verify_layout_locked();
  b.ready = Clock::now();
  b.launched = true;
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllReduce;
  a.count = b.plan.count;
  try {
    if (b.compressed) {
      float scale = opt_.average ? 1.0f / static_cast<float>(comm_->size()) : 1.0f;
      compress(opt_.compression, static_cast<const float*>(b.data()), b.wire.data(), b.plan.count, scale);
      compress_ms_ += ms_between(b.ready, Clock::now());
      a.dtype = opt_.compression == Compression::kFloat16 ? DataType::kFloat16 : DataType::kBfloat16;
      a.op = RedOp::kSum;
      b.work = comm_->submit(a, b.wire.data(), b.wire.data(), SubmitMode::kAsync);
    } else {
      a.dtype = b.plan.dtype;
      a.op = opt_.average ? RedOp::kAvg : RedOp::kSum;
      if (dev_) {
        // The NCCL stream path on the communication stream: returns once NCCL accepted it.
        b.work = comm_->submit(a, b.data(), b.data(), SubmitMode::kOnStream, dev_->stream());
      } else {
        b.work = comm_->submit(a, b.data(), b.data(), SubmitMode::kAsync);
      }
    }
  } catch (const Error& e) {
    fail_locked(e.code(), fmt::format("reducer: launching bucket {} failed: {}", index, e.what()), false);
  }
}

// One small all-gather per (re)build: every rank sees every rank's layout summary, so a mismatch
// fails on all ranks at the same point instead of hanging in mismatched all-reduces.
void Reducer::verify_layout_locked() {
  auto t0 = Clock::now();
  uint64_t total = 0;
  for (const BucketPlan& p : plans_) total += p.bytes();
  uint64_t mine[4] = {layout_hash(plans_, specs_), params_.size(), plans_.size(), total};
  int n = comm_->size();
  std::vector<uint64_t> all(4 * static_cast<size_t>(n));
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllGather;
  a.count = 4;
  a.dtype = DataType::kInt64;
  try {
    comm_->submit(a, mine, all.data());
  } catch (const Error& e) {
    fail_locked(e.code(), fmt::format("reducer: the bucket layout check failed: {}", e.what()), false);
  }
  auto describe = [&](int r) {
    const uint64_t* v = &all[4 * r];
    return fmt::format("rank {} has {} parameters in {} buckets of {} bytes (layout hash {:016x})", r, v[1], v[2], v[3], v[0]);
  };
  std::vector<int> differ;
  for (int r = 1; r < n; ++r) {
    if (!std::equal(&all[4 * r], &all[4 * r] + 4, &all[0])) differ.push_back(r);
  }
  if (!differ.empty()) {
    std::string msg = fmt::format("reducer: bucket layouts differ across ranks (layout {}): {}", generation_, describe(0));
    for (size_t i = 0; i < differ.size() && i < 4; ++i) msg += "; " + describe(differ[i]);
    if (differ.size() > 4) msg += fmt::format("; and {} more ranks", differ.size() - 4);
    msg += ". Register the same parameters (count and type) in the same order on every rank, with the same bucket caps.";
    fail_locked(ErrorCode::kInvalidUsage, msg, false);
  }
  verified_ = true;
  timeline_.add({"layout check", "reducer", Track::kStep, t0, Clock::now(), {}});
}

}  // namespace weft::overlap
