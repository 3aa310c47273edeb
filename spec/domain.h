// The concrete value domain and the generic helpers every spec formula is written with.
//
// Every guard, effect and invariant in spec/ is a template over a *value domain* D that supplies
//   D::Int, D::Bool            value types (int64_t/bool here, z3::expr in checker/z3_domain.h)
//   d.k(v), d.b(v)             literals
//   d.ite(c, a, b)             if-then-else on Int
//   d.implies(a, b)            logical implication
//   d.mod(x, f)                x modulo a positive constant f (floor semantics, in [0, f))
//   d.div(x, f)                x divided by a positive constant f, rounded down (floor)
//   d.select(n, idx, f, dflt)  f(i) for the i in [0, n) equal to idx, else dflt
// and device sets, so that a formula over "the selected devices" or "the devices a job holds" is
// one text whatever the fleet's size:
//   D::DevSet                  a set of device ids
//   d.members(set, f)          calls f(dev, in) for devices that may be members, `in` saying whether
//                              dev is one: the concrete domain visits only the members (in = true),
//                              the symbolic one every device with its membership bit. A formula
//                              must therefore guard what it does with `in`.
//   d.size(set)                the number of members
//   d.contains(set, dev)       membership of one device
//   d.no_devices(m)            the empty set (m: the fleet's device count)
//   d.node_sums(nodes)         an accumulator of two per-node sums (devices, host memory) that
//                              visits, in for_each, every node something was added to (concrete)
//                              or every node (symbolic)
// Formulas use C++ operators (+ - == < && || !) on these types, which both domains provide, so
// the very same template text is evaluated by the core and proved by the checker.
//
// Cost: with the concrete domain a formula that visits only `members` of a decision's selection
// and of the acting job's held set costs O(|selection| + |held|) visits, whatever the fleet's size
// (each finding its device's group: see ClusterVars::group_of).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <tuple>
#include <vector>

namespace orrery::spec {

struct Concrete {
  using Int = std::int64_t;
  using Bool = bool;
  // Sorted, distinct device ids.
  using DevSet = std::vector<std::int32_t>;

  Int k(std::int64_t v) const { return v; }
  Bool b(bool v) const { return v; }
  Int ite(Bool c, Int a, Int b) const { return c ? a : b; }
  Bool implies(Bool a, Bool b) const { return !a || b; }
  Int mod(Int x, int f) const { return ((x % f) + f) % f; }
  Int div(Int x, int f) const { return x / f - ((x % f != 0 && x < 0) ? 1 : 0); }
  template <class F>
  auto select(int n, Int idx, F f, decltype(f(0)) dflt) const {
    return (idx >= 0 && idx < n) ? f(static_cast<int>(idx)) : dflt;
  }

  template <class F>
  void members(const DevSet& s, F&& f) const {
    for (auto dev : s) f(static_cast<int>(dev), true);
  }
  Int size(const DevSet& s) const { return static_cast<Int>(s.size()); }
  Bool contains(const DevSet& s, int dev) const {
    return std::binary_search(s.begin(), s.end(), static_cast<std::int32_t>(dev));
  }
  DevSet no_devices(int) const { return {}; }

  // Sparse: one entry per run of additions to the same node, folded per node in for_each.
  class NodeSums {
   public:
    void add(int node, Int devices, Int mem) {
      if (!e_.empty() && std::get<0>(e_.back()) == node) {
        std::get<1>(e_.back()) += devices;
        std::get<2>(e_.back()) += mem;
      } else {
        e_.emplace_back(node, devices, mem);
      }
    }
    template <class F>
    void for_each(F&& f) {
      std::stable_sort(e_.begin(), e_.end(),
                       [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
      for (std::size_t i = 0; i < e_.size();) {
        auto [node, devs, mem] = e_[i];
        for (++i; i < e_.size() && std::get<0>(e_[i]) == node; ++i) {
          devs += std::get<1>(e_[i]);
          mem += std::get<2>(e_[i]);
        }
        f(node, devs, mem);
      }
    }

   private:
    std::vector<std::tuple<int, Int, Int>> e_;
  };
  NodeSums node_sums(int) const { return {}; }
};

// x is one of the listed enum values.
template <class D, class E>
typename D::Bool one_of(const D& d, const typename D::Int& x, std::initializer_list<E> values) {
  typename D::Bool acc = d.b(false);
  for (E v : values) acc = acc || (x == d.k(static_cast<std::int64_t>(v)));
  return acc;
}

// x == v for an enum value v.
template <class D, class E>
typename D::Bool is(const D& d, const typename D::Int& x, E v) {
  return x == d.k(static_cast<std::int64_t>(v));
}

// 1 if c else 0.
template <class D>
typename D::Int indicator(const D& d, const typename D::Bool& c) {
  return d.ite(c, d.k(1), d.k(0));
}

// x * (factor - offset) when factor - offset lies in [1, max_factor], else 0. Written as a case
// split over the constant factors so that the product stays linear arithmetic for the solver, and
// so that nothing is computed from `factor` itself (it may be any value a decision carries).
template <class D>
typename D::Int times_small(const D& d, const typename D::Int& x, const typename D::Int& factor,
                            int max_factor, int offset = 0) {
  typename D::Int acc = d.k(0);
  for (int f = 1; f <= max_factor; ++f) acc = d.ite(factor == d.k(f + offset), x * d.k(f), acc);
  return acc;
}

}  // namespace orrery::spec
