#include "runtime/transport/ucx/ucx_transport.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string_view>

#include <thread>

#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace weft {

using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void ucx_fail(const char* what, ucs_status_t st) {
  fail(ErrorCode::kSystemError, "UCX {} failed: {}", what, ucs_status_string(st));
}
void ucx_check(const char* what, ucs_status_t st) {
  if (st != UCS_OK) ucx_fail(what, st);
}

// The UCP tag: the sender's rank in the top 16 bits, the caller's 48-bit tag below.
inline ucp_tag_t wire_tag(int src, uint64_t tag) { return (static_cast<uint64_t>(src) << kTagBits) | (tag & kTagMask); }

void send_cb(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<UcxTransport::Link*>(user_data)->op;
  if (!op) return;  // cut by shutdown: the operation has been failed and may be gone
  if (status != UCS_OK) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = ucs_status_string(status);
  }
  (void)request;  // freed by UcxTransport::sweep, never here: shutdown may still cancel it
  op->state.store(status == UCS_OK ? TransportOp::kDone : TransportOp::kFailed, std::memory_order_release);
}

void recv_cb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<UcxTransport::Link*>(user_data)->op;
  if (!op) return;  // cut by shutdown
  if (info) {
    op->bytes = info->length;
    op->sender_tag = info->sender_tag & kTagMask;
  }
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    op->error = ErrorCode::kInvalidUsage;
    op->error_message = "message truncated";
  } else if (status != UCS_OK) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = ucs_status_string(status);
  }
  (void)request;  // freed by UcxTransport::sweep, never here: shutdown may still cancel it
  op->state.store(status == UCS_OK ? TransportOp::kDone : TransportOp::kFailed, std::memory_order_release);
}

// True when UCX will reach other nodes over TCP only: UCX_TLS names only TCP and on-node
// transports, or (UCX_TLS unset or an exclusion list) the machine has no RDMA device.
bool tcp_only_network() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls && *tls && *tls != '^') {
    static const std::set<std::string> host_only = {"tcp", "self", "sm", "shm", "posix", "sysv", "mm", "cma", "knem", "xpmem"};
    std::string list(tls), tok;
    for (std::stringstream ss(list); std::getline(ss, tok, ',');) {
      if (!tok.empty() && !host_only.count(tok)) return false;
    }
    return true;
  }
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return ec || it == std::filesystem::directory_iterator();
}

}  // namespace

// Between nodes over TCP, UCX's rendezvous protocol (for messages above UCX_RNDV_THRESH) costs a
// round trip per message through the network's queues before any data moves, and buys nothing:
// TCP copies the bytes either way. Eager sends keep the link busy; measured on the emulated
// cluster (docs/PERFORMANCE.md "Emulated cluster"), 64 MiB hierarchical all-reduce over 2x2 nodes
// went from 0.69-0.73 s to 0.59-0.62 s. A UCX_RNDV_THRESH set by the user is left alone, as is any
// network with an RDMA device (rendezvous is UCX's zero-copy path there), and WEFT_UCX_EAGER=0
// turns this off.
bool UcxTransport::eager_over_tcp() {
  if (std::getenv("UCX_RNDV_THRESH")) return false;
  const char* e = std::getenv("WEFT_UCX_EAGER");
  if (e && *e) return std::string_view(e) != "0";
  return tcp_only_network();
}

UcxTransport::UcxTransport(std::shared_ptr<Store> store, int rank, int size, Millis timeout, bool peer_err_mode,
                           bool remote_only)
    : rank_(rank), size_(size) {
  if (size > 0xffff) fail(ErrorCode::kInvalidArgument, "UCX transport: {} ranks exceed the 65535 supported", size);
  ucp_config_t* config = nullptr;
  ucx_check("ucp_config_read", ucp_config_read(nullptr, nullptr, &config));
  if (remote_only && eager_over_tcp()) {
    if (ucs_status_t m = ucp_config_modify(config, "RNDV_THRESH", "inf"); m != UCS_OK) {
      WEFT_LOG_DEBUG("UCX: cannot set RNDV_THRESH=inf: {}", ucs_status_string(m));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(size);
  ucs_status_t st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  ucx_check("ucp_init", st);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(context_);
    ucx_fail("ucp_worker_create", st);
  }
  try {
    ucx_check("ucp_worker_get_efd", ucp_worker_get_efd(worker_, &efd_));

    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    ucx_check("ucp_worker_get_address", ucp_worker_get_address(worker_, &addr, &addr_len));
    Bytes mine(reinterpret_cast<uint8_t*>(addr), reinterpret_cast<uint8_t*>(addr) + addr_len);
    ucp_worker_release_address(worker_, addr);
    auto all = store_all_gather(*store, "ucx_addr", rank_, size_, mine, timeout);

    eps_.assign(size_, nullptr);
    failures_.assign(size_, std::string());
    for (int p = 0; p < size_; ++p) {
      auto arg = std::make_unique<EpErrorArg>(EpErrorArg{this, p});
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(all[p].data());
      ep.err_mode = peer_err_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
      ep.err_handler.cb = [](void* a, ucp_ep_h, ucs_status_t s) {
        auto* e = static_cast<EpErrorArg*>(a);
        e->self->on_peer_error(e->peer, s);
      };
      ep.err_handler.arg = arg.get();
      ucx_check("ucp_ep_create", ucp_ep_create(worker_, &ep, &eps_[p]));
      ep_args_.push_back(std::move(arg));
    }
    // Nobody may tear its worker down while a peer is still connecting to it: wait until every
    // rank has created its endpoints.
    store->add("ucx_connected", 1);
    auto deadline = Clock::now() + timeout;
    for (auto backoff = std::chrono::microseconds(50); store->add("ucx_connected", 0) < size_;
         backoff = std::min(backoff * 2, std::chrono::microseconds(20000))) {
      if (Clock::now() > deadline) {
        fail(ErrorCode::kTimeout, "UCX transport: not every rank connected within {} ms", timeout.count());
      }
      std::this_thread::sleep_for(backoff);
    }
  } catch (...) {
    // A peer that never connects (it died while a shrink built this transport, a timeout): the
    // worker, its endpoints and descriptors go with the error.
    close_endpoints(true);
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw;
  }
  outstanding_.reserve(1024);
}

UcxTransport::~UcxTransport() {
  if (!shut_) {
    // Let eager sends that completed locally reach their peers before the endpoints go.
    auto deadline = Clock::now() + std::chrono::seconds(5);
    ucp_request_param_t p{};
    void* req = ucp_worker_flush_nbx(worker_, &p);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
      if (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_request_cancel(worker_, req);
      ucp_request_free(req);
    }
    shutdown("transport closed");
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

void UcxTransport::on_peer_error(int peer, ucs_status_t status) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (failures_[peer].empty()) {
    failures_[peer] = fmt::format("connection to rank {} failed ({}): the rank may have died", peer, ucs_status_string(status));
  }
  WEFT_LOG_DEBUG("UCX endpoint to rank {} failed: {}", peer, ucs_status_string(status));
}

std::string UcxTransport::peer_failure(int peer) const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return failures_[peer];
}

UcxTransport::Link* UcxTransport::link(TransportOp* op) {
  Link* l;
  if (free_links_.empty()) {
    l = &links_.emplace_back();
  } else {
    l = free_links_.back();
    free_links_.pop_back();
  }
  l->op = op;
  return l;
}

void UcxTransport::track(void* request, bool is_recv, Link* l) { outstanding_.push_back({request, is_recv, l}); }

void UcxTransport::sweep() {
  // Requests are freed here rather than in their callbacks, so that every pointer in
  // outstanding_ stays valid until UCX has finished with it (shutdown may still cancel it).
  std::erase_if(outstanding_, [this](const Outstanding& o) {
    if (ucp_request_check_status(o.req) == UCS_INPROGRESS) return false;
    ucp_request_free(o.req);
    free_links_.push_back(o.link);
    return true;
  });
}

void UcxTransport::post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) {
  op->peer = peer;
  op->bytes = len;
  if (shut_) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = "transport shut down";
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  p.cb.send = send_cb;
  Link* l = link(op);
  p.user_data = l;
  p.datatype = ucp_dt_make_contig(1);
  void* req = ucp_tag_send_nbx(eps_[peer], buf, len, wire_tag(rank_, tag), &p);
  if (req == nullptr) {
    free_links_.push_back(l);
    op->state.store(TransportOp::kDone, std::memory_order_release);
  } else if (UCS_PTR_IS_ERR(req)) {
    free_links_.push_back(l);
    op->error = ErrorCode::kRemoteError;
    op->error_message = ucs_status_string(UCS_PTR_STATUS(req));
    op->state.store(TransportOp::kFailed, std::memory_order_release);
  } else {
    op->impl = req;
    track(req, false, l);
  }
}

void UcxTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) {
  op->peer = peer;
  if (shut_) {
    op->error = ErrorCode::kRemoteError;
    op->error_message = "transport shut down";
    op->state.store(TransportOp::kFailed, std::memory_order_release);
    return;
  }
  op->state.store(TransportOp::kPending, std::memory_order_relaxed);
  ucp_tag_recv_info_t info{};
  ucp_request_param_t p{};
  // UCX 1.13 does not fill recv_info when a receive completes immediately, so ask for the
  // callback always: it carries the length and the sender's tag, which the mismatch check needs.
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                   UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = recv_cb;
  Link* l = link(op);
  p.user_data = l;
  p.datatype = ucp_dt_make_contig(1);
  p.recv_info.tag_info = &info;
  ucp_tag_t full_mask = (uint64_t{0xffff} << kTagBits) | (mask & kTagMask);
  void* req = ucp_tag_recv_nbx(worker_, buf, len, wire_tag(peer, tag), full_mask, &p);
  if (req == nullptr) {
    free_links_.push_back(l);
    op->bytes = info.length;
    op->sender_tag = info.sender_tag & kTagMask;
    op->state.store(TransportOp::kDone, std::memory_order_release);
  } else if (UCS_PTR_IS_ERR(req)) {
    free_links_.push_back(l);
    ucs_status_t st = UCS_PTR_STATUS(req);
    op->error = st == UCS_ERR_MESSAGE_TRUNCATED ? ErrorCode::kInvalidUsage : ErrorCode::kRemoteError;
    op->error_message = ucs_status_string(st);
    op->state.store(TransportOp::kFailed, std::memory_order_release);
  } else {
    op->impl = req;
    track(req, true, l);
  }
}

bool UcxTransport::probe(int peer, uint64_t tag, uint64_t mask) {
  if (shut_) return false;
  ucp_tag_recv_info_t info{};
  const ucp_tag_t full_mask = (uint64_t{0xffff} << kTagBits) | (mask & kTagMask);
  return ucp_tag_probe_nb(worker_, wire_tag(peer, tag), full_mask, 0, &info) != nullptr;  // 0: leave it there
}

bool UcxTransport::progress() {
  bool any = false;
  while (ucp_worker_progress(worker_)) any = true;
  if (any || outstanding_.size() > 256) sweep();
  return any;
}

void UcxTransport::wait_for_event(Clock::time_point deadline) {
  if (progress()) return;
  ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_ERR_BUSY) return;
  if (st != UCS_OK) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    return;
  }
  // Microsecond resolution: a mixed transport (shared memory + UCX) sleeps here for 200 us at a
  // time, which poll()'s milliseconds would truncate to a busy loop.
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count();
  left = std::clamp<int64_t>(left, 0, 1'000'000'000);
  timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
  pollfd pfd{efd_, POLLIN, 0};
  ::ppoll(&pfd, 1, &ts, nullptr);
}

void UcxTransport::interrupt() { ucp_worker_signal(worker_); }

void UcxTransport::shutdown(const std::string& why) {
  if (shut_) return;
  shut_ = true;
  // Cancel receives, force-close endpoints (which fails their sends), and progress until every
  // operation has completed, so that nothing touches the caller's buffers afterwards.
  // Receives (which write into the caller's buffers) must be gone before this returns; sends
  // only read, and a rendezvous send whose peer never asks for the data may stay pending for
  // ever, so they get a short grace and are then left to the worker's destruction.
  sweep();
  for (auto& o : outstanding_) ucp_request_cancel(worker_, o.req);
  close_endpoints(true);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  auto send_grace = Clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    ucp_worker_progress(worker_);
    sweep();
    bool recv_pending = false;
    for (auto& o : outstanding_) recv_pending |= o.is_recv;
    if (outstanding_.empty() || (!recv_pending && Clock::now() > send_grace)) break;
    if (Clock::now() > deadline) {
      WEFT_LOG_ERROR("UCX shutdown: {} operations still pending after 10 s ({})", outstanding_.size(), why);
      break;
    }
  }
  // What UCX still holds (sends whose peer never asked for the data) fails now, and its callback
  // is cut off from the operation: each one has left kPending when this returns.
  for (auto& o : outstanding_) {
    if (TransportOp* op = o.link->op) {
      op->error = ErrorCode::kRemoteError;
      op->error_message = why;
      op->state.store(TransportOp::kFailed, std::memory_order_release);
      o.link->op = nullptr;
    }
  }
}

void UcxTransport::close_endpoints(bool force) {
  std::vector<void*> reqs;
  for (auto& ep : eps_) {
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* r = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(r)) reqs.push_back(r);
    ep = nullptr;
  }
  auto deadline = Clock::now() + std::chrono::seconds(5);
  for (void* r : reqs) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
    ucp_request_free(r);
  }
}

}  // namespace weft
