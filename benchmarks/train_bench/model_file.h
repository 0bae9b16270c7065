// Model files of benchmarks/models/: `name parameter_count backward_gflops` per line, forward
// order, '#' comments. Written by scripts/gen-models.py.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench {

struct Layer {
  std::string name;
  uint64_t params = 0;       // 0: compute only (no gradient of its own)
  double backward_gflops = 0;
};

struct ModelFile {
  std::string name, path;
  std::vector<Layer> layers;
  uint64_t total_params() const;
  double total_gflops() const;
};

// name_or_path: a file, or a model name looked up as NAME.txt in $WEFT_MODELS_DIR, the source
// tree's benchmarks/models and the installed share/weft/models. Throws weft::Error.
ModelFile load_model(const std::string& name_or_path);

}  // namespace weft::bench
