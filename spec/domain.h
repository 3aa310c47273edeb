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
// Formulas use C++ operators (+ - == < && || !) on these types, which both domains provide, so
// the very same template text is evaluated by the core and proved by the checker.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace orrery::spec {

struct Concrete {
  using Int = std::int64_t;
  using Bool = bool;

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
