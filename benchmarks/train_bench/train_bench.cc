// weft-train-bench: the gradient synchronisation of a data-parallel training step, on the layer
// gradient sizes of real models (benchmarks/models/), with the overlap engine (overlap/reducer.h)
// in several modes and bucket caps. The backward compute per layer is simulated device time
// (--compute sim: sleep, the CPU stays free as under a GPU) or real float math (--compute cpu).
//
//   weftrun -np 2 -- weft-train-bench --model resnet50 --compute sim --accel-tflops 4 --mode all
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <thread>

#include "model_file.h"
#include "overlap/reducer.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"

using namespace weft;
using namespace weft::overlap;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model = "resnet50";
  int steps = 10, warmup = 2;
  std::string caps = "25";
  double first_bucket_mb = 1;
  std::string mode = "all";
  std::string compute = "sim";
  double accel_tflops = 100;
  double cpu_scale = 2e-4;  // --compute cpu: real FLOPs per modelled FLOP
  bool json = false, copy = false;
};

struct Result {
  std::string mode;
  double cap_mb = 0;
  StepStats mean;
  std::vector<double> bucket_mb;
  uint64_t wrong = 0;  // gradient elements whose reduced value was not the ranks' average
};

// The gradient the backward writes for every element at `step` on `rank`: a small integer times
// 2^-10, exact in float32, float16 and bfloat16, and so is the ranks' sum; the average over n
// ranks is ((n + 1) / 2 + step % 4) * 2^-10.
float grad_value(int rank, int step) { return static_cast<float>(rank + 1 + step % 4) * 0.0009765625f; }

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stod(item));
  return out;
}

// The backward of one layer. sim: sleep until the cumulative modelled time (no drift from the
// sleeps' own overhead); cpu: multiply-adds on this thread.
class Compute {
 public:
  explicit Compute(const Args& a) : a_(a) {}
  void start() {
    t0_ = Clock::now();
    modelled_s_ = 0;
  }
  void layer(double gflops) {
    if (gflops <= 0) return;
    if (a_.compute == "sim") {
      modelled_s_ += gflops / (a_.accel_tflops * 1e3);
      auto due = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(modelled_s_));
      if (due - Clock::now() > std::chrono::microseconds(100)) std::this_thread::sleep_until(due);
    } else {
      uint64_t n = static_cast<uint64_t>(gflops * 1e9 * a_.cpu_scale / 16);  // 8 lanes x 2 FLOPs
      float acc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
      for (uint64_t i = 0; i < n; ++i)
        for (float& x : acc) x = x * 0.999999f + 1e-7f;
      sink_ += acc[0] + acc[7];
    }
  }
  float sink_ = 0;

 private:
  const Args& a_;
  Clock::time_point t0_;
  double modelled_s_ = 0;
};

Result run_mode(Communicator& comm, const bench::ModelFile& model, const Args& a, const std::string& mode, double cap_mb) {
  ReducerOptions o;
  o.bucket_cap_bytes = static_cast<uint64_t>(cap_mb * 1048576);
  o.first_bucket_cap_bytes = static_cast<uint64_t>(a.first_bucket_mb * 1048576);
  o.gradient_as_bucket_view = !a.copy;
  o.overlap = mode != "none";
  o.rebuild_buckets = mode != "none" && mode != "overlap";
  if (mode == "compress-fp16") o.compression = Compression::kFloat16;
  if (mode == "compress-bf16") o.compression = Compression::kBfloat16;
  Reducer red(comm.shared_from_this(), o);
  std::vector<std::vector<float>> grads(model.layers.size());
  std::vector<int> ids(model.layers.size(), -1);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const bench::Layer& l = model.layers[i];
    if (l.params == 0) continue;
    if (a.copy) grads[i].resize(l.params);  // the backward below writes every step's values
    ids[i] = red.add_param(a.copy ? grads[i].data() : nullptr, l.params, DataType::kFloat32, l.name);
  }
  Compute compute(a);
  Result r;
  r.mode = mode;
  r.cap_mb = cap_mb;
  std::vector<StepStats> kept;
  auto grad_of = [&](size_t i) { return a.copy ? grads[i].data() : static_cast<float*>(red.grad_view(ids[i])); };
  const int n = comm.size();
  // float16/bfloat16 on the wire round the sum once (exact here) and the average once more
  const double tol = mode == "compress-fp16" ? 1.0 / 1024 : mode == "compress-bf16" ? 1.0 / 128 : 1e-6;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    red.begin_step(true);
    compute.start();
    const float g = grad_value(comm.rank(), step);
    for (size_t i = model.layers.size(); i-- > 0;) {
      compute.layer(model.layers[i].backward_gflops);
      if (ids[i] < 0) continue;
      float* v = grad_of(i);  // the backward writes the layer's gradient, then marks it
      std::fill(v, v + model.layers[i].params, g);
      red.mark_ready(ids[i]);
    }
    StepStats s = red.finalize();
    if (step >= a.warmup) kept.push_back(s);
    // Every reduced element is the ranks' average (checked outside the timed step).
    const double want = ((n + 1) / 2.0 + step % 4) * 0.0009765625;
    for (size_t i = 0; i < model.layers.size(); ++i) {
      if (ids[i] < 0) continue;
      const float* v = grad_of(i);
      for (uint64_t k = 0; k < model.layers[i].params; ++k)
        if (!(std::abs(v[k] - want) <= tol * want)) ++r.wrong;
    }
  }
  StepStats& m = r.mean;
  for (const StepStats& s : kept) {
    m.step_ms += s.step_ms / kept.size();
    m.backward_ms += s.backward_ms / kept.size();
    m.comm_ms += s.comm_ms / kept.size();
    m.exposed_comm_ms += s.exposed_comm_ms / kept.size();
    m.tail_ms += s.tail_ms / kept.size();
    m.compress_ms += s.compress_ms / kept.size();
    m.overlap_ratio += s.overlap_ratio / kept.size();
  }
  m.sync_overhead = m.step_ms > 0 ? m.exposed_comm_ms / m.step_ms : 0;
  m.buckets = kept.back().buckets;
  m.wire_bytes = kept.back().wire_bytes;
  for (const BucketInfo& b : red.buckets()) r.bucket_mb.push_back(b.bytes / 1048576.0);
  if (compute.sink_ == 12345.0f) std::fputs("", stderr);  // keeps the cpu work
  return r;
}

std::string compute_label(const Args& a) {
  return a.compute == "sim" ? fmt::format("sim {} TFLOPS", a.accel_tflops) : fmt::format("cpu x{}", a.cpu_scale);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"weft-train-bench: gradient all-reduce of a data-parallel training step, with and without overlap"};
  app.add_option("--model", a.model, "resnet50 | bert-base | gpt2-small | a model file");
  app.add_option("--steps", a.steps, "measured steps per configuration")->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup, "unmeasured steps first (layout check, rebuild)")->check(CLI::NonNegativeNumber);
  app.add_option("--bucket-cap-mb", a.caps, "bucket caps to sweep, comma-separated (MiB)");
  app.add_option("--first-bucket-mb", a.first_bucket_mb, "the first bucket's cap (MiB)");
  app.add_option("--mode", a.mode, "none | overlap | overlap-rebuild | compress-fp16 | compress-bf16 | all")
      ->check(CLI::IsMember({"none", "overlap", "overlap-rebuild", "compress-fp16", "compress-bf16", "all"}));
  app.add_option("--compute", a.compute, "sim: sleep for the layer's FLOPs at --accel-tflops; cpu: real float math")
      ->check(CLI::IsMember({"sim", "cpu"}));
  app.add_option("--accel-tflops", a.accel_tflops, "the simulated accelerator's sustained TFLOPS")->check(CLI::PositiveNumber);
  app.add_option("--cpu-scale", a.cpu_scale, "--compute cpu: real FLOPs per modelled FLOP")->check(CLI::PositiveNumber);
  app.add_flag("--copy", a.copy, "copy gradients into the buckets (default: gradient-as-bucket-view)");
  app.add_flag("--json", a.json, "one JSON object per line (mode x bucket cap) instead of the table");
  CLI11_PARSE(app, argc, argv);
  try {
    bench::ModelFile model = bench::load_model(a.model);
    auto comm = init_world_from_env(process_env());
    std::vector<std::string> modes = {a.mode};
    if (a.mode == "all") modes = {"none", "overlap", "overlap-rebuild", "compress-fp16", "compress-bf16"};
    std::vector<double> caps = parse_list(a.caps);
    bool root = comm->rank() == 0;
    uint64_t wrong_total = 0;
    if (root && !a.json) {
      std::printf("# %s (%s): %zu tensors, %.1f M parameters, %.0f backward GFLOPs/step; %d ranks (%s); compute %s; "
                  "%s; %d steps after %d warm-up\n",
                  model.name.c_str(), model.path.c_str(), model.layers.size(), model.total_params() / 1e6,
                  model.total_gflops(), comm->size(), comm->transport_name(), compute_label(a).c_str(),
                  a.copy ? "copy mode" : "bucket-view mode", a.steps, a.warmup);
      std::printf("%-16s %6s %7s %9s %9s %9s %9s %9s %7s %7s %8s\n", "mode", "cap_MB", "buckets", "step_ms",
                  "bwd_ms", "comm_ms", "exposed", "tail_ms", "sync%", "overlap", "speedup");
    }
    for (double cap : caps) {
      double baseline = 0;
      for (const std::string& mode : modes) {
        Result r = run_mode(*comm, model, a, mode, cap);
        const StepStats& s = r.mean;
        if (r.wrong) {
          std::fprintf(stderr, "weft-train-bench: rank %d, %s at %g MiB: %llu reduced gradient elements are not the ranks' average\n",
                       comm->rank(), mode.c_str(), cap, static_cast<unsigned long long>(r.wrong));
          wrong_total += r.wrong;
        }
        if (mode == "none") baseline = s.step_ms;
        if (!root) continue;
        if (a.json) {
          std::string layout = "[";
          for (size_t i = 0; i < r.bucket_mb.size(); ++i) layout += fmt::format("{}{:.4f}", i ? "," : "", r.bucket_mb[i]);
          layout += "]";
          std::printf(
              "{\"model\":\"%s\",\"ranks\":%d,\"compute\":\"%s\",\"accel_tflops\":%g,\"mode\":\"%s\",\"bucket_cap_mb\":%g,"
              "\"first_bucket_mb\":%g,\"steps\":%d,\"step_ms\":%.4f,\"backward_ms\":%.4f,\"comm_ms\":%.4f,"
              "\"exposed_comm_ms\":%.4f,\"tail_ms\":%.4f,\"compress_ms\":%.4f,\"sync_overhead_pct\":%.3f,"
              "\"overlap_ratio\":%.4f,\"speedup_vs_none\":%s,\"buckets\":%d,\"wire_bytes\":%llu,\"bucket_mb\":%s}\n",
              model.name.c_str(), comm->size(), a.compute.c_str(), a.compute == "sim" ? a.accel_tflops : 0.0,
              mode.c_str(), cap, a.first_bucket_mb, a.steps, s.step_ms, s.backward_ms, s.comm_ms, s.exposed_comm_ms,
              s.tail_ms, s.compress_ms, 100 * s.sync_overhead, s.overlap_ratio,
              baseline > 0 ? fmt::format("{:.4f}", baseline / s.step_ms).c_str() : "null", s.buckets,
              static_cast<unsigned long long>(s.wire_bytes), layout.c_str());
        } else {
          std::printf("%-16s %6g %7d %9.2f %9.2f %9.2f %9.2f %9.2f %6.1f%% %7.2f %8s\n", mode.c_str(), cap, s.buckets,
                      s.step_ms, s.backward_ms, s.comm_ms, s.exposed_comm_ms, s.tail_ms, 100 * s.sync_overhead,
                      s.overlap_ratio, baseline > 0 ? fmt::format("{:.2f}x", baseline / s.step_ms).c_str() : "-");
          std::string layout;
          for (size_t i = 0; i < r.bucket_mb.size() && i < 12; ++i) layout += fmt::format(" {:.2f}", r.bucket_mb[i]);
          if (r.bucket_mb.size() > 12) layout += fmt::format(" ... ({} more)", r.bucket_mb.size() - 12);
          std::printf("  buckets (MiB, launch order):%s\n", layout.c_str());
        }
        std::fflush(stdout);
      }
    }
    comm->destroy();
    if (wrong_total) return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-train-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
