// The Alibaba 2023 GPU cluster's node list (openb_node_list_gpu_node.csv: sn, cpu_milli,
// memory_mib, gpu, model) as the core's Fleet: one node per row, named by `sn`, with `gpu`
// devices whose type is the row's GPU `model` and whose host memory is the row's `memory_mib`.
// All nodes go into one region and one cluster (the trace is one cluster).
//
// The trace does not give GPU memory. Models whose memory is public get it (device_mem_mib's
// defaults: P100, T4, V100M16 16 GiB, V100M32 32 GiB, A10 24 GiB); any other model (the trace's
// anonymised G2 and G3) gets default_device_mem_mib, and the summary lists those models, or is an
// error when default_device_mem_mib is 0.
//
// Columns are found by header name (any order, other columns ignored): sn, gpu, model,
// memory_mib. Rows with gpu == 0 have no device to schedule: skipped and counted. Bad rows are
// errors naming PATH:LINE.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "base/result.h"

namespace orrery::sim {

struct AlibabaNodeOptions {
  std::string region = "alibaba";
  std::string cluster = "openb";
  std::map<std::string, std::int64_t> device_mem_mib = {
      {"P100", 16384}, {"T4", 16384}, {"V100M16", 16384}, {"V100M32", 32768}, {"A10", 24576}};
  std::int64_t default_device_mem_mib = 16384;  // 0: a model not in device_mem_mib is an error
  std::int64_t premium_reserve = 0;             // as in the core's format
};

struct AlibabaNodeSummary {
  std::int64_t rows = 0;          // data rows read
  std::int64_t nodes = 0;         // nodes in the fleet
  std::int64_t gpu_less = 0;      // rows with gpu == 0: skipped
  std::int64_t devices = 0;
  std::map<std::string, std::int64_t> devices_per_model;
  std::vector<std::string> defaulted_models;  // models given default_device_mem_mib
};

struct AlibabaFleet {
  core::Fleet fleet;
  AlibabaNodeSummary summary;
};

Result<AlibabaFleet> load_alibaba_nodes(const std::string& path,
                                        const AlibabaNodeOptions& options = {});

}  // namespace orrery::sim
