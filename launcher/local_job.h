// weftrun without MPI: the ranks are started here, on this machine, with a TCP store that weftrun
// serves itself on 127.0.0.1.
#pragma once
#include "launcher/node_topology.h"
#include "launcher/options.h"

namespace weft::launcher {

// 64 hex digits from 32 bytes of /dev/urandom. Throws weft::Error when it cannot be read.
std::string generate_job_secret();

// Runs the job to its end and returns weftrun's exit status (see supervise()).
int run_local(const LaunchOptions& o, const NodeTopology& topo);

}  // namespace weft::launcher
