// Mappings between Weft's vocabulary and NCCL's: data types, reduction ops and result codes.
// Pure functions, no device needed (unit-tested in tests/gpu/test_nccl_unit.cc).
#pragma once
#include <nccl.h>

#include <string>

#include "collectives/datatype.h"
#include "runtime/base/error.h"

namespace weft::nccl {

ncclDataType_t to_nccl(DataType t);
ncclRedOp_t to_nccl(RedOp op);
// The weft::ErrorCode for an NCCL result (ncclSuccess -> kSuccess; ncclInProgress is not an error
// and maps to kSuccess too; callers poll it).
ErrorCode error_code_of(ncclResult_t r);
// Throws weft::Error with error_code_of(r) and a message naming the call, unless r is
// ncclSuccess or ncclInProgress.
void check(ncclResult_t r, const char* what);
// A message for an NCCL result: "ncclRemoteError (remote process exited or ...)".
std::string describe(ncclResult_t r);

}  // namespace weft::nccl
