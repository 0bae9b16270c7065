// The NCCL unique id travels through Weft's store: rank 0 makes it and publishes it, the others
// read it. Nothing here needs NCCL or a device: the id is opaque bytes (tests use a fake one).
#pragma once
#include <functional>
#include <string>

#include "runtime/store/store.h"

namespace weft::nccl {

// Rank 0 calls make_id() and publishes the result under key; every other rank waits for it (up to
// timeout). A record is "I" + id bytes, or "E" + message when make_id threw on rank 0: the others
// then fail with kRemoteError naming rank 0's error instead of timing out. An id whose size is not
// id_size is kInternalError. Returns the id on every rank.
Bytes exchange_unique_id(Store& store, const std::string& key, int rank, size_t id_size,
                         const std::function<Bytes()>& make_id, Millis timeout);

}  // namespace weft::nccl
