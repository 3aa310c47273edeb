#include "core/policy/planner.h"

#include "core/policy/afs_planner.h"
#include "core/policy/fifo_planner.h"
#include "core/policy/orrery_planner.h"
#include "core/policy/tiresias_planner.h"

namespace orrery::core::policy {

std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options) {
  if (name == "orrery") return std::make_unique<OrreryPlanner>(options);
  if (name == "fifo") return std::make_unique<FifoPlanner>(options);
  if (name == "tiresias") return std::make_unique<TiresiasPlanner>(options);
  if (name == "afs") return std::make_unique<AfsPlanner>(options);
  return nullptr;
}

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names = {"orrery", "fifo", "tiresias", "afs"};
  return names;
}

}  // namespace orrery::core::policy
