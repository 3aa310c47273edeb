// Puts a Boost.MSM back-end in a given state through MSM's own serialize() hook: an "archive" that
// writes the state id into the machine's current-state array (the one region) and leaves
// everything else alone. Used by the job machine and the node machine (core/job_machine.cc,
// core/node_machine.cc), both one-region machines. This relies on what Boost 1.81's
// state_machine::serialize() writes (its int array of current states is the only array it hands
// the archive); each caller checks the state afterwards, so a Boost that changed it would abort at
// the first event rather than run the wrong row. No private member is touched.
#pragma once

#include <cstddef>

namespace orrery::core {

struct MsmPositioner {
  int id;
  template <std::size_t N>
  MsmPositioner& operator&(int (&states)[N]) {
    static_assert(N == 1, "a lifecycle machine has one region");
    states[0] = id;
    return *this;
  }
  template <class T>
  MsmPositioner& operator&(T&&) {
    return *this;
  }
};

}  // namespace orrery::core
