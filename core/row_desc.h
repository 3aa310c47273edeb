// Introspection of a Boost.MSM transition table into plain row descriptions, for any value domain:
// the core uses the concrete rows to find the row a decision would take and check its guard before
// journaling; the checker uses the solver rows to prove them. Nothing is constructed: the table is
// walked as a type sequence.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/mpl/for_each.hpp>
#include <boost/msm/front/functor_row.hpp>
#include <boost/msm/back/tools.hpp>

#include "spec/model.h"

namespace orrery::core {

template <class D>
struct RowDesc {
  int index = 0;  // 1-based position in the table
  spec::JobState src{};
  spec::EventKind event{};
  spec::JobState dst{};
  std::string_view guard_name = "none";
  std::string_view action_name = "none";
  spec::Clauses<D> (*guard)(const D&, const spec::ClusterVars<D>&, int,
                            const spec::Params<D>&) = nullptr;
  void (*effect)(const D&, spec::ClusterVars<D>&, int, const spec::Params<D>&) = nullptr;

  // "#9 Running --Preempt--> Checkpointing [favoured_beneficiary / none]"
  std::string label() const {
    std::string s = "#" + std::to_string(index) + " " + std::string(spec::state_name(src)) +
                    " --" + std::string(spec::event_name(event)) + "--> " +
                    std::string(spec::state_name(dst)) + " [" + std::string(guard_name) + " / " +
                    std::string(action_name) + "]";
    return s;
  }
};

namespace detail {

template <class T, class = void>
struct has_spec_type : std::false_type {};
template <class T>
struct has_spec_type<T, std::void_t<typename T::spec_type>> : std::true_type {};

template <class D>
struct RowCollector {
  std::vector<RowDesc<D>>* out;
  template <class Row>
  void operator()(boost::msm::wrap<Row>) const {
    RowDesc<D> r;
    r.index = static_cast<int>(out->size()) + 1;
    r.src = Row::Source::kState;
    r.event = Row::Evt::kKind;
    r.dst = Row::Target::kState;
    using G = typename Row::Guard;
    using A = typename Row::Action;
    // Only spec guards and effects may appear in a row: anything else would run in the machine
    // but be invisible here, so the checker would prove a row whose real behaviour it never saw.
    static_assert(has_spec_type<G>::value || std::is_same_v<G, boost::msm::front::none>,
                  "a lifecycle row's guard must be SpecGuard<...> or none");
    static_assert(has_spec_type<A>::value || std::is_same_v<A, boost::msm::front::none>,
                  "a lifecycle row's action must be SpecAction<...> or none");
    if constexpr (has_spec_type<G>::value) {
      r.guard_name = G::spec_type::name;
      r.guard = &G::spec_type::template clauses<D>;
    }
    if constexpr (has_spec_type<A>::value) {
      r.action_name = A::spec_type::name;
      r.effect = &A::spec_type::template apply<D>;
    }
    out->push_back(r);
  }
};

}  // namespace detail

// The rows of an MSM transition table, in table order.
template <class D, class Table>
std::vector<RowDesc<D>> rows_of() {
  std::vector<RowDesc<D>> rows;
  boost::mpl::for_each<Table, boost::msm::wrap<boost::mpl::placeholders::_1>>(
      detail::RowCollector<D>{&rows});
  return rows;
}

// A row of the node table (core/node_machine_table.h): no action (the row sets the node's state
// only), a guard over the node.
template <class D>
struct NodeRowDesc {
  int index = 0;  // 1-based position in the node table
  spec::NodeState src{};
  spec::NodeEvent event{};
  spec::NodeState dst{};
  std::string_view guard_name = "none";
  spec::Clauses<D> (*guard)(const D&, const spec::ClusterVars<D>&, int) = nullptr;

  // "node #8 Lost --FailedOver--> Down [node_idle]"
  std::string label() const {
    return "node #" + std::to_string(index) + " " + std::string(spec::node_state_name(src)) +
           " --" + std::string(spec::node_event_name(event)) + "--> " +
           std::string(spec::node_state_name(dst)) + " [" + std::string(guard_name) + "]";
  }
};

namespace detail {

template <class D>
struct NodeRowCollector {
  std::vector<NodeRowDesc<D>>* out;
  template <class Row>
  void operator()(boost::msm::wrap<Row>) const {
    NodeRowDesc<D> r;
    r.index = static_cast<int>(out->size()) + 1;
    r.src = Row::Source::kState;
    r.event = Row::Evt::kKind;
    r.dst = Row::Target::kState;
    using G = typename Row::Guard;
    static_assert(has_spec_type<G>::value || std::is_same_v<G, boost::msm::front::none>,
                  "a node row's guard must be NodeSpecGuard<...> or none");
    static_assert(std::is_same_v<typename Row::Action, boost::msm::front::none>,
                  "a node row has no action: it changes the node's state only");
    if constexpr (has_spec_type<G>::value) {
      r.guard_name = G::spec_type::name;
      r.guard = &G::spec_type::template clauses<D>;
    }
    out->push_back(r);
  }
};

}  // namespace detail

// The rows of a node MSM transition table, in table order.
template <class D, class Table>
std::vector<NodeRowDesc<D>> node_rows_of() {
  std::vector<NodeRowDesc<D>> rows;
  boost::mpl::for_each<Table, boost::msm::wrap<boost::mpl::placeholders::_1>>(
      detail::NodeRowCollector<D>{&rows});
  return rows;
}

}  // namespace orrery::core
