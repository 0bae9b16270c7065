// Starting processes and watching them to the end: each in its own process group, optionally with
// a CPU affinity and its output relayed line by line with a "[rank] " prefix. When one fails, the
// others are stopped (SIGTERM to their groups, SIGKILL after a grace period); SIGINT, SIGTERM and
// SIGHUP sent to weftrun are forwarded; --timeout stops the whole job.
#pragma once
#include <chrono>
#include <functional>
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
  // --keep-going: a process that fails is reported (and what it started in its group killed),
  // the others keep running; the status then says how the job ended (below).
  bool keep_going = false;
  // When a rank fails or the job times out, first this signal to each other rank's process
  // (SIGUSR1: a Weft rank writes its flight recorder dump), then SIGTERM after dump_wait.
  // 0: SIGTERM at once.
  int dump_signal = 0;
  std::chrono::milliseconds dump_wait{1000};
  // Non-null: given each process's wait status once the job ended (-1: never started).
  std::vector<int>* statuses = nullptr;
  // Called as each process ends: its index in procs and its wait status.
  std::function<void(size_t, int)> on_exit;
};

// "exited with status N" or "was killed by signal N (Name)", for a wait status.
std::string describe_exit(int status);

// weftrun's status with --keep-going when some ranks died (by a signal) but every other rank
// exited 0: the job finished on the survivors.
inline constexpr int kFinishedWithLostRanks = 75;

// Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP in the calling thread (and the threads it starts
// later): call first thing in main, before any thread exists, so that supervise() can take them
// from a signalfd. Children get the original mask back.
void block_job_signals();

// Starts every process, waits for all of them and returns weftrun's exit status: 0 when all exit 0;
// else the status of the first to fail (128+N for signal N), 128+N when weftrun got signal N, 124
// on timeout, 127 when a process cannot be started. With keep_going, once every process has
// ended: the status of the first that exited non-zero by itself (exit(n): the program failed),
// else kFinishedWithLostRanks when some died by a signal and the others exited 0, else (all
// died) the first one's 128+N.
int supervise(const std::vector<ProcessSpec>& procs, const SuperviseOptions& opts);

}  // namespace weft::launcher
