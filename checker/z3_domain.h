// The spec's value domain on Z3 terms: the same guard, effect and invariant templates the core
// evaluates on integers become formulas here (see spec/domain.h for the interface). A device set
// is a membership mask over every device of the (bounded) shape, so `members` visits every device
// with its membership bit; node sums are dense, one term per node.
#pragma once

#include <cstdint>
#include <vector>

#include <z3++.h>

namespace orrery::checker {

struct Z3Domain {
  using Int = z3::expr;
  using Bool = z3::expr;
  using DevSet = std::vector<z3::expr>;  // [device] -> Bool

  z3::context* ctx;

  Int k(std::int64_t v) const { return ctx->int_val(static_cast<int64_t>(v)); }
  Bool b(bool v) const { return ctx->bool_val(v); }
  Int ite(const Bool& c, const Int& a, const Int& b) const { return z3::ite(c, a, b); }
  Bool implies(const Bool& a, const Bool& b) const { return z3::implies(a, b); }
  Int mod(const Int& x, int f) const { return z3::mod(x, ctx->int_val(f)); }
  // Z3's integer division is floor division for positive divisors, as Concrete::div.
  Int div(const Int& x, int f) const { return x / ctx->int_val(f); }
  template <class F>
  auto select(int n, const Int& idx, F f, decltype(f(0)) dflt) const {
    auto r = dflt;
    for (int i = n - 1; i >= 0; --i) r = z3::ite(idx == k(i), f(i), r);
    return r;
  }

  template <class F>
  void members(const DevSet& s, F&& f) const {
    for (int dev = 0; dev < static_cast<int>(s.size()); ++dev) f(dev, s[dev]);
  }
  Int size(const DevSet& s) const {
    Int n = k(0);
    for (const auto& in : s) n = n + z3::ite(in, k(1), k(0));
    return n;
  }
  Bool contains(const DevSet& s, int dev) const { return s[dev]; }
  DevSet no_devices(int m) const { return DevSet(static_cast<std::size_t>(m), b(false)); }

  class NodeSums {
   public:
    NodeSums(const Z3Domain& d, int nodes)
        : devices_(static_cast<std::size_t>(nodes), d.k(0)),
          mem_(static_cast<std::size_t>(nodes), d.k(0)) {}
    void add(int node, const Int& devices, const Int& mem) {
      devices_[node] = devices_[node] + devices;
      mem_[node] = mem_[node] + mem;
    }
    template <class F>
    void for_each(F&& f) {
      for (int n = 0; n < static_cast<int>(devices_.size()); ++n) f(n, devices_[n], mem_[n]);
    }

   private:
    std::vector<z3::expr> devices_, mem_;
  };
  NodeSums node_sums(int nodes) const { return NodeSums(*this, nodes); }
};

}  // namespace orrery::checker
