// Walks the very transition table the core's Boost.MSM back-end is built from.
#include "checker/lifecycle_rows.h"

#include "core/job_machine_table.h"
#include "core/node_machine_table.h"

namespace orrery::checker {

std::vector<SymRow> lifecycle_rows() {
  return core::rows_of<Z3Domain, core::JobFront::transition_table>();
}

std::vector<NodeSymRow> node_lifecycle_rows() {
  return core::node_rows_of<Z3Domain, core::NodeFront::transition_table>();
}

std::vector<OrdRow> lifecycle_order_rows() {
  return core::rows_of<IdOrderDomain, core::JobFront::transition_table>();
}

std::vector<OrdNodeRow> node_lifecycle_order_rows() {
  return core::node_rows_of<IdOrderDomain, core::NodeFront::transition_table>();
}

}  // namespace orrery::checker
