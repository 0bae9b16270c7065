#include "runtime/comm/transport_choice.h"

#include "runtime/base/error.h"
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/transport/shm/shm_transport.h"
#include "runtime/transport/ucx/ucx_transport.h"

namespace weft {

std::unique_ptr<Transport> make_transport(TransportKind kind, const std::shared_ptr<InprocFabric>& fabric,
                                          const std::shared_ptr<Store>& store, const Membership& m,
                                          const CommConfig& config) {
  if (kind == TransportKind::kInproc) {
    if (!fabric || fabric->size() != m.size) fail(ErrorCode::kInvalidArgument, "inproc communicator: fabric size differs");
    return std::make_unique<InprocTransport>(fabric, m.rank);
  }
  if (kind == TransportKind::kUcx && (config.transport == "ucx" || !ShmTransport::usable()))
    return std::make_unique<UcxTransport>(store, m.rank, m.size, config.timeout, config.ucx_peer_errors);
  // Weft's shared-memory transport between the ranks of a node, UCX between nodes.
  std::unique_ptr<Transport> remote;
  if (m.num_nodes > 1)
    remote = std::make_unique<UcxTransport>(store, m.rank, m.size, config.timeout, config.ucx_peer_errors, true);
  return std::make_unique<ShmTransport>(store, m.rank, m.size, m.node_of_rank, std::move(remote), config.timeout);
}

}  // namespace weft
