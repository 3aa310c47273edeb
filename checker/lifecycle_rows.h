// The rows of the real job lifecycle table (core/job_machine_table.h) as solver rows.
#pragma once

#include <vector>

#include "checker/symbolic.h"

namespace orrery::checker {

std::vector<SymRow> lifecycle_rows();
// The rows of the real node table (core/node_machine_table.h) as solver rows.
std::vector<NodeSymRow> node_lifecycle_rows();

}  // namespace orrery::checker
