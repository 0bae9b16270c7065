#include "launcher/node_topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace weft::launcher {
namespace {

std::vector<int> cpus_of(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  if (!set) return out;
  unsigned i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(static_cast<int>(i)); }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string bus_id_of(hwloc_obj_t pci) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return buf;
}

// Fills numa/cpus/path of a device from its position in the tree.
void place(hwloc_topology_t topo, hwloc_obj_t pci, const std::vector<NumaNode>& numa, PciDevice* d) {
  d->bus_id = bus_id_of(pci);
  d->pci_domain = pci->attr->pcidev.domain;
  d->pci_bus = pci->attr->pcidev.bus;
  std::string path;
  for (hwloc_obj_t o = pci->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent) {
    path = std::to_string(o->gp_index) + "/" + path;
  }
  d->path = path;
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (!anc) return;
  d->cpus = cpus_of(anc->cpuset);
  for (size_t i = 0; i < numa.size(); ++i) {
    hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(numa[i].os_index));
    if (n && anc->nodeset && hwloc_bitmap_isset(anc->nodeset, n->os_index)) {
      d->numa = static_cast<int>(i);
      break;
    }
  }
}

NodeTopology fallback() {
  NodeTopology t;
  NumaNode n;
  long count = sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < std::max(1L, count); ++i) n.cpus.push_back(static_cast<int>(i));
  t.cores = static_cast<int>(n.cpus.size());
  t.numa.push_back(n);
  return t;
}

}  // namespace

NodeTopology probe_node_topology() {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return fallback();
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return fallback();
  }
  NodeTopology t;
  t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));) {
    NumaNode node;
    node.os_index = static_cast<int>(n->os_index);
    node.cpus = cpus_of(n->cpuset);
    if (!node.cpus.empty()) t.numa.push_back(node);  // skip CPU-less (memory-only) nodes
  }
  if (t.numa.empty()) {
    hwloc_topology_destroy(topo);
    return fallback();
  }
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_pcidev(topo, p));) {
    unsigned cls = p->attr->pcidev.class_id;
    // NVIDIA (0x10de) VGA (0x0300) or 3D controller (0x0302).
    if (p->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302)) {
      PciDevice g;
      place(topo, p, t.numa, &g);
      g.name = g.bus_id;
      t.gpus.push_back(g);
    }
  }
  std::sort(t.gpus.begin(), t.gpus.end(), [](const PciDevice& a, const PciDevice& b) { return a.bus_id < b.bus_id; });
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(topo, o));) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) continue;
    hwloc_obj_t pci = o->parent;
    while (pci && pci->type != HWLOC_OBJ_PCI_DEVICE) pci = pci->parent;
    if (!pci) continue;
    PciDevice nic;
    place(topo, pci, t.numa, &nic);
    nic.name = o->name;
    t.nics.push_back(nic);
  }
  hwloc_topology_destroy(topo);
  if (t.cores <= 0) t.cores = static_cast<int>(t.numa.size());
  return t;
}

int pci_affinity(const PciDevice& a, const PciDevice& b) {
  if (a.pci_domain != b.pci_domain) return 0;
  int score = 1;
  size_t n = std::min(a.path.size(), b.path.size());
  size_t i = 0;
  while (i < n && a.path[i] == b.path[i]) {
    if (a.path[i] == '/') ++score;
    ++i;
  }
  return score;
}

}  // namespace weft::launcher
