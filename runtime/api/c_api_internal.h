// What other C API files (overlap/c_api_reducer.cc) need from runtime/api/c_api.cc: the live
// communicator behind a handle and the error recording of weftCommGetLastError /
// weftGetLastErrorMessage.
#pragma once
#include <weft/weft.h>

#include <memory>
#include <string>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/comm/communicator.h"

namespace weft::capi {
// The communicator of a live handle; throws weft::Error naming fn otherwise.
std::shared_ptr<Communicator> comm_of(weftComm_t comm, const char* fn);
// Records msg as this thread's (and comm's, when live) last error; returns code.
weftResult_t record_error(weftComm_t comm, weftResult_t code, const std::string& msg);

// The one mapping from exceptions to results at the C boundary: runs f; weft::Error becomes its
// code, std::bad_alloc weftSystemError, anything else weftInternalError, each message recorded
// (weftGetLastErrorMessage, weftCommGetLastError).
template <typename F>
weftResult_t guarded(weftComm_t comm, F&& f) {
  try {
    f();
    return weftSuccess;
  } catch (const Error& e) {
    WEFT_LOG_DEBUG("{}", e.what());
    return record_error(comm, static_cast<weftResult_t>(static_cast<int>(e.code())), e.what());
  } catch (const std::bad_alloc&) {
    return record_error(comm, weftSystemError, "out of memory");
  } catch (const std::exception& e) {
    return record_error(comm, weftInternalError, e.what());
  }
}
}  // namespace weft::capi
