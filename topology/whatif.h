// Node summaries edited for what-if studies (weft-sim): a node whose GPUs share NVSwitches of a
// given bandwidth, or with NICs of a given number and speed, where the file describes another
// (or none: the Azure and AWS files leave NVLink to NVML, many hwloc exports have no NICs).
#pragma once
#include "topology/summary.h"

namespace weft::topo {

// `gpus` GPUs, every pair on one NVSwitch fabric of nv_gbs per GPU, no NIC, one NUMA node.
NodeSummary switched_node(int gpus, double nv_gbs);
// Every GPU pair of s through one NVSwitch fabric at nv_gbs per GPU (NV, links of 25 GB/s).
void set_gpu_switch(NodeSummary& s, double nv_gbs);
// s's NICs replaced by k NICs ("net0".."net<k-1>") of gbs each: GPU g's own is NIC g*k/G (PIX),
// the others SYS; on a node without GPUs every NIC is NODE to every rank.
void set_nics(NodeSummary& s, int k, double gbs);
// Every NIC of s at gbs (one NIC added when s has none).
void set_nic_speed(NodeSummary& s, double gbs);

}  // namespace weft::topo
