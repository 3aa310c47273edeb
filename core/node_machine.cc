// The one translation unit that instantiates the Boost.MSM back-end of the node lifecycle.
#include "core/node_machine.h"

#include <array>
#include <cstdlib>
#include <string>
#include <utility>

#include <boost/serialization/base_object.hpp>
#include <boost/msm/back/state_machine.hpp>

#include "core/node_machine_table.h"
#include "core/msm_positioner.h"
#include "core/row_desc.h"

namespace orrery::core {

namespace {

using Machine = boost::msm::back::state_machine<NodeFront>;
using Stt = Machine::stt;

template <std::size_t... I>
std::array<spec::NodeState, spec::kNumNodeStates> make_state_map(std::index_sequence<I...>) {
  std::array<spec::NodeState, spec::kNumNodeStates> map{};
  ((map[boost::msm::back::get_state_id<Stt, NodeSt<static_cast<spec::NodeState>(I)>>::value] =
        static_cast<spec::NodeState>(I)),
   ...);
  return map;
}
const std::array<spec::NodeState, spec::kNumNodeStates> kStateOfId =
    make_state_map(std::make_index_sequence<spec::kNumNodeStates>{});

template <std::size_t... I>
std::array<int, spec::kNumNodeStates> make_id_of_state(std::index_sequence<I...>) {
  return {boost::msm::back::get_state_id<Stt, NodeSt<static_cast<spec::NodeState>(I)>>::value...};
}
const std::array<int, spec::kNumNodeStates> kIdOfState =
    make_id_of_state(std::make_index_sequence<spec::kNumNodeStates>{});

template <spec::NodeEvent K>
boost::msm::back::HandledEnum dispatch(Machine& m, NodeFireContext& ctx) {
  return m.process_event(NodeEv<K>{&ctx});
}
using Dispatch = boost::msm::back::HandledEnum (*)(Machine&, NodeFireContext&);
template <std::size_t... I>
constexpr std::array<Dispatch, spec::kNumNodeEvents> make_dispatch(std::index_sequence<I...>) {
  return {&dispatch<static_cast<spec::NodeEvent>(I)>...};
}
constexpr auto kDispatch = make_dispatch(std::make_index_sequence<spec::kNumNodeEvents>{});

}  // namespace

struct NodeMachine::Impl {
  Machine m;
};

NodeMachine::NodeMachine() : impl_(std::make_unique<Impl>()) { impl_->m.start(); }
NodeMachine::~NodeMachine() = default;
NodeMachine::NodeMachine(NodeMachine&&) noexcept = default;
NodeMachine& NodeMachine::operator=(NodeMachine&&) noexcept = default;

spec::NodeState NodeMachine::state() const { return kStateOfId[impl_->m.current_state()[0]]; }

void NodeMachine::position(spec::NodeState s) {
  auto i = static_cast<std::size_t>(s);
  if (i >= kIdOfState.size()) std::abort();  // a bug: states come from the cluster state
  MsmPositioner p{kIdOfState[i]};
  impl_->m.serialize(p, 0);
  if (state() != s) std::abort();
}

Status NodeMachine::fire(spec::NodeEvent event, NodeFireContext& ctx) {
  auto i = static_cast<std::size_t>(event);
  if (i >= kDispatch.size()) return Status::Error("unknown node event " + std::to_string(i));
  auto before = state();
  impl_->m.rejected = false;
  auto handled = kDispatch[i](impl_->m, ctx);
  if (handled == boost::msm::back::HANDLED_TRUE) return Status::Ok();
  std::string what = std::string(spec::node_event_name(event)) + " for a node in state " +
                     std::string(spec::node_state_name(before));
  if (handled == boost::msm::back::HANDLED_GUARD_REJECT)
    return Status::Error("guard rejected " + what);
  return Status::Error("no transition for " + what);
}

const std::vector<NodeRowDesc<spec::Concrete>>& node_rows() {
  static const auto rows = node_rows_of<spec::Concrete, NodeFront::transition_table>();
  return rows;
}

}  // namespace orrery::core
