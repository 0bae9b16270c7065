// The modes of weft-test-rank defined outside rank_main.cc.
#pragma once
#include <weft/weft.hpp>

#include <chrono>

namespace weft_test_rank {
// The system clock in ms (what the tests compare a kill and the survivors' errors by).
inline long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
int shrink_mode(weft::Comm& world, int argc, char** argv);
int shrink_repeat(weft::Comm& world, int argc, char** argv);
}  // namespace weft_test_rank
