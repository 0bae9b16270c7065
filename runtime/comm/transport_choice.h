// Which transport a communicator's ranks talk over, and making it.
#pragma once
#include <memory>

#include "runtime/base/config.h"
#include "runtime/comm/membership.h"
#include "runtime/transport/transport.h"

namespace weft {

class InprocFabric;
class Store;

// kUcx: between processes — Weft's shared memory within a node and UCX across nodes, unless
// WEFT_TRANSPORT=ucx asks for UCX everywhere; kShm: shared memory within the node (UCX across);
// kInproc: thread-ranks of one process (tests).
enum class TransportKind { kUcx, kInproc, kShm };

// Collective over the members (the transports exchange their addresses through the store).
std::unique_ptr<Transport> make_transport(TransportKind kind, const std::shared_ptr<InprocFabric>& fabric,
                                          const std::shared_ptr<Store>& store, const Membership& m,
                                          const CommConfig& config);

}  // namespace weft
