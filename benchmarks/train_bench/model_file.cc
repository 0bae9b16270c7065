#include "model_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/base/error.h"

namespace weft::bench {

uint64_t ModelFile::total_params() const {
  uint64_t n = 0;
  for (const Layer& l : layers) n += l.params;
  return n;
}

double ModelFile::total_gflops() const {
  double g = 0;
  for (const Layer& l : layers) g += l.backward_gflops;
  return g;
}

ModelFile load_model(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates{name_or_path};
  if (const char* d = std::getenv("WEFT_MODELS_DIR")) candidates.push_back(fs::path(d) / (name_or_path + ".txt"));
  candidates.push_back(fs::path(WEFT_SOURCE_MODELS_DIR) / (name_or_path + ".txt"));
  candidates.push_back(fs::path(WEFT_INSTALL_MODELS_DIR) / (name_or_path + ".txt"));
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    std::ifstream f(p);
    ModelFile m;
    m.path = p.string();
    m.name = p.stem().string();
    std::string line;
    int lineno = 0;
    while (std::getline(f, line)) {
      ++lineno;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      Layer l;
      if (!(in >> l.name >> l.params >> l.backward_gflops) || l.backward_gflops < 0) {
        fail(ErrorCode::kInvalidArgument, "{}:{}: expected `name parameter_count backward_gflops`", m.path, lineno);
      }
      m.layers.push_back(std::move(l));
    }
    if (m.total_params() == 0) fail(ErrorCode::kInvalidArgument, "{}: no parameters", m.path);
    return m;
  }
  fail(ErrorCode::kInvalidArgument, "model '{}': not a file, and no {}.txt in $WEFT_MODELS_DIR, {} or {}", name_or_path,
       name_or_path, WEFT_SOURCE_MODELS_DIR, WEFT_INSTALL_MODELS_DIR);
}

}  // namespace weft::bench
