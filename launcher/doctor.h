// weft-doctor: reads the flight recorder dumps of a job (one rank<R>.json per rank that managed to
// write one, runtime/trace/trace_registry.h) and names what went wrong, per communicator: the last
// operation every rank completed, the first sequence number where the ranks disagree (a mismatch
// of collective, count, type, op or root) or where some never arrived, which ranks those are and
// what each waiting rank waited for. weftrun runs it after a failed job. docs/OBSERVABILITY.md.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace weft::launcher {

struct DoctorFinding {
  std::string comm;  // communicator name
  // "mismatch": ranks called #seq with different arguments; "not_called": some ranks never called
  // #seq; "stuck": every rank called it, some did not finish; "failed": every rank failed it;
  // "left_early": ranks without a dump exited normally (weftrun saw status 0) before #seq, which
  // the others called (`missing` names them);
  // "p2p_unmatched": ranks wait in receives whose sends were never posted (a point-to-point deadlock).
  std::string kind;
  uint64_t seq = 0;
  std::string call;                  // "allreduce #4 (1024 float32, sum)"
  std::vector<int> started;          // ranks that called it
  std::vector<int> missing;          // ranks that never called it
  std::vector<int> odd;              // mismatch: the ranks whose arguments differ from the most common
  std::vector<std::string> fields;   // mismatch: what differs ("count", "dtype", ...)
  std::map<int, int> waiting_on;     // rank -> the rank it waited for
  std::map<int, std::pair<uint64_t, uint64_t>> waiting_step;  // rank -> (schedule steps done, of)
  std::string sentence;
};

struct DoctorReport {
  std::vector<std::string> files;      // the dumps read
  std::vector<std::string> notes;      // ranks without a dump, unreadable files, ...
  std::vector<std::string> summary;    // per communicator: the last operation each rank completed
  std::vector<DoctorFinding> findings;
  // How weftrun saw each rank's process end ("exited with status 0", "was killed by signal 15
  // (Terminated)"), from kExitsFile in the dump folder; empty without weftrun.
  std::map<int, std::string> exits;
  bool problem() const { return !findings.empty(); }
};

// weftrun writes how each rank's process ended here, in the dump folder, before it runs the doctor.
inline constexpr const char* kExitsFile = "weftrun-exits.json";
// {"weftrun_exits": {"<rank>": "<how it ended>"}}
void write_exits(const std::string& dir, const std::map<int, std::string>& exits);

// Reads every dump in dir (files modified at or after `since`, seconds of the epoch; 0: all).
// Throws std::runtime_error when dir holds no dump.
DoctorReport diagnose_dir(const std::string& dir, double since = 0);
// The analysis of parsed dumps (one JSON object per file).
DoctorReport diagnose(const std::vector<nlohmann::json>& dumps, const std::map<int, std::string>& exits = {});
// Plain sentences, one per line.
std::string doctor_text(const DoctorReport& r);
nlohmann::json doctor_json(const DoctorReport& r);

}  // namespace weft::launcher
