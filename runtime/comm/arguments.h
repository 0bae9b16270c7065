// A call's arguments as the communicator takes them: in-place detection and the checks that
// refuse a bad call (kInvalidArgument, naming the problem) before anything is sent.
#pragma once
#include "collectives/collective.h"

namespace weft {

// args with in_place set from the buffers (NCCL's conventions: reduce-scatter in place means
// recv == send + rank * recvcount, all-gather send == recv + rank * sendcount, the others send == recv).
CollectiveArgs with_in_place(const CollectiveArgs& args, const void* send, const void* recv, int rank);
// Throws kInvalidArgument for an invalid type, op, root or peer, a count that overflows, a NULL
// buffer that must hold data, or buffers that overlap without being in place.
void check_arguments(const CollectiveArgs& a, const void* send, const void* recv, int rank, int size);

// A call on a communicator that weftCommShrink replaced.
[[noreturn]] void fail_shrunk(std::string_view what);

}  // namespace weft
