#include "runtime/comm/native_rows.h"

#include <string_view>

#include "runtime/base/error.h"

namespace weft {

namespace {

bool run_direct(ShmDirect& d, const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  d.run(a, send, recv, ctx);
  return true;
}

bool run_pieces(ShmDirect& d, const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  d.all_reduce_pieces(a, send, recv, ctx);
  return true;
}

bool run_window(ShmDirect& d, const CollectiveArgs& a, const void* send, void* recv, const DirectContext& ctx) {
  return d.all_reduce_window(a, send, recv, ctx);
}

struct Binding {
  std::string_view id;
  bool (*runner)(ShmDirect&, const CollectiveArgs&, const void*, void*, const DirectContext&);
};
constexpr Binding kBindings[] = {{"direct", run_direct}, {"pieces", run_pieces}, {"window", run_window}};

}  // namespace

NativeRows::NativeRows(ShmDirect* direct) : direct_(direct), table_(algorithm_table().data()) {
  const auto& table = algorithm_table();
  runners_.resize(table.size(), nullptr);
  for (size_t i = 0; i < table.size(); ++i) {
    if (!table[i].native()) continue;
    for (const Binding& b : kBindings)
      if (b.id == table[i].id) runners_[i] = b.runner;
    if (!runners_[i]) fail(ErrorCode::kInternalError, "the native row '{}' has no runner (runtime/comm/native_rows.cc)", table[i].id);
  }
}

}  // namespace weft
