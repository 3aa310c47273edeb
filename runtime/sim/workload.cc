#include "runtime/sim/workload.h"

#include <cmath>

namespace orrery::sim {

int Workload::intern_device_type(const std::string& name) {
  for (std::size_t i = 0; i < device_types.size(); ++i)
    if (device_types[i] == name) return static_cast<int>(i);
  if (device_types.size() >= kMaxWorkloadDeviceTypes) return -1;
  device_types.push_back(name);
  return static_cast<int>(device_types.size()) - 1;
}

Status check_job(const SimJob& j, const Workload& w) {
  if (!std::isfinite(j.arrival_s) || j.arrival_s < 0)
    return Status::Error("arrival_s must be finite and >= 0");
  if (!std::isfinite(j.duration_s) || j.duration_s < 0)
    return Status::Error("duration_s must be finite and >= 0");
  if (!(1 <= j.min_devices && j.min_devices <= j.max_devices && j.max_devices <= j.world &&
        j.world <= spec::kMaxWorld))
    return Status::Error("needs 1 <= min_devices <= max_devices <= world <= 2^20");
  if (!splits_evenly(j.world, j.min_devices, j.max_devices))
    return Status::Error("world does not split evenly over a device count in range");
  if (j.mem_mib < 1 || j.mem_mib > spec::kMaxMemMib)
    return Status::Error("mem_mib must be in [1, 2^40]");
  if (w.device_types.size() < kMaxWorkloadDeviceTypes &&
      (j.device_types >> w.device_types.size()) != 0)
    return Status::Error("device type mask names a type the workload does not have");
  if (j.tenant < 0 || static_cast<std::size_t>(j.tenant) >= w.tenants.size())
    return Status::Error("tenant out of range");
  const auto t = static_cast<std::int64_t>(j.tier);
  if (t < 0 || t >= spec::kNumTiers) return Status::Error("unknown tier");
  return Status::Ok();
}

std::vector<int> fleet_type_ids(const Workload& w, const core::Fleet& fleet) {
  std::vector<int> ids;
  ids.reserve(w.device_types.size());
  for (const auto& t : w.device_types) ids.push_back(fleet.type_id(t));
  return ids;
}

double demand_gpu_s(const Workload& w) {
  double d = 0;
  for (const auto& j : w.jobs) d += j.duration_s * j.world;
  return d;
}

}  // namespace orrery::sim
