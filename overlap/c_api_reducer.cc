// The reducer's C API (weftReducer* in weft.h): handle registry, argument checks, and
// weft::Error -> weftResult_t with the message recorded for weftGetLastErrorMessage and
// weftCommGetLastError.
#include <weft/weft.h>

#include <mutex>
#include <unordered_set>

#include "overlap/reducer.h"
#include "runtime/api/c_api_internal.h"

struct weftReducer {
  weftComm_t comm;
  std::unique_ptr<weft::overlap::Reducer> impl;
};

namespace {

using weft::Error;
using weft::ErrorCode;

std::mutex g_mu;
std::unordered_set<weftReducer_t> g_reducers;

using weft::capi::guarded;

// Runs f on a live reducer's implementation.
template <typename F>
weftResult_t with_reducer(weftReducer_t r, const char* fn, F&& f) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!r || !g_reducers.count(r)) {
      return weft::capi::record_error(nullptr, r ? weftInvalidUsage : weftInvalidArgument,
                                      std::string(fn) + (r ? ": not a live reducer (destroyed, or never created)" : ": reducer is NULL"));
    }
  }
  return guarded(r->comm, [&] { f(*r->impl); });
}

weftResult_t finalize_on(weftReducer_t r, weftStepStats_t* stats, void* stream, const char* fn) {
  return with_reducer(r, fn, [&](weft::overlap::Reducer& impl) {
    weft::overlap::StepStats s = impl.finalize(stream);
    if (!stats) return;
    *stats = weftStepStats_t{s.step, s.synced ? 1 : 0, s.buckets, s.wire_bytes, s.step_ms, s.backward_ms, s.comm_ms,
                             s.exposed_comm_ms, s.tail_ms, s.compress_ms, s.overlap_ratio, s.sync_overhead};
  });
}

}  // namespace

extern "C" {

weftResult_t weftReducerConfigInit(weftReducerConfig_t* c) {
  if (!c) return weft::capi::record_error(nullptr, weftInvalidArgument, "weftReducerConfigInit: config is NULL");
  weft::overlap::ReducerOptions d;
  *c = weftReducerConfig_t{};
  c->bucketCapBytes = d.bucket_cap_bytes;
  c->firstBucketCapBytes = d.first_bucket_cap_bytes;
  c->average = d.average;
  c->gradientAsBucketView = d.gradient_as_bucket_view;
  c->findUnused = d.find_unused;
  c->rebuildBuckets = d.rebuild_buckets;
  c->overlap = d.overlap;
  c->compression = weftCompressNone;
  c->timelinePath = nullptr;
  return weftSuccess;
}

weftResult_t weftReducerCreate(weftComm_t comm, const weftReducerConfig_t* config, weftReducer_t* reducer) {
  if (!reducer) return weft::capi::record_error(comm, weftInvalidArgument, "weftReducerCreate: reducer is NULL");
  *reducer = nullptr;
  return guarded(comm, [&] {
    auto c = weft::capi::comm_of(comm, "weftReducerCreate");
    weftReducerConfig_t cfg;
    weftReducerConfigInit(&cfg);
    if (config) cfg = *config;
    if (cfg.compression < weftCompressNone || cfg.compression > weftCompressBfloat16) {
      throw Error(ErrorCode::kInvalidArgument, "weftReducerCreate: compression is not a weftCompression_t");
    }
    weft::overlap::ReducerOptions o;
    o.bucket_cap_bytes = cfg.bucketCapBytes;
    o.first_bucket_cap_bytes = cfg.firstBucketCapBytes;
    o.average = cfg.average != 0;
    o.gradient_as_bucket_view = cfg.gradientAsBucketView != 0;
    o.find_unused = cfg.findUnused != 0;
    o.rebuild_buckets = cfg.rebuildBuckets != 0;
    o.overlap = cfg.overlap != 0;
    o.compression = static_cast<weft::overlap::Compression>(cfg.compression);
    if (cfg.timelinePath) o.timeline_path = cfg.timelinePath;
    auto* r = new weftReducer{comm, std::make_unique<weft::overlap::Reducer>(std::move(c), o)};
    std::lock_guard<std::mutex> lock(g_mu);
    g_reducers.insert(r);
    *reducer = r;
  });
}

weftResult_t weftReducerAddParam(weftReducer_t r, void* grad, size_t count, weftDataType_t dt, const char* name, int* index) {
  return with_reducer(r, "weftReducerAddParam", [&](weft::overlap::Reducer& impl) {
    if (!weft::dtype_valid(dt)) throw Error(ErrorCode::kInvalidArgument, "weftReducerAddParam: datatype is not a weftDataType_t");
    int i = impl.add_param(grad, count, static_cast<weft::DataType>(dt), name ? name : "");
    if (index) *index = i;
  });
}

weftResult_t weftReducerGradView(weftReducer_t r, int index, void** view) {
  return with_reducer(r, "weftReducerGradView", [&](weft::overlap::Reducer& impl) {
    if (!view) throw Error(ErrorCode::kInvalidArgument, "weftReducerGradView: view is NULL");
    *view = impl.grad_view(index);
  });
}

weftResult_t weftReducerBeginStep(weftReducer_t r, int sync) {
  return with_reducer(r, "weftReducerBeginStep", [&](weft::overlap::Reducer& impl) { impl.begin_step(sync != 0); });
}

weftResult_t weftReducerSetBackwardTime(weftReducer_t r, double ms) {
  return with_reducer(r, "weftReducerSetBackwardTime", [&](weft::overlap::Reducer& impl) { impl.set_backward_ms(ms); });
}

weftResult_t weftReducerMarkReady(weftReducer_t r, int index) {
  return with_reducer(r, "weftReducerMarkReady", [&](weft::overlap::Reducer& impl) { impl.mark_ready(index); });
}

weftResult_t weftReducerMarkReadyStream(weftReducer_t r, int index, void* stream) {
  return with_reducer(r, "weftReducerMarkReadyStream", [&](weft::overlap::Reducer& impl) { impl.mark_ready(index, stream); });
}

weftResult_t weftReducerMarkUnused(weftReducer_t r, int index) {
  return with_reducer(r, "weftReducerMarkUnused", [&](weft::overlap::Reducer& impl) { impl.mark_unused(index); });
}

weftResult_t weftReducerFinalizeStream(weftReducer_t r, weftStepStats_t* stats, void* stream) {
  return finalize_on(r, stats, stream, "weftReducerFinalizeStream");
}

weftResult_t weftReducerFinalize(weftReducer_t r, weftStepStats_t* stats) {
  return finalize_on(r, stats, nullptr, "weftReducerFinalize");
}

weftResult_t weftReducerBucketCount(weftReducer_t r, int* count) {
  return with_reducer(r, "weftReducerBucketCount", [&](weft::overlap::Reducer& impl) {
    if (!count) throw Error(ErrorCode::kInvalidArgument, "weftReducerBucketCount: count is NULL");
    *count = static_cast<int>(impl.buckets().size());
  });
}

weftResult_t weftReducerDestroy(weftReducer_t r) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!r || !g_reducers.count(r)) {
      return weft::capi::record_error(nullptr, r ? weftInvalidUsage : weftInvalidArgument,
                                      r ? "weftReducerDestroy: not a live reducer" : "weftReducerDestroy: reducer is NULL");
    }
    g_reducers.erase(r);
  }
  weftComm_t comm = r->comm;
  return guarded(comm, [&] { delete r; });
}

}  // extern "C"
