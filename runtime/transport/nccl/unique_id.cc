#include "runtime/transport/nccl/unique_id.h"

#include "runtime/base/error.h"

namespace weft::nccl {

Bytes exchange_unique_id(Store& store, const std::string& key, int rank, size_t id_size,
                         const std::function<Bytes()>& make_id, Millis timeout) {
  if (rank == 0) {
    try {
      Bytes id = make_id();
      if (id.size() != id_size) fail(ErrorCode::kInternalError, "NCCL unique id of {} bytes, expected {}", id.size(), id_size);
      std::string rec(1, 'I');
      rec.append(id.begin(), id.end());
      store.set(key, to_bytes(rec));
      return id;
    } catch (const Error& e) {
      store.set(key, to_bytes(std::string("E") + e.what()));  // the others fail at once instead of waiting for the timeout
      throw;
    }
  }
  Bytes record = store.get(key, timeout);
  if (record.empty()) fail(ErrorCode::kInternalError, "NCCL unique id record '{}' is empty", key);
  if (record[0] == 'E') {
    fail(ErrorCode::kRemoteError, "rank 0 could not create the NCCL unique id: {}", std::string(record.begin() + 1, record.end()));
  }
  if (record[0] != 'I' || record.size() != id_size + 1) {
    fail(ErrorCode::kInternalError, "NCCL unique id record '{}' is malformed ({} bytes)", key, record.size());
  }
  return Bytes(record.begin() + 1, record.end());
}

}  // namespace weft::nccl
