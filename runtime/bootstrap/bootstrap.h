// Creating the world communicator from the environment: detect the launcher, find or start the
// store (rank 0 serves it unless WEFT_STORE_EXTERNAL=1; under mpirun with no WEFT_MASTER_ADDR its
// address and a fresh job secret travel through MPI), then connect.
#pragma once
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/base/config.h"

namespace weft {

std::shared_ptr<Communicator> init_world_from_env(const EnvLookup& env);

// The address other hosts can reach this one at: WEFT_SOCKET_IFNAME's IPv4 address, else the first
// non-loopback IPv4 address, else 127.0.0.1.
std::string local_address(const EnvLookup& env);

}  // namespace weft
