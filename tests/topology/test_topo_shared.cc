// Facts recorded in shared/topologies/SOURCES.md, asserted on the real dumps.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "runtime/base/error.h"
#include "topology/topology.h"

namespace weft::topo {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = WEFT_SHARED_TOPOLOGIES;

bool shared_missing() { return !fs::is_directory(kDir); }

NodeSummary load(const std::string& rel) { return summarize(load_topology_file((kDir / rel).string())); }

std::string path(const NodeSummary& s, const std::string& a, const std::string& b) {
  int x = -1, y = -1;
  for (int d = 0; d < s.num_devices(); ++d) {
    if (s.device_id(d) == a) x = d;
    if (s.device_id(d) == b) y = d;
  }
  return x < 0 || y < 0 ? "missing" : s.paths[x][y].label();
}

// GPU ids that are `cls` to the NIC.
std::set<std::string> gpus_with(const NodeSummary& s, int nic, PathClass cls) {
  std::set<std::string> out;
  for (int g = 0; g < s.num_gpus(); ++g)
    if (s.gpu_nic(g, nic).cls == cls) out.insert(s.gpus[g].id);
  return out;
}

bool all_gpu_pairs(const NodeSummary& s, PathClass c) {
  for (int a = 0; a < s.num_gpus(); ++a)
    for (int b = 0; b < s.num_gpus(); ++b)
      if (a != b && s.gpu_gpu(a, b).cls != c) return false;
  return true;
}

TEST(TopoShared, EveryFileLoadsOrFailsCleanly) {
  if (shared_missing()) GTEST_SKIP() << "shared topologies not found at " << kDir.string();
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(kDir)) {
    if (e.path().extension() != ".xml") continue;
    ++files;
    try {
      auto s = summarize(load_topology_file(e.path().string()));
      EXPECT_FALSE(s.numa_nodes.empty()) << e.path();
      EXPECT_FALSE(format_matrix(s).empty());
      EXPECT_EQ(summary_from_json(to_json(s)), s) << e.path();
    } catch (const Error& err) {
      // Only the NCCL graph file is not a topology.
      EXPECT_NE(e.path().filename().string().find("graph"), std::string::npos) << e.path() << ": " << err.what();
    }
  }
  EXPECT_GE(files, 20);
}

TEST(TopoShared, NvidiaNodes) {
  if (shared_missing()) GTEST_SKIP() << "shared topologies not found at " << kDir.string();
  auto dgx2 = load("hwloc/nvidia-dgx2h-16xV100-12xNVSwitch-hwloc2.xml");
  EXPECT_EQ(dgx2.num_gpus(), 16);  // nvml osdevs typed COPROC
  EXPECT_EQ(dgx2.num_nics(), 0);
  EXPECT_EQ(dgx2.fabric, Fabric::kNVLink);
  EXPECT_EQ(path(dgx2, "GPU0", "GPU15"), "NV6");  // through the NVSwitches, across baseboards
  EXPECT_TRUE(all_gpu_pairs(dgx2, PathClass::kNV));

  auto xe = load("hwloc/dell-xe8640-4xH100-nvlink-4xmlx5-hwloc2.xml");
  ASSERT_EQ(xe.num_gpus(), 4);
  ASSERT_EQ(xe.num_nics(), 4);
  EXPECT_EQ(xe.numa_nodes.size(), 8u);
  EXPECT_TRUE(all_gpu_pairs(xe, PathClass::kNV));
  EXPECT_EQ(path(xe, "GPU0", "GPU1"), "NV6");
  const std::set<std::pair<std::string, std::string>> pix = {
      {"GPU0", "mlx5_0"}, {"GPU0", "mlx5_1"}, {"GPU1", "mlx5_2"}, {"GPU3", "mlx5_3"}};
  for (int g = 0; g < 4; ++g)
    for (int n = 0; n < 4; ++n)
      EXPECT_EQ(xe.gpu_nic(g, n).cls == PathClass::kPIX, pix.count({xe.gpus[g].id, xe.nics[n].id}) == 1)
          << xe.gpus[g].id << " " << xe.nics[n].id;
  // GPU2 has no local NIC and takes the unused second port of GPU0's card.
  EXPECT_EQ(xe.nics[xe.nic_for_gpu[2]].id, "mlx5_1");

  auto minsky = load("hwloc/ibm-power8-minsky-4xP100-nvlink-hwloc2.xml");
  EXPECT_EQ(minsky.num_gpus(), 4);
  EXPECT_EQ(path(minsky, "GPU0", "GPU1"), "NV2");

  auto lassen = load("hwloc/ibm-power9-ac922-lassen-4xV100-4xmlx5-hwloc2.xml");
  EXPECT_EQ(lassen.num_gpus(), 4);
  EXPECT_EQ(lassen.num_nics(), 4);
  EXPECT_EQ(lassen.fabric, Fabric::kNone);  // no NVLink distances in the file
  std::set<int> numa;
  for (const auto& n : lassen.numa_nodes) numa.insert(n.os_index);
  EXPECT_EQ(numa, (std::set<int>{0, 8}));
  for (int n = 0; n < 4; ++n) EXPECT_EQ(gpus_with(lassen, n, PathClass::kNODE).size(), 2u);

  auto jwb = load("hwloc/juwels-booster-4xA100-4xHDR200-hwloc2.2.xml");
  EXPECT_EQ(jwb.num_gpus(), 4);  // PCI devices only
  EXPECT_EQ(jwb.num_nics(), 4);
  for (int n = 0; n < 4; ++n) EXPECT_EQ(gpus_with(jwb, n, PathClass::kPIX).size(), 1u);

  auto mel = load("hwloc/meluxina-gpu-4xA100-2xHDR-hwloc1.xml");  // hwloc 1.x format
  EXPECT_EQ(mel.num_gpus(), 4);
  EXPECT_EQ(mel.num_nics(), 2);
  for (int n = 0; n < 2; ++n) EXPECT_EQ(gpus_with(mel, n, PathClass::kPIX).size(), 1u);

  auto g4 = load("hwloc/aws-g4dn-metal-8xT4-efa-hwloc2.xml");
  EXPECT_EQ(g4.num_gpus(), 8);
  ASSERT_GE(g4.nic_index("rdmap197s0"), 0);
  EXPECT_EQ(g4.fabric, Fabric::kNone);
  for (int g = 0; g < 8; ++g) {
    auto c = g4.gpu_nic(g, g4.nic_index("rdmap197s0")).cls;
    EXPECT_TRUE(c == PathClass::kNODE || c == PathClass::kSYS);
  }
  EXPECT_EQ(path(g4, "GPU0", "GPU1"), "PHB");
}

TEST(TopoShared, AmdNodes) {
  if (shared_missing()) GTEST_SKIP() << "shared topologies not found at " << kDir.string();
  auto tioga = load("hwloc/hpe-cray-ex235a-tioga-4xMI250X-xgmi-slingshot-hwloc2.xml");
  EXPECT_EQ(tioga.num_gpus(), 8);
  ASSERT_EQ(tioga.num_nics(), 4);  // Slingshot, network osdevs only
  EXPECT_EQ(tioga.fabric, Fabric::kXGMI);
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(tioga.nics[n].id.substr(0, 3), "hsi");
    EXPECT_EQ(gpus_with(tioga, n, PathClass::kPHB).size(), 1u);
    EXPECT_GE(gpus_with(tioga, n, PathClass::kNODE).size(), 1u);
  }
  auto spx = load("hwloc/hpe-cray-ex255a-tuolumne-4xMI300A-SPX-xgmi-slingshot-hwloc2.xml");
  EXPECT_EQ(spx.num_gpus(), 4);
  ASSERT_EQ(spx.num_nics(), 4);
  for (int n = 0; n < 4; ++n) EXPECT_EQ(gpus_with(spx, n, PathClass::kPHB).size(), 1u);
  EXPECT_TRUE(all_gpu_pairs(spx, PathClass::kNV));
  auto cpx = load("hwloc/hpe-cray-ex255a-tuolumne-4xMI300A-CPX-24part-xgmi-hwloc2.xml");
  EXPECT_EQ(cpx.num_gpus(), 24);
  std::set<std::string> functions;
  for (const auto& g : cpx.gpus) functions.insert(g.pci);
  EXPECT_EQ(functions.size(), 4u);
  EXPECT_EQ(cpx.fabric, Fabric::kXGMI);
  auto corona = load("hwloc/llnl-corona-8xMI50-mlx5-hwloc2.xml");
  EXPECT_EQ(corona.num_gpus(), 8);
  ASSERT_EQ(corona.num_nics(), 1);
  EXPECT_EQ(corona.nics[0].id, "mlx5_0");
  EXPECT_EQ(gpus_with(corona, 0, PathClass::kPHB).size(), 1u);
  EXPECT_EQ(gpus_with(corona, 0, PathClass::kPHB).size() + gpus_with(corona, 0, PathClass::kNODE).size() +
                gpus_with(corona, 0, PathClass::kSYS).size(),
            8u);
}

TEST(TopoShared, NcclFiles) {
  if (shared_missing()) GTEST_SKIP() << "shared topologies not found at " << kDir.string();
  auto ndv4 = load("nccl/azure-ndv4-topo.xml");
  EXPECT_EQ(ndv4.num_gpus(), 8);
  EXPECT_EQ(ndv4.num_nics(), 8);
  for (int g = 0; g < 8; ++g) {
    int pix = 0;
    for (int n = 0; n < 8; ++n) pix += ndv4.gpu_nic(g, n).cls == PathClass::kPIX;
    EXPECT_EQ(pix, 2);
  }
  std::set<int> used(ndv4.nic_for_gpu.begin(), ndv4.nic_for_gpu.end());
  EXPECT_EQ(used.size(), 8u);  // balanced: one NIC per GPU
  auto ndv5 = load("nccl/azure-ndv5-topo.xml");
  EXPECT_EQ(ndv5.num_gpus(), 8);
  EXPECT_EQ(ndv5.num_nics(), 8);
  for (int n = 0; n < 8; ++n) EXPECT_EQ(gpus_with(ndv5, n, PathClass::kPIX).size(), 1u);
  auto ndv2 = load("nccl/azure-ndv2-topo.xml");
  EXPECT_EQ(ndv2.num_gpus(), 8);
  EXPECT_EQ(ndv2.num_nics(), 1);
  auto ncv4 = load("nccl/azure-ncv4-topo.xml");
  EXPECT_EQ(ncv4.num_gpus(), 4);
  EXPECT_GE(ncv4.nic_index("eth0"), 0);
  auto p4d = load("nccl/aws-p4d-24xl-topo.xml");
  EXPECT_EQ(p4d.num_gpus(), 8);
  ASSERT_EQ(p4d.num_nics(), 4);
  for (int n = 0; n < 4; ++n) EXPECT_EQ(gpus_with(p4d, n, PathClass::kPIX).size(), 2u);
  auto p5 = load("nccl/aws-p5-48xl-topo.xml");
  EXPECT_EQ(p5.num_gpus(), 0);
  EXPECT_EQ(p5.num_nics(), 32);
  auto mi300 = load("nccl/rccl-topo_8p_940-8xMI300X-8xCX7.xml");
  EXPECT_EQ(mi300.num_gpus(), 8);
  EXPECT_EQ(mi300.num_nics(), 8);
  EXPECT_TRUE(all_gpu_pairs(mi300, PathClass::kNV));
  for (int g = 0; g < 8; ++g) EXPECT_EQ(mi300.nics[mi300.nic_for_gpu[g]].id, "mlx5_" + std::to_string(g));
  auto mi250 = load("nccl/rccl-topo_8p_90a_1-MI250.xml");
  EXPECT_EQ(mi250.num_gpus(), 8);
  EXPECT_FALSE(all_gpu_pairs(mi250, PathClass::kNV));  // partial XGMI
  int xgmi_ring_edges = 0;
  for (size_t i = 0; i < mi250.ring.size(); ++i)
    xgmi_ring_edges += mi250.gpu_gpu(mi250.ring[i], mi250.ring[(i + 1) % 8]).cls == PathClass::kNV;
  EXPECT_EQ(xgmi_ring_edges, 8);  // a Hamiltonian XGMI cycle exists and is found
  EXPECT_THROW(load("nccl/azure-ncv4-graph.xml"), Error);
}

}  // namespace
}  // namespace weft::topo
