// The one translation unit that instantiates the Boost.MSM back-end of the job lifecycle.
#include "core/job_machine.h"

#include <array>
#include <cstdlib>
#include <string>
#include <utility>

// MSM's serialize() names boost::serialization::base_object.
#include <boost/serialization/base_object.hpp>
#include <boost/msm/back/state_machine.hpp>

#include "core/job_machine_table.h"
#include "core/msm_positioner.h"
#include "core/row_desc.h"

namespace orrery::core {

namespace {

using Machine = boost::msm::back::state_machine<JobFront>;
using Stt = Machine::stt;

// MSM numbers states by first appearance in the table; map those ids back to JobState.
template <std::size_t... I>
std::array<spec::JobState, spec::kNumJobStates> make_state_map(std::index_sequence<I...>) {
  std::array<spec::JobState, spec::kNumJobStates> map{};
  ((map[boost::msm::back::get_state_id<Stt, St<static_cast<spec::JobState>(I)>>::value] =
        static_cast<spec::JobState>(I)),
   ...);
  return map;
}
const std::array<spec::JobState, spec::kNumJobStates> kStateOfId =
    make_state_map(std::make_index_sequence<spec::kNumJobStates>{});

template <spec::EventKind K>
boost::msm::back::HandledEnum dispatch(Machine& m, FireContext& ctx) {
  return m.process_event(Ev<K>{&ctx});
}

using Dispatch = boost::msm::back::HandledEnum (*)(Machine&, FireContext&);
template <std::size_t... I>
constexpr std::array<Dispatch, spec::kNumEventKinds> make_dispatch(std::index_sequence<I...>) {
  return {&dispatch<static_cast<spec::EventKind>(I)>...};
}
constexpr auto kDispatch = make_dispatch(std::make_index_sequence<spec::kNumEventKinds>{});

template <std::size_t... I>
std::array<int, spec::kNumJobStates> make_id_of_state(std::index_sequence<I...>) {
  return {boost::msm::back::get_state_id<Stt, St<static_cast<spec::JobState>(I)>>::value...};
}
const std::array<int, spec::kNumJobStates> kIdOfState =
    make_id_of_state(std::make_index_sequence<spec::kNumJobStates>{});

}  // namespace

struct JobMachine::Impl {
  Machine m;
};

JobMachine::JobMachine() : impl_(std::make_unique<Impl>()) { impl_->m.start(); }
JobMachine::~JobMachine() = default;
JobMachine::JobMachine(JobMachine&&) noexcept = default;
JobMachine& JobMachine::operator=(JobMachine&&) noexcept = default;

spec::JobState JobMachine::state() const { return kStateOfId[impl_->m.current_state()[0]]; }

void JobMachine::position(spec::JobState s) {
  auto i = static_cast<std::size_t>(s);
  if (i >= kIdOfState.size()) std::abort();  // a bug: states come from the cluster state
  MsmPositioner p{kIdOfState[i]};
  impl_->m.serialize(p, 0);
  if (state() != s) std::abort();  // see core/msm_positioner.h
}

Status JobMachine::fire(spec::EventKind event, FireContext& ctx) {
  auto i = static_cast<std::size_t>(event);
  if (i >= kDispatch.size()) return Status::Error("unknown event " + std::to_string(i));
  auto before = state();
  impl_->m.rejected = false;
  auto handled = kDispatch[i](impl_->m, ctx);
  if (handled == boost::msm::back::HANDLED_TRUE) return Status::Ok();
  std::string what = std::string(spec::event_name(event)) + " in state " +
                     std::string(spec::state_name(before));
  if (handled == boost::msm::back::HANDLED_GUARD_REJECT)
    return Status::Error("guard rejected " + what);
  return Status::Error("no transition for " + what);
}

const std::vector<RowDesc<spec::Concrete>>& job_rows() {
  static const auto rows = rows_of<spec::Concrete, JobFront::transition_table>();
  return rows;
}

}  // namespace orrery::core
