// libFuzzer entry point for one topology reader (selected by WEFT_FUZZ_READER_hwloc / _nccl).
// Any weft::Error is an accepted outcome; crashes, leaks, UB and other exceptions are findings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/base/error.h"
#include "topology/discovery.h"
#include "topology/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  try {
#if defined(WEFT_FUZZ_READER_hwloc)
    auto t = weft::topo::read_hwloc_xml(xml, "<fuzz>");
#else
    auto t = weft::topo::read_nccl_xml(xml, "<fuzz>");
#endif
    auto s = weft::topo::summarize(t);
    (void)weft::topo::to_json(s).dump();
  } catch (const weft::Error&) {
  }
  return 0;
}
