// The rows of the real lifecycle table (core/job_machine_table.h) as solver rows.
#pragma once

#include <vector>

#include "checker/symbolic.h"

namespace orrery::checker {

std::vector<SymRow> lifecycle_rows();

}  // namespace orrery::checker
