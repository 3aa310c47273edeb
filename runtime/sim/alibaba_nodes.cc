#include "runtime/sim/alibaba_nodes.h"

#include <algorithm>

#include "runtime/sim/csv_reader.h"
#include "runtime/sim/fleet_builder.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::sim {

Result<AlibabaFleet> load_alibaba_nodes(const std::string& path, const AlibabaNodeOptions& o) {
  auto reader = CsvReader::open(path);
  if (!reader) return reader.status();
  CsvReader& r = *reader;
  const int c_sn = r.column("sn"), c_gpu = r.column("gpu"), c_model = r.column("model"),
            c_mem = r.column("memory_mib");
  {
    std::string absent;
    for (auto [c, name] : {std::pair{c_sn, "sn"}, {c_gpu, "gpu"}, {c_model, "model"}, {c_mem, "memory_mib"}})
      if (c < 0) absent += (absent.empty() ? "" : ", ") + std::string(name);
    if (!absent.empty())
      return Status::Error(path + ":1: header lacks the column(s) " + absent +
                           " (a node list has sn, gpu, model, memory_mib)");
  }
  AlibabaFleet out;
  auto& s = out.summary;
  FleetBuilder b;
  while (true) {
    auto more = r.next();
    if (!more) return more.status();
    if (!*more) break;
    ++s.rows;
    const std::string sn(r.field(c_sn)), model(r.field(c_model));
    std::int64_t gpus = 0, host_mem = 0;
    if (!parse_int_field(r.field(c_gpu), 0, spec::kMaxNodeDevices, gpus))
      return r.error("gpu: expected an integer in [0, " + std::to_string(spec::kMaxNodeDevices) +
                     "], got \"" + std::string(r.field(c_gpu)) + "\"");
    if (!parse_int_field(r.field(c_mem), 0, std::int64_t{1} << 40, host_mem))
      return r.error("memory_mib: expected an integer in [0, 2^40], got \"" +
                     std::string(r.field(c_mem)) + "\"");
    if (gpus == 0) {
      ++s.gpu_less;
      continue;
    }
    if (!valid_fleet_name(model))
      return r.error("model: \"" + model + "\" is not a device type name (" + std::string(spec::kNameRule) + ")");
    std::int64_t mem = 0;
    if (auto it = o.device_mem_mib.find(model); it != o.device_mem_mib.end()) {
      mem = it->second;
    } else if (o.default_device_mem_mib > 0) {
      mem = o.default_device_mem_mib;
      if (std::find(s.defaulted_models.begin(), s.defaulted_models.end(), model) == s.defaulted_models.end())
        s.defaulted_models.push_back(model);
    } else {
      return r.error("model: no device memory known for \"" + model + "\" (add it to device_mem_mib)");
    }
    if (auto st = b.add_node(o.region, o.cluster, sn, host_mem); !st.ok()) return r.error(st.reason());
    if (auto st = b.add_devices(model, gpus, mem); !st.ok()) return r.error(st.reason());
    s.devices += gpus;
    s.devices_per_model[model] += gpus;
  }
  if (auto st = b.set_premium_reserve(o.premium_reserve); !st.ok()) return Status::Error(path + ": " + st.reason());
  auto f = b.finish();
  if (!f) return Status::Error(path + ": " + f.reason());
  out.fleet = std::move(*f);
  s.nodes = static_cast<std::int64_t>(out.fleet.nodes.size());
  return out;
}

}  // namespace orrery::sim
