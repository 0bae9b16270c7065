// Umbrella header for the topology layer (namespace weft::topo).
#pragma once
#include "topology/cluster.h"
#include "topology/cost.h"
#include "topology/discovery.h"
#include "topology/flows.h"
#include "topology/model.h"
#include "topology/paths.h"
#include "topology/plan.h"
#include "topology/report.h"
#include "topology/ring.h"
#include "topology/summary.h"
