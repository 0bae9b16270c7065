#include "launcher/doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>

namespace weft::launcher {

namespace {

using nlohmann::json;

struct RankView {
  bool present = false;
  std::map<uint64_t, json> ops;  // collectives by sequence number
  std::vector<json> p2p;         // sends and receives (numbered per peer and direction)
  std::string broken, last_error;
};

struct CommView {
  std::string name;
  int size = 0;
  std::map<int, RankView> ranks;
};

bool is_p2p(const json& op) {
  const std::string c = op.value("collective", "");
  return c == "send" || c == "recv";
}

std::string call_args(const json& op) {
  const std::string c = op.value("collective", "?");
  if (c == "barrier") return "";
  std::string s = fmt::format("{} {}", op.value("count", uint64_t{0}), op.value("dtype", "?"));
  if (op.contains("op") && op["op"].is_string()) s += ", " + op["op"].get<std::string>();
  if (op.contains("root")) s += fmt::format(", root {}", op["root"].get<int>());
  return " (" + s + ")";
}

std::string describe(const json& op) {
  return fmt::format("{} #{}{}", op.value("collective", "?"), op.value("seq", uint64_t{0}), call_args(op));
}

std::string shape_key(const json& op) {
  return fmt::format("{}|{}|{}|{}|{}", op.value("collective", ""), op.value("count", uint64_t{0}), op.value("dtype", ""),
                     op.contains("op") && op["op"].is_string() ? op["op"].get<std::string>() : "",
                     op.contains("root") ? op["root"].get<int>() : -1);
}

std::vector<std::string> differing_fields(const json& a, const json& b) {
  std::vector<std::string> out;
  auto differs = [&](const char* k) { return a.value(k, json()) != b.value(k, json()); };
  if (differs("collective")) return {"collective"};
  for (const char* k : {"count", "dtype", "op", "root"})
    if (differs(k)) out.emplace_back(k == std::string("dtype") ? "data type" : k == std::string("op") ? "reduction op" : k);
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::map<std::string, CommView> gather(const std::vector<json>& dumps, std::vector<std::string>& notes) {
  std::map<std::string, CommView> comms;
  for (const json& d : dumps) {
    if (!d.is_object() || !d.contains("communicators")) continue;
    for (const json& c : d["communicators"]) {
      CommView& cv = comms[c.value("name", "?")];
      cv.name = c.value("name", "?");
      cv.size = std::max(cv.size, c.value("size", 0));
      const int rank = c.value("rank", -1);
      if (cv.ranks.count(rank) && cv.ranks[rank].present) {
        notes.push_back(fmt::format("two dumps hold rank {} of {}; the later one read wins", rank, cv.name));
      }
      RankView& rv = cv.ranks[rank];
      rv = RankView{};
      rv.present = true;
      rv.broken = c.value("broken", "");
      rv.last_error = c.value("last_error", "");
      for (const json& op : c.value("ops", json::array()))
        if (!is_p2p(op)) rv.ops[op.value("seq", uint64_t{0})] = op;
        else rv.p2p.push_back(op);
    }
  }
  return comms;
}

// Receives that did not finish, each checked against the sender's dump: a receive whose send was
// never posted is a point-to-point deadlock (or a missing send), named rank by rank.
bool diagnose_p2p(const CommView& cv, DoctorReport& rep) {
  std::vector<std::string> unmatched;
  DoctorFinding f;
  for (const auto& [r, rv] : cv.ranks) {
    if (!rv.present) continue;
    for (const json& op : rv.p2p) {
      if (op.value("collective", "") != "recv" || op.value("state", "") == "done") continue;
      const int peer = op.value("peer", -1);
      const uint64_t seq = op.value("seq", uint64_t{0});
      if (peer < 0) {
        unmatched.push_back(fmt::format("rank {} waits in a receive from any source{} that no rank's send matched", r,
                                        call_args(op)));
        f.started.push_back(r);
        continue;
      }
      auto pit = cv.ranks.find(peer);
      if (pit == cv.ranks.end() || !pit->second.present) continue;  // no dump: the collective check names it
      int64_t last_send = -1;
      bool posted = false;
      for (const json& s : pit->second.p2p) {
        if (s.value("collective", "") != "send" || s.value("peer", -1) != r) continue;
        const auto sseq = static_cast<int64_t>(s.value("seq", uint64_t{0}));
        last_send = std::max(last_send, sseq);
        posted |= static_cast<uint64_t>(sseq) == seq;
      }
      if (posted) continue;
      f.started.push_back(r);
      f.waiting_on[r] = peer;
      unmatched.push_back(fmt::format("rank {} waits in recv #{} from rank {}{}, which rank {} never sent ({})", r, seq,
                                      peer, call_args(op), peer,
                                      last_send < 0 ? fmt::format("no send to rank {} in its dump", r)
                                                    : fmt::format("its last send to rank {} is #{}", r, last_send)));
    }
  }
  if (unmatched.empty()) return false;
  f.comm = cv.name;
  f.kind = "p2p_unmatched";
  f.call = "point-to-point";
  f.sentence = fmt::format("point-to-point deadlock on the {} communicator: {}. A receive completes only once its peer "
                           "posts the matching send (the k-th send from a rank to another matches the k-th receive).",
                           cv.name, join(unmatched, "; "));
  rep.findings.push_back(std::move(f));
  return true;
}

// What weftrun saw of a rank that wrote no dump ("" when it did not say).
std::string exit_of(const DoctorReport& rep, int rank) {
  auto it = rep.exits.find(rank);
  return it == rep.exits.end() ? std::string() : it->second;
}

bool exited_normally(const DoctorReport& rep, int rank) { return exit_of(rep, rank) == "exited with status 0"; }

// The ranks of cv with and without a dump (a note for the latter), and the last operation each
// rank with one completed.
void summarize(const CommView& cv, std::vector<int>& present, std::vector<int>& absent, DoctorReport& rep) {
  for (int r = 0; r < cv.size; ++r) {
    auto it = cv.ranks.find(r);
    (it != cv.ranks.end() && it->second.present ? present : absent).push_back(r);
  }
  std::vector<int> unknown;
  for (int r : absent) {
    // weftrun's world ranks are the world communicator's.
    const std::string how = cv.name == "world" ? exit_of(rep, r) : std::string();
    if (how.empty()) unknown.push_back(r);
    else rep.notes.push_back(fmt::format("rank {} of the {} communicator wrote no dump; its process {}", r, cv.name, how));
  }
  if (!unknown.empty()) {
    rep.notes.push_back(fmt::format("{} of the {} communicator wrote no dump (it may have died or been killed before it "
                                    "could)", rank_list(unknown), cv.name));
  }
  std::vector<std::string> last;
  for (int r : present) {
    const RankView& rv = cv.ranks.at(r);
    const json* done = nullptr;
    for (auto it = rv.ops.rbegin(); it != rv.ops.rend() && !done; ++it)
      if (it->second.value("state", "") == "done") done = &it->second;
    last.push_back(fmt::format("rank {} {}", r, done ? describe(*done) : std::string("none")));
  }
  rep.summary.push_back(fmt::format("{} communicator ({} ranks), last operation completed: {}", cv.name, cv.size, join(last, "; ")));
}

// One sequence number as the ranks with a dump saw it: who called it, who never did, in which
// shape, whom each waited for, and how each call ended.
struct SeqView {
  std::vector<int> have, missing, not_done, failed, done;
  std::map<std::string, std::vector<int>> by_shape;
  std::set<int> waited;
  std::string error;
};

SeqView view_seq(const CommView& cv, uint64_t s, const std::vector<int>& present, DoctorFinding& f) {
  SeqView v;
  for (int r : present) {
    const RankView& rv = cv.ranks.at(r);
    auto it = rv.ops.find(s);
    if (it != rv.ops.end()) {
      v.have.push_back(r);
      v.by_shape[shape_key(it->second)].push_back(r);
    } else if (rv.ops.empty() || rv.ops.rbegin()->first < s) {
      v.missing.push_back(r);
    }
  }
  for (int r : v.have) {
    const json& op = cv.ranks.at(r).ops.at(s);
    if (op.contains("waiting_on")) {
      f.waiting_on[r] = op["waiting_on"].value("rank", -1);
      v.waited.insert(f.waiting_on[r]);
      if (op["waiting_on"].contains("steps"))
        f.waiting_step[r] = {op["waiting_on"].value("steps_done", uint64_t{0}), op["waiting_on"].value("steps", uint64_t{0})};
    }
    const std::string st = op.value("state", "");
    (st == "done" ? v.done : v.not_done).push_back(r);
    if (st == "failed") {
      v.failed.push_back(r);
      if (v.error.empty()) v.error = op.value("error", "");
    }
  }
  return v;
}

// Ranks called #s with different arguments: the most common are taken as intended, the others are
// the odd ranks out.
void mismatch_finding(const CommView& cv, uint64_t s, const SeqView& v, DoctorFinding& f) {
  auto common = std::max_element(v.by_shape.begin(), v.by_shape.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  std::vector<std::string> groups;
  for (auto& [key, ranks] : v.by_shape) {
    const json& op = cv.ranks.at(ranks.front()).ops.at(s);
    groups.push_back(fmt::format("{} called {}", rank_list(ranks), describe(op)));
    if (key == common->first) continue;
    f.odd.insert(f.odd.end(), ranks.begin(), ranks.end());
    for (auto& field : differing_fields(cv.ranks.at(common->second.front()).ops.at(s), op))
      if (std::find(f.fields.begin(), f.fields.end(), field) == f.fields.end()) f.fields.push_back(field);
  }
  std::sort(f.odd.begin(), f.odd.end());
  f.kind = "mismatch";
  f.sentence = fmt::format("{} #{} on the {} communicator is a mismatch: {}: {} {} from the others (the {} differs).",
                           cv.ranks.at(v.have.front()).ops.at(s).value("collective", "?"), s, cv.name, join(groups, "; "),
                           rank_list(f.odd), f.odd.size() == 1 ? "differs" : "differ", join(f.fields, ", "));
}

void not_called_finding(const CommView& cv, const SeqView& v, DoctorFinding& f) {
  f.kind = "not_called";
  std::string waits = v.waited.empty() ? std::string(" and did not finish")
                                       : fmt::format(" and {} for {}", v.failed.empty() ? "wait" : "waited",
                                                     rank_list(std::vector<int>(v.waited.begin(), v.waited.end())));
  if (!v.failed.empty()) waits += fmt::format(" (they failed: {})", v.error.empty() ? "error" : v.error);
  std::vector<std::string> lasts;
  for (int r : v.missing) {
    const RankView& rv = cv.ranks.at(r);
    lasts.push_back(rv.ops.empty() ? fmt::format("rank {} called nothing on it", r)
                                   : fmt::format("its last was {}", describe(rv.ops.rbegin()->second)));
  }
  f.sentence = fmt::format("{} on the {} communicator: {} started it{}; {} never called it ({}).", f.call, cv.name,
                           rank_list(v.have), waits, rank_list(v.missing), join(lasts, "; "));
}

// Every rank with a dump called #s and some did not finish it (stuck) or all failed it.
void unfinished_finding(const CommView& cv, const SeqView& v, const std::vector<int>& absent, DoctorFinding& f) {
  const bool all_failed = v.failed.size() == v.have.size();
  f.kind = all_failed ? "failed" : "stuck";
  std::vector<std::string> waits;
  for (auto& [r, p] : f.waiting_on) {
    auto st = f.waiting_step.find(r);
    waits.push_back(fmt::format("rank {} {} for rank {}{}", r, v.failed.empty() ? "waits" : "waited", p,
                                st == f.waiting_step.end() ? std::string()
                                                           : fmt::format(" at step {} of {} of its schedule",
                                                                         st->second.first + 1, st->second.second)));
  }
  std::string why;  // the communicator's first cause (its broken reason), else the last error
  for (int r : v.failed) {
    const RankView& rv = cv.ranks.at(r);
    why = first_line(!rv.broken.empty() ? rv.broken : rv.last_error);
    if (!why.empty()) break;
  }
  std::vector<int> silent;  // waited for, and wrote no dump
  for (int p : v.waited)
    if (std::find(absent.begin(), absent.end(), p) != absent.end()) silent.push_back(p);
  if (!silent.empty()) {
    waits.push_back(fmt::format("{}, waited for, wrote no dump (it died or was killed before it could)", rank_list(silent)));
  }
  const std::string where = fmt::format("on the {} communicator", cv.name);
  if (all_failed) {
    f.sentence = fmt::format("{} {} failed on every rank {}({}){}{}.", f.call, where,
                             absent.empty() ? "" : "that wrote a dump ", v.error.empty() ? "error" : v.error,
                             waits.empty() ? "" : "; " + join(waits, "; "), why.empty() ? "" : "; first cause: " + why);
  } else {
    f.sentence = fmt::format("{} {}: every rank called it; {} did not finish it{}{}{}.", f.call, where,
                             rank_list(v.not_done), waits.empty() ? "" : " (" + join(waits, "; ") + ")",
                             v.done.empty() ? "" : "; " + rank_list(v.done) + " finished it",
                             why.empty() ? "" : "; first cause: " + why);
  }
}

// Ranks without a dump whose process exited 0 (weftrun saw it) left cleanly before #s, which the
// others called: "rank 2 exited normally (status 0) after 4 calls ...".
bool left_early_finding(const CommView& cv, uint64_t s, const SeqView& v, const std::vector<int>& absent,
                        const DoctorReport& rep, DoctorFinding& f) {
  std::vector<int> left;
  for (int r : absent)
    if (cv.name == "world" && exited_normally(rep, r)) left.push_back(r);
  if (left.empty() || v.by_shape.size() > 1 || !v.missing.empty() || v.not_done.empty()) return false;
  f.kind = "left_early";
  f.missing = left;
  const bool failed = !v.failed.empty();
  f.sentence = fmt::format("{} exited normally (status 0) after {} call{} on the {} communicator; {} {} in call {} ({}){}.",
                           rank_list(left), s, s == 1 ? "" : "s", cv.name, rank_list(v.have), failed ? "waited" : "wait",
                           s + 1, f.call,
                           failed ? fmt::format(" and failed there ({})", v.error.empty() ? "error" : v.error) : "");
  return true;
}

// The first sequence number where the ranks disagree, named in a finding (false: none here).
bool diagnose_seq(const CommView& cv, uint64_t s, const std::vector<int>& present, const std::vector<int>& absent,
                  DoctorReport& rep) {
  DoctorFinding f;
  const SeqView v = view_seq(cv, s, present, f);
  if (v.have.empty()) return false;
  f.comm = cv.name;
  f.seq = s;
  f.started = v.have;
  f.missing = v.missing;
  f.call = describe(cv.ranks.at(v.have.front()).ops.at(s));
  if (!left_early_finding(cv, s, v, absent, rep, f)) {
    if (v.by_shape.size() > 1) mismatch_finding(cv, s, v, f);
    else if (!v.missing.empty()) not_called_finding(cv, v, f);
    else if (!v.not_done.empty()) unfinished_finding(cv, v, absent, f);
    else return false;
  }
  rep.findings.push_back(std::move(f));
  return true;
}

void diagnose_comm(const CommView& cv, DoctorReport& rep) {
  std::vector<int> present, absent;
  summarize(cv, present, absent, rep);
  if (diagnose_p2p(cv, rep)) return;
  // Only sequence numbers every rank still holds (or never reached) can be compared.
  uint64_t lo = 0;
  std::set<uint64_t> seqs;
  for (int r : present) {
    const RankView& rv = cv.ranks.at(r);
    if (rv.ops.empty()) continue;
    lo = std::max(lo, rv.ops.begin()->first);
    for (auto& [s, op] : rv.ops) seqs.insert(s);
  }
  for (uint64_t s : seqs)
    if (s >= lo && diagnose_seq(cv, s, present, absent, rep)) return;  // the first disagreement explains what follows
}

}  // namespace

DoctorReport diagnose(const std::vector<json>& dumps, const std::map<int, std::string>& exits) {
  DoctorReport rep;
  rep.exits = exits;
  auto comms = gather(dumps, rep.notes);
  for (auto& [name, cv] : comms) diagnose_comm(cv, rep);
  return rep;
}

DoctorReport diagnose_dir(const std::string& dir, double since) {
  namespace fs = std::filesystem;
  std::vector<json> dumps;
  std::vector<std::string> files, notes;
  std::map<int, std::string> exits;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    if (since > 0) {
      const auto t = entry.last_write_time(ec);
      const double secs = std::chrono::duration<double>(
                              std::chrono::file_clock::to_sys(t).time_since_epoch()).count();
      if (ec || secs < since) continue;
    }
    std::ifstream in(entry.path());
    json d = json::parse(in, nullptr, false);
    if (!d.is_discarded() && d.is_object() && d.contains("weftrun_exits")) {
      for (auto& [rank, how] : d["weftrun_exits"].items()) exits[std::stoi(rank)] = how.get<std::string>();
      continue;
    }
    if (d.is_discarded() || !d.is_object() || !d.contains("weft_flight_recorder")) {
      notes.push_back(fmt::format("{} is not a flight recorder dump; skipped", entry.path().string()));
      continue;
    }
    files.push_back(entry.path().string());
    dumps.push_back(std::move(d));
  }
  if (ec) throw std::runtime_error(fmt::format("cannot read {}: {}", dir, ec.message()));
  if (dumps.empty()) throw std::runtime_error(fmt::format("no flight recorder dump (rank<R>.json) in {}", dir));
  DoctorReport rep = diagnose(dumps, exits);
  std::sort(files.begin(), files.end());
  rep.files = files;
  rep.notes.insert(rep.notes.begin(), notes.begin(), notes.end());
  return rep;
}

void write_exits(const std::string& dir, const std::map<int, std::string>& exits) {
  json j = json::object();
  for (auto& [rank, how] : exits) j[std::to_string(rank)] = how;
  std::ofstream(std::filesystem::path(dir) / kExitsFile) << json{{"weftrun_exits", j}}.dump(1) << "\n";
}

std::string doctor_text(const DoctorReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.sentence + "\n";
  if (r.findings.empty()) s += "no problem found: every rank called the same operations and finished them.\n";
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  for (const auto& l : r.summary) s += l + "\n";
  s += fmt::format("({} dump{} read)\n", r.files.size(), r.files.size() == 1 ? "" : "s");
  return s;
}

json doctor_json(const DoctorReport& r) {
  json out;
  out["problem"] = r.problem();
  out["files"] = r.files;
  out["notes"] = r.notes;
  out["summary"] = r.summary;
  json fs = json::array();
  for (const auto& f : r.findings) {
    json j;
    j["communicator"] = f.comm;
    j["kind"] = f.kind;
    j["seq"] = f.seq;
    j["call"] = f.call;
    j["started"] = f.started;
    j["missing"] = f.missing;
    j["odd"] = f.odd;
    j["fields"] = f.fields;
    json w = json::object();
    for (auto& [rank, peer] : f.waiting_on) w[std::to_string(rank)] = peer;
    j["waiting_on"] = w;
    j["sentence"] = f.sentence;
    fs.push_back(std::move(j));
  }
  out["findings"] = fs;
  return out;
}

}  // namespace weft::launcher
