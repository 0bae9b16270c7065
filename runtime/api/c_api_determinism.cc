// The C API of deterministic mode (docs/DETERMINISM.md): weftCommSetDeterministic,
// weftCommGetDeterministic and weftAllReduceShards.
#include <fmt/format.h>

#include "collectives/datatype.h"
#include "runtime/api/c_api_internal.h"
#include "runtime/comm/shards.h"

using weft::capi::comm_of;
using weft::capi::guarded;
using weft::capi::record_error;

weftResult_t weftCommSetDeterministic(weftComm_t comm, int deterministic) {
  if (deterministic != 0 && deterministic != 1)
    return record_error(comm, weftInvalidArgument,
                        fmt::format("weftCommSetDeterministic: deterministic must be 0 or 1 (got {})", deterministic));
  return guarded(comm, [&] { comm_of(comm, "weftCommSetDeterministic")->set_deterministic(deterministic == 1); });
}

weftResult_t weftCommGetDeterministic(weftComm_t comm, int* deterministic) {
  if (!deterministic) return record_error(comm, weftInvalidArgument, "weftCommGetDeterministic: output is NULL");
  return guarded(comm, [&] { *deterministic = comm_of(comm, "weftCommGetDeterministic")->deterministic() ? 1 : 0; });
}

weftResult_t weftAllReduceShards(const void* sendbuff, void* recvbuff, size_t count, int shards, weftDataType_t datatype,
                                 weftRedOp_t op, weftComm_t comm) {
  return guarded(comm, [&] {
    auto c = comm_of(comm, "weftAllReduceShards");
    if (!weft::dtype_valid(datatype))
      weft::fail(weft::ErrorCode::kInvalidArgument, "weftAllReduceShards: datatype {} is not a weftDataType_t",
                 static_cast<int>(datatype));
    if (!weft::redop_valid(op))
      weft::fail(weft::ErrorCode::kInvalidArgument, "weftAllReduceShards: op {} is not a weftRedOp_t", static_cast<int>(op));
    if (count > 0 && (!sendbuff || !recvbuff))
      weft::fail(weft::ErrorCode::kInvalidArgument, "weftAllReduceShards: {} is NULL", sendbuff ? "recvbuff" : "sendbuff");
    weft::all_reduce_shards(*c, sendbuff, recvbuff, count, shards, static_cast<weft::DataType>(datatype),
                            static_cast<weft::RedOp>(op));
  });
}
