// The node lifecycle as a second Boost.MSM front-end: the table the core runs for node events
// (core/node_machine.cc instantiates the back-end, in that translation unit only) and that the
// checker walks and proves like the job table. A node row changes only the node's state; its
// guards are spec formulas (spec/node_lifecycle.h).
//
// Include this header only where the table itself is needed; everything else uses
// core/node_machine.h, which has no Boost dependency.
#pragma once

#include <boost/mpl/vector.hpp>
#include <boost/msm/front/functor_row.hpp>
#include <boost/msm/front/state_machine_def.hpp>

#include "core/node_machine.h"
#include "spec/node_lifecycle.h"

namespace orrery::core {

// One event type per NodeEvent, one state type per NodeState.
template <spec::NodeEvent K>
struct NodeEv {
  static constexpr spec::NodeEvent kKind = K;
  NodeFireContext* ctx;
};

template <spec::NodeState S>
struct NodeSt : boost::msm::front::state<> {
  static constexpr spec::NodeState kState = S;
};

// A row's guard is NodeSpecGuard<G>; `spec_type` lets introspection find the spec formula again.
template <class G>
struct NodeSpecGuard {
  using spec_type = G;
  template <class Evt, class Fsm, class Src, class Tgt>
  bool operator()(const Evt& e, Fsm&, Src&, Tgt&) const {
    spec::Concrete d;
    return spec::all_of(d, G::clauses(d, *e.ctx->cluster, e.ctx->node));
  }
};

namespace node_lifecycle {

namespace msmf = boost::msm::front;
using spec::NodeEvent;
using spec::NodeState;
using msmf::none;

using Down = NodeSt<NodeState::kDown>;
using Joining = NodeSt<NodeState::kJoining>;
using Up = NodeSt<NodeState::kUp>;
using Draining = NodeSt<NodeState::kDraining>;
using Lost = NodeSt<NodeState::kLost>;

using Register = NodeEv<NodeEvent::kRegister>;
using Ready = NodeEv<NodeEvent::kReady>;
using Drain = NodeEv<NodeEvent::kDrain>;
using Undrain = NodeEv<NodeEvent::kUndrain>;
using HeartbeatLost = NodeEv<NodeEvent::kHeartbeatLost>;
using FailedOver = NodeEv<NodeEvent::kFailedOver>;

template <class S, class E, class T, class G = none>
using Row = msmf::Row<S, E, T, none, G>;
template <class G>
using If = NodeSpecGuard<G>;

using Table = boost::mpl::vector<
    //  Source    Event          Target    Guard
    Row<Down,     Register,      Joining>,
    Row<Joining,  Ready,         Up>,
    Row<Up,       Drain,         Draining>,
    Row<Draining, Undrain,       Up>,
    Row<Joining,  HeartbeatLost, Lost>,
    Row<Up,       HeartbeatLost, Lost>,
    Row<Draining, HeartbeatLost, Lost>,
    Row<Lost,     FailedOver,    Down,     If<spec::GuardNodeIdle>>>;

}  // namespace node_lifecycle

// The front-end; illegal events are reported through `rejected`, never by aborting.
struct NodeFront : boost::msm::front::state_machine_def<NodeFront> {
  using initial_state = node_lifecycle::Down;
  using transition_table = node_lifecycle::Table;

  bool rejected = false;
  template <class Fsm, class Event>
  void no_transition(const Event&, Fsm&, int) {
    rejected = true;
  }
};

}  // namespace orrery::core
