// The rows of the real job lifecycle table (core/job_machine_table.h) as solver rows.
#pragma once

#include <vector>

#include "checker/id_order.h"
#include "checker/symbolic.h"

namespace orrery::checker {

std::vector<SymRow> lifecycle_rows();
// The rows of the real node table (core/node_machine_table.h) as solver rows.
std::vector<NodeSymRow> node_lifecycle_rows();

// The same tables in the ORDER check's domain (checker/id_order.h).
std::vector<OrdRow> lifecycle_order_rows();
std::vector<OrdNodeRow> node_lifecycle_order_rows();

}  // namespace orrery::checker
