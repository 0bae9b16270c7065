// Hostile input: every fixture truncated at many offsets and mutated must give weft::Error or a
// topology, never a crash or another exception type.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/base/error.h"
#include "topo_test_util.h"

namespace weft::topo {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Returns "ok", "error" or a failure description.
std::string outcome(const std::string& xml) {
  try {
    NodeTopology t = read_topology_xml(xml, "<test>");
    summarize(t);
    return "ok";
  } catch (const Error&) {
    return "error";
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  }
}

std::vector<std::filesystem::path> fixtures() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(WEFT_TOPO_FIXTURES))
    if (e.path().extension() == ".xml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TopoRobustness, TruncatedFixtures) {
  for (const auto& f : fixtures()) {
    const std::string xml = slurp(f);
    const size_t step = std::max<size_t>(1, xml.size() / 60);
    for (size_t cut = 0; cut < xml.size(); cut += step) {
      const std::string r = outcome(xml.substr(0, cut));
      EXPECT_TRUE(r == "ok" || r == "error") << f.filename() << " cut at " << cut << ": " << r;
    }
  }
}

TEST(TopoRobustness, MutatedFixtures) {
  std::mt19937 rng(1234);
  for (const auto& f : fixtures()) {
    const std::string xml = slurp(f);
    std::vector<std::string> variants;
    // Non-numeric numbers, huge values, missing attributes.
    for (const char* from : {"count=\"", "numaid=\"", "speed=\"", "os_index=\"", "link_width=\"", "class=\"",
                             "busid=\"", "cpuset=\"", "pci_busid=\"", "pci_type=\"", "osdev_type=\"", "depth=\"",
                             "u64values length=\"", "nbobjs=\""}) {
      const size_t at = xml.find(from);
      if (at == std::string::npos) continue;
      const size_t v = at + std::strlen(from);
      std::string a = xml, b = xml, c = xml, d = xml;
      variants.push_back(a.insert(v, "zz"));
      variants.push_back(b.insert(v, std::string(100000, '9')));
      variants.push_back(c.replace(at, std::strlen(from) - 2, "ignored_attr"));
      variants.push_back(d.insert(v, "-"));
    }
    // Random byte flips.
    for (int k = 0; k < 30; ++k) {
      std::string m = xml;
      std::uniform_int_distribution<size_t> pos(0, m.size() - 1);
      for (int i = 0; i < 4; ++i) m[pos(rng)] = "<>\"=/ 0x9a-"[rng() % 11];
      variants.push_back(m);
    }
    for (size_t i = 0; i < variants.size(); ++i) {
      const std::string r = outcome(variants[i]);
      EXPECT_TRUE(r == "ok" || r == "error") << f.filename() << " variant " << i << ": " << r;
    }
  }
}

TEST(TopoRobustness, DeepNestingAndGarbage) {
  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 5000; ++i) deep += "<pci busid=\"0000:00:00.0\">";
  EXPECT_EQ(outcome(deep), "error");
  for (int i = 0; i < 5000; ++i) deep += "</pci>";
  deep += "</cpu></system>";
  EXPECT_EQ(outcome(deep), "error");
  std::string hdeep = "<topology version=\"2.0\">";
  for (int i = 0; i < 1000; ++i) hdeep += "<object type=\"Group\">";
  EXPECT_EQ(outcome(hdeep), "error");
  EXPECT_EQ(outcome(""), "error");
  EXPECT_EQ(outcome("not xml at all"), "error");
  EXPECT_EQ(outcome("<system/>"), "error");
  EXPECT_EQ(outcome("<topology/>"), "error");
  EXPECT_EQ(outcome("<system><cpu numaid=\"x\"/></system>"), "error");
  EXPECT_EQ(outcome("<system><cpu><pci class=\"0x0302\"/></cpu></system>"), "error");  // no busid
  EXPECT_EQ(outcome("<system><cpu affinity=\"zz\"><pci busid=\"0:1:0.0\" class=\"0x030200\"><gpu><nvlink "
                    "target=\"0000:01:00.0\" count=\"999999\"/></gpu></pci></cpu></system>"),
            "error");
  EXPECT_EQ(outcome("<system><cpu numaid=\"1\"><pci busid=\"0:1:0.0\" class=\"0x030200\"/></cpu></system>"), "ok");
  // CPU masks as Linux prints them are read; anything else is an error, not an abort inside hwloc
  // (",1615ff00" made hwloc_bitmap_sscanf fail an assertion: found by fuzz_topo_nccl).
  auto with_affinity = [](const std::string& a) {
    return outcome("<system><cpu numaid=\"0\" affinity=\"" + a +
                   "\"><pci busid=\"0:1:0.0\" class=\"0x030200\"/></cpu></system>");
  };
  for (const char* ok : {"000000ff", "ffff0000,00000000,ffff0000", "ff,0000ffff"}) EXPECT_EQ(with_affinity(ok), "ok") << ok;
  for (const char* no : {",1615ff00", "1615ff00,", "ff,,ff", "0x1234", "123456789", "ff ff", "fg"})
    EXPECT_EQ(with_affinity(no), "error") << no;
  // hwloc objects without the sets hwloc 2.9 needs.
  EXPECT_EQ(outcome("<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\" nodeset=\"0x1\"/></topology>"),
            "error");
}

}  // namespace
}  // namespace weft::topo
