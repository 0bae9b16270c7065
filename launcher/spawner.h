// Starting processes and watching them to the end: each in its own process group, optionally with
// a CPU affinity and its output relayed line by line with a "[rank] " prefix. When one fails, the
// others are stopped (SIGTERM to their groups, SIGKILL after a grace period); SIGINT, SIGTERM and
// SIGHUP sent to weftrun are forwarded; --timeout stops the whole job.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace weft::launcher {

struct ProcessSpec {
  std::string label;              // "rank 2", "mpirun": names it in messages
  std::string tag;                // output prefix when tagging, e.g. "[2] "
  std::string path;               // executable (resolved)
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // the complete environment, "NAME=VALUE"
  std::vector<int> cpus;          // CPU affinity; empty: inherited
  bool inherit_stdin = false;     // else /dev/null
};

struct SuperviseOptions {
  bool tag_output = false;
  double timeout_s = 0;  // 0: none
  std::chrono::milliseconds grace{3000};
  bool verbose = false;
  // When a rank fails or the job times out, first this signal to each other rank's process
  // (SIGUSR1: a Weft rank writes its flight recorder dump), then SIGTERM after dump_wait.
  // 0: SIGTERM at once.
  int dump_signal = 0;
  std::chrono::milliseconds dump_wait{1000};
};

// Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP in the calling thread (and the threads it starts
// later): call first thing in main, before any thread exists, so that supervise() can take them
// from a signalfd. Children get the original mask back.
void block_job_signals();

// Starts every process, waits for all of them and returns weftrun's exit status: 0 when all exit 0;
// else the status of the first to fail (128+N for signal N), 128+N when weftrun got signal N, 124
// on timeout, 127 when a process cannot be started.
int supervise(const std::vector<ProcessSpec>& procs, const SuperviseOptions& opts);

}  // namespace weft::launcher
