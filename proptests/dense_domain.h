// A dense concrete value domain: the checker's domain (checker/z3_domain.h) on plain values.
//
// The core evaluates the spec with spec::Concrete, whose device sets are sorted member lists
// (`members` visits only the members) and whose node sums visit only the nodes something was added
// to. The checker proves the same formulas with device sets as a membership bit per device
// (`members` visits every device, `in` saying whether it is one) and node sums over every node.
// The proof is about the running code only if the two readings of each formula agree: a formula
// that does not guard what it does with `in`, or that depends on which nodes a sum visits, means
// one thing to the core and another to the checker. This domain is the checker's reading with
// int64/bool instead of solver terms, so domain_equivalence_proptest can compare the two on the
// same values. Integer operations are delegated to spec::Concrete: arithmetic is not what differs.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/domain.h"

namespace orrery::proptest {

struct DenseDomain {
  using Int = spec::Concrete::Int;
  using Bool = spec::Concrete::Bool;
  // [device] -> membership (char, not bool: std::vector<bool> hands out proxies, not Bool&).
  using DevSet = std::vector<char>;

  Int k(std::int64_t v) const { return c_.k(v); }
  Bool b(bool v) const { return c_.b(v); }
  Int ite(Bool c, Int a, Int b) const { return c_.ite(c, a, b); }
  Bool implies(Bool a, Bool b) const { return c_.implies(a, b); }
  Int mod(Int x, int f) const { return c_.mod(x, f); }
  Int div(Int x, int f) const { return c_.div(x, f); }
  // As Z3Domain::select, which builds ite(idx == i, f(i), ...) over every i: f is evaluated for
  // every index, and the value for the one idx equals (if any) is chosen, else dflt.
  template <class F>
  auto select(int n, Int idx, F f, decltype(f(0)) dflt) const {
    auto r = dflt;
    for (int i = n - 1; i >= 0; --i) {
      auto v = f(i);
      if (idx == i) r = v;
    }
    return r;
  }

  template <class F>
  void members(const DevSet& s, F&& f) const {
    for (int dev = 0; dev < static_cast<int>(s.size()); ++dev) f(dev, Bool{s[dev] != 0});
  }
  Int size(const DevSet& s) const {
    Int n = 0;
    for (char in : s) n += in != 0 ? 1 : 0;
    return n;
  }
  Bool contains(const DevSet& s, int dev) const { return s[static_cast<std::size_t>(dev)] != 0; }
  DevSet no_devices(int m) const { return DevSet(static_cast<std::size_t>(m), 0); }

  // One sum per node, every node visited in for_each (zeros included).
  class NodeSums {
   public:
    explicit NodeSums(int nodes)
        : devices_(static_cast<std::size_t>(nodes), 0), mem_(static_cast<std::size_t>(nodes), 0) {}
    void add(int node, Int devices, Int mem) {
      devices_[static_cast<std::size_t>(node)] += devices;
      mem_[static_cast<std::size_t>(node)] += mem;
    }
    template <class F>
    void for_each(F&& f) {
      for (int n = 0; n < static_cast<int>(devices_.size()); ++n)
        f(n, devices_[static_cast<std::size_t>(n)], mem_[static_cast<std::size_t>(n)]);
    }

   private:
    std::vector<Int> devices_, mem_;
  };
  NodeSums node_sums(int nodes) const { return NodeSums(nodes); }

 private:
  spec::Concrete c_;
};

}  // namespace orrery::proptest
