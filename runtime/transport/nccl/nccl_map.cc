#include "runtime/transport/nccl/nccl_map.h"

namespace weft::nccl {

ncclDataType_t to_nccl(DataType t) {
  switch (t) {
    case DataType::kInt8: return ncclInt8;
    case DataType::kUint8: return ncclUint8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBfloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
  }
  fail(ErrorCode::kInvalidArgument, "data type {} has no NCCL equivalent", static_cast<int>(t));
}

ncclRedOp_t to_nccl(RedOp op) {
  switch (op) {
    case RedOp::kSum: return ncclSum;
    case RedOp::kProd: return ncclProd;
    case RedOp::kMin: return ncclMin;
    case RedOp::kMax: return ncclMax;
    case RedOp::kAvg: return ncclAvg;
  }
  fail(ErrorCode::kInvalidArgument, "reduction op {} has no NCCL equivalent", static_cast<int>(op));
}

ErrorCode error_code_of(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: case ncclInProgress: return ErrorCode::kSuccess;
    case ncclUnhandledCudaError: case ncclSystemError: return ErrorCode::kSystemError;
    case ncclInternalError: return ErrorCode::kInternalError;
    case ncclInvalidArgument: return ErrorCode::kInvalidArgument;
    case ncclInvalidUsage: return ErrorCode::kInvalidUsage;
    case ncclRemoteError: return ErrorCode::kRemoteError;
    default: return ErrorCode::kInternalError;
  }
}

std::string describe(ncclResult_t r) {
  const char* name = "ncclResult";
  switch (r) {
    case ncclSuccess: name = "ncclSuccess"; break;
    case ncclUnhandledCudaError: name = "ncclUnhandledCudaError"; break;
    case ncclSystemError: name = "ncclSystemError"; break;
    case ncclInternalError: name = "ncclInternalError"; break;
    case ncclInvalidArgument: name = "ncclInvalidArgument"; break;
    case ncclInvalidUsage: name = "ncclInvalidUsage"; break;
    case ncclRemoteError: name = "ncclRemoteError"; break;
    case ncclInProgress: name = "ncclInProgress"; break;
    default: break;
  }
  return fmt::format("{} ({})", name, ncclGetErrorString(r));
}

void check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw Error(error_code_of(r), fmt::format("NCCL: {} failed: {}", what, describe(r)));
}

}  // namespace weft::nccl
