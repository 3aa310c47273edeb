// The spec's value domain on Z3 terms: the same guard, effect and invariant templates the core
// evaluates on integers become formulas here (see spec/domain.h for the interface).
#pragma once

#include <cstdint>

#include <z3++.h>

namespace orrery::checker {

struct Z3Domain {
  using Int = z3::expr;
  using Bool = z3::expr;

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
};

}  // namespace orrery::checker
