// This machine's memory ceiling: copy and `a += b` (float32) bandwidth with 1 thread and with
// `threads` threads (one per rank), and the memory-traffic bound on any all-reduce derived from
// them (docs/PERFORMANCE.md, "Ceiling", states the model).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace wperf {

struct CeilingRow {
  size_t bytes = 0;
  double copy1 = 0, add1 = 0;  // GB/s, one thread
  double copyn = 0, addn = 0;  // GB/s, all threads together
  double bound_busbw = 0;      // GB/s: the all-reduce bus bandwidth bound for `threads` ranks
};

// All-reduce bound for n ranks from the n-thread aggregate bandwidths (GB/s). Whatever the
// algorithm, the ranks together read n inputs and write n outputs of S bytes at least once: at
// least the traffic of copying nS bytes, which the machine does at best at B = max(copy_n,
// 1.5 add_n) (a += b moves three streams per destination byte, a copy two). So T >= nS/B and
// busbw = 2(n-1)/n S/T <= 2(n-1) B / n^2.
double allreduce_bound(int nranks, double copyn, double addn);

std::vector<CeilingRow> measure_ceiling(const std::vector<size_t>& sizes, int threads);
// Prints the rows as a table, or as CSV when path is non-empty ("-" = stdout).
void print_ceiling(const std::vector<CeilingRow>& rows, int threads, const std::string& csv_path);

}  // namespace wperf
