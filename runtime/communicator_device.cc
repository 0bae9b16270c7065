// Communicator's NCCL path (docs/GPU.md): the device-buffer operation, with the NCCL communicator
// created on first use. Compiled in every build; without NCCL it only refuses.
#include "runtime/communicator.h"
#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include "runtime/nccl/nccl_comm.h"
#endif

namespace weft {

using Clock = std::chrono::steady_clock;

void Communicator::run_device(Work& w, Clock::time_point t0) {
#if WEFT_HAVE_NCCL
  nccl::WaitCtl ctl;
  ctl.deadline = t0 + config_.timeout;
  ctl.abort = &abort_;
  ctl.poll = [this] { check_remote_abort(); };
  ctl.what = describe_call(w.args_, w.seq_);
  std::shared_ptr<nccl::NcclComm> nc;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nc = nccl_;
  }
  if (!nc) {
    // Only the executing thread gets here (one operation at a time), so there is one creation.
    nc = nccl::NcclComm::create(*store_, rank_, size_, w.device_, ctl);
    std::lock_guard<std::mutex> lock(nccl_mu_);
    nccl_ = nc;
  }
  if (nc->device() != w.device_) {
    fail(ErrorCode::kInvalidUsage, "{}: the buffers are on device {} but this communicator's NCCL communicator is on device {} "
         "(one device per communicator)", ctl.what, w.device_, nc->device());
  }
  nc->run(w.args_, w.send_, w.recv_, w.on_stream_ ? w.stream_ : nullptr, ctl);
#else
  (void)t0;
  fail(ErrorCode::kInvalidUsage, "{}: device buffers need NCCL: Weft was built without it", collective_name(w.args_.kind));
#endif
}

}  // namespace weft
