// What other C API files (overlap/c_api_reducer.cc) need from runtime/c_api.cc: the live
// communicator behind a handle and the error recording of weftCommGetLastError /
// weftGetLastErrorMessage.
#pragma once
#include <weft/weft.h>

#include <memory>
#include <string>

#include "runtime/communicator.h"

namespace weft::capi {
// The communicator of a live handle; throws weft::Error naming fn otherwise.
std::shared_ptr<Communicator> comm_of(weftComm_t comm, const char* fn);
// Records msg as this thread's (and comm's, when live) last error; returns code.
weftResult_t record_error(weftComm_t comm, weftResult_t code, const std::string& msg);
}  // namespace weft::capi
