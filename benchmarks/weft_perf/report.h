// weft-perf output: the nccl-tests table on stdout, and/or CSV and JSON (to a file or "-").
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace wperf {

struct Half {  // one of out-of-place / in-place
  bool ran = false;
  std::string algorithm;  // what ran the timed calls (weftCommLastAlgorithm right after them)
  double time_us = 0, algbw = 0, busbw = 0;
  long wrong = 0;
};
struct Row {
  std::string coll, type, op;
  size_t bytes = 0, count = 0;
  int root = -1, nranks = 0;
  std::string algo;  // with several --algo values: the one this row ran ("auto": the automatic choice)
  std::string ran;   // the algorithm that ran the row's last call (weftCommLastAlgorithm): direct, ring, ...
  Half oop, ip;
};

class Report {
 public:
  // algo_column: rows carry the algorithm they ran (weft-perf --algo with several values).
  Report(const std::string& csv_path, const std::string& json_path, bool table, bool algo_column = false);
  ~Report();
  void header(const std::string& coll, int nranks, const std::string& how);
  void row(const Row& r);
  void footer(long oob, double avg_busbw);

 private:
  FILE* csv_ = nullptr;
  FILE* json_ = nullptr;
  bool table_, algo_col_, first_json_ = true;
};

}  // namespace wperf
