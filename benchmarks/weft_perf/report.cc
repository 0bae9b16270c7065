#include "report.h"

namespace wperf {

static FILE* open_out(const std::string& path) {
  if (path.empty()) return nullptr;
  if (path == "-") return stdout;
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) std::fprintf(stderr, "weft-perf: cannot write %s\n", path.c_str());
  return f;
}

Report::Report(const std::string& csv_path, const std::string& json_path, bool table, bool algo_column)
    : csv_(open_out(csv_path)), json_(open_out(json_path)), table_(table), algo_col_(algo_column) {
  if (csv_)
    std::fprintf(csv_, "collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,"
                       "ip_time_us,ip_algbw,ip_busbw,ip_wrong%s,algorithm\n", algo_col_ ? ",algo" : "");
  if (json_) std::fprintf(json_, "{\"results\": [");
}

Report::~Report() {
  for (FILE* f : {csv_, json_})
    if (f && f != stdout) std::fclose(f);
}

void Report::header(const std::string& coll, int nranks, const std::string& how) {
  if (!table_) return;
  std::printf("# weft-perf: %s, %d ranks, %s\n#\n", coll.c_str(), nranks, how.c_str());
  std::printf("#%79s%37s\n", "out-of-place", "in-place");
  std::printf("#%11s %13s %9s %7s %6s %9s %7s %7s %6s %9s %7s %7s %6s  %-9s%s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algorithm", algo_col_ ? "  algo" : "");
  std::printf("#%11s %13s %9s %7s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

static void half_table(const Half& h) {
  if (!h.ran) return (void)std::printf(" %9s %7s %7s %6s", "n/a", "n/a", "n/a", "n/a");
  std::printf(h.time_us < 1e5 ? " %9.2f" : " %9.0f", h.time_us);
  std::printf(" %7.2f %7.2f", h.algbw, h.busbw);
  if (h.wrong < 0) std::printf(" %6s", "N/A");
  else std::printf(" %6ld", h.wrong);
}

static void half_csv(FILE* f, const Half& h) {
  if (!h.ran) return (void)std::fprintf(f, ",,,,");
  std::fprintf(f, ",%.3f,%.4f,%.4f,%ld", h.time_us, h.algbw, h.busbw, h.wrong);
}

static void half_json(FILE* f, const char* name, const Half& h) {
  if (!h.ran) return (void)std::fprintf(f, ", \"%s\": null", name);
  std::fprintf(f, ", \"%s\": {\"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %ld}", name, h.time_us,
               h.algbw, h.busbw, h.wrong);
}

void Report::row(const Row& r) {
  if (table_) {
    std::printf(" %11zu %13zu %9s %7s %6d", r.bytes, r.count, r.type.c_str(), r.op.c_str(), r.root);
    half_table(r.oop);
    half_table(r.ip);
    std::printf("  %-9s", r.ran.c_str());
    if (algo_col_) std::printf("  %s", r.algo.c_str());
    std::printf("\n");
    std::fflush(stdout);
  }
  if (csv_) {
    std::fprintf(csv_, "%s,%d,%zu,%zu,%s,%s,%d", r.coll.c_str(), r.nranks, r.bytes, r.count, r.type.c_str(),
                 r.op.c_str(), r.root);
    half_csv(csv_, r.oop);
    half_csv(csv_, r.ip);
    if (algo_col_) std::fprintf(csv_, ",%s", r.algo.c_str());
    std::fprintf(csv_, ",%s\n", r.ran.c_str());
    std::fflush(csv_);
  }
  if (json_) {
    std::fprintf(json_, "%s\n  {\"collective\": \"%s\", \"nranks\": %d, \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                        "\"redop\": \"%s\", \"root\": %d",
                 first_json_ ? "" : ",", r.coll.c_str(), r.nranks, r.bytes, r.count, r.type.c_str(), r.op.c_str(),
                 r.root);
    half_json(json_, "out_of_place", r.oop);
    half_json(json_, "in_place", r.ip);
    if (algo_col_) std::fprintf(json_, ", \"algo\": \"%s\"", r.algo.c_str());
    std::fprintf(json_, ", \"algorithm\": \"%s\"", r.ran.c_str());
    std::fprintf(json_, "}");
    first_json_ = false;
  }
}

void Report::footer(long oob, double avg_busbw) {
  if (table_) {
    std::printf("# Out of bounds values : %ld %s\n", oob, oob ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", avg_busbw);
  }
  if (json_) std::fprintf(json_, "\n], \"out_of_bounds\": %ld, \"avg_busbw\": %.4f}\n", oob, avg_busbw);
}

}  // namespace wperf
