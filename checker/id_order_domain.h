// A third value domain for the spec's templates (besides spec::Concrete and checker/z3_domain.h):
// concrete integers that also record how each value is *used*, so that orrery-check can show that
// no guard, effect or invariant orders job ids (the ORDER obligation, checker/id_order.h).
//
// Why: the inductive proof fixes the acting job at index 0, and the bounded model check explores
// only runs that submit jobs in slot order. Both are sound only if job slots are interchangeable:
// a formula may test job ids for equality (and select a job by its id), never compare them with
// <, <=, >, >= or compute with them (+, -, *, mod, div), which would make job 0 special.
//
// How: every Int carries a *class* in a union-find (IdOrderLog). `a == b`, `a != b` and
// `ite(c, a, b)` put their operands in one class (they are values of one kind); `select(n, idx,
// ...)` over the job slots puts `idx` in the class of job ids, and so do the per-device owner and
// reservation, a job's beneficiary and a decision's beneficiary when the checker builds a state
// (and, after an effect, what it wrote there). Ordering and arithmetic mark their operands'
// classes; arithmetic also puts its operands and its result in one class. A formula orders job
// ids when the class of job ids ends up marked: so a literal `d.k(j)` that is compared with an
// owner and, elsewhere, with `<`, is caught as well as an owner compared with `<=` directly, and so
// is `d.k(j) + d.k(1)` written into a beneficiary. Each d.k() is a class of its own, so two
// unrelated uses of the same number are never confused. What stays unseen is an index literal
// ordered without ever meeting an id (`d.k(i) < d.k(j)`, the same as `i < j` in plain C++).
//
// Evaluation follows the symbolic domain's shape, not the concrete one's: `select` calls f for
// every job, `members` visits every device with its membership bit, and Bool is a class whose &&
// and || evaluate both sides. So every operation the Z3 domain turns into a formula is evaluated
// here whatever the values: the check sees exactly the terms the proof reasons about.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace orrery::checker {

// The union-find of one evaluation. Class 0 is the class of job ids.
class IdOrderLog {
 public:
  IdOrderLog() { fresh(); }

  int fresh() {
    parent_.push_back(static_cast<int>(parent_.size()));
    ordered_.push_back(nullptr);
    return static_cast<int>(parent_.size()) - 1;
  }
  int find(int c) {
    while (parent_[c] != c) c = parent_[c] = parent_[parent_[c]];
    return c;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (b == 0) std::swap(a, b);  // keep 0 the root of the job ids' class
    parent_[b] = a;
    if (!ordered_[a]) ordered_[a] = ordered_[b];
  }
  void mark_id(int c) { unite(0, c); }
  // `op` is a string literal naming the operation ("<=", "+", ...).
  void mark_ordered(int c, const char* op) {
    c = find(c);
    if (!ordered_[c]) ordered_[c] = op;
  }
  // The operation that orders or computes with a job id, or nullptr when none does.
  const char* violation() { return ordered_[find(0)]; }

 private:
  std::vector<int> parent_;
  std::vector<const char*> ordered_;  // per class root: the first ordering or arithmetic op
};

struct OrdBool {
  bool v = false;
};
inline OrdBool operator&&(OrdBool a, OrdBool b) { return {a.v && b.v}; }  // both evaluated
inline OrdBool operator||(OrdBool a, OrdBool b) { return {a.v || b.v}; }
inline OrdBool operator!(OrdBool a) { return {!a.v}; }
inline OrdBool operator==(OrdBool a, OrdBool b) { return {a.v == b.v}; }
inline OrdBool operator!=(OrdBool a, OrdBool b) { return {a.v != b.v}; }

struct OrdInt {
  std::int64_t v = 0;
  int cls = 0;
  IdOrderLog* log = nullptr;
};

namespace id_order_detail {
inline IdOrderLog* log_of(const OrdInt& a, const OrdInt& b) { return a.log ? a.log : b.log; }
inline OrdBool order(const OrdInt& a, const OrdInt& b, const char* op, bool r) {
  auto* log = log_of(a, b);
  log->mark_ordered(a.cls, op);
  log->mark_ordered(b.cls, op);
  return {r};
}
// The result is of the operands' class: a sum that ends up where an id belongs (an owner, a
// beneficiary) makes its operands ids, and they took part in arithmetic.
inline OrdInt arith(const OrdInt& a, const OrdInt& b, const char* op, std::int64_t r) {
  auto* log = log_of(a, b);
  log->unite(a.cls, b.cls);
  log->mark_ordered(a.cls, op);
  return {r, a.cls, log};
}
// Wrapping arithmetic: the values do not matter to the check, only the classes, and the
// evaluation must not be undefined whatever a state holds.
inline std::int64_t wrap(std::uint64_t x) { return static_cast<std::int64_t>(x); }
}  // namespace id_order_detail

inline OrdBool operator==(const OrdInt& a, const OrdInt& b) {
  id_order_detail::log_of(a, b)->unite(a.cls, b.cls);
  return {a.v == b.v};
}
inline OrdBool operator!=(const OrdInt& a, const OrdInt& b) {
  id_order_detail::log_of(a, b)->unite(a.cls, b.cls);
  return {a.v != b.v};
}
inline OrdBool operator<(const OrdInt& a, const OrdInt& b) {
  return id_order_detail::order(a, b, "<", a.v < b.v);
}
inline OrdBool operator<=(const OrdInt& a, const OrdInt& b) {
  return id_order_detail::order(a, b, "<=", a.v <= b.v);
}
inline OrdBool operator>(const OrdInt& a, const OrdInt& b) {
  return id_order_detail::order(a, b, ">", a.v > b.v);
}
inline OrdBool operator>=(const OrdInt& a, const OrdInt& b) {
  return id_order_detail::order(a, b, ">=", a.v >= b.v);
}
inline OrdInt operator+(const OrdInt& a, const OrdInt& b) {
  using id_order_detail::wrap;
  return id_order_detail::arith(a, b, "+",
                                wrap(static_cast<std::uint64_t>(a.v) + static_cast<std::uint64_t>(b.v)));
}
inline OrdInt operator-(const OrdInt& a, const OrdInt& b) {
  using id_order_detail::wrap;
  return id_order_detail::arith(a, b, "-",
                                wrap(static_cast<std::uint64_t>(a.v) - static_cast<std::uint64_t>(b.v)));
}
inline OrdInt operator*(const OrdInt& a, const OrdInt& b) {
  using id_order_detail::wrap;
  return id_order_detail::arith(a, b, "*",
                                wrap(static_cast<std::uint64_t>(a.v) * static_cast<std::uint64_t>(b.v)));
}
inline OrdInt operator-(const OrdInt& a) {
  a.log->mark_ordered(a.cls, "unary -");
  return {id_order_detail::wrap(0 - static_cast<std::uint64_t>(a.v)), a.cls, a.log};
}

struct IdOrderDomain {
  using Int = OrdInt;
  using Bool = OrdBool;
  using DevSet = std::vector<OrdBool>;  // [device] -> membership, as in the symbolic domain

  IdOrderLog* log;
  int jobs;  // the number of job slots: `select` over them takes a job id

  Int k(std::int64_t v) const { return {v, log->fresh(), log}; }
  Bool b(bool v) const { return {v}; }
  Int ite(const Bool& c, const Int& a, const Int& b) const {
    log->unite(a.cls, b.cls);
    return c.v ? a : b;
  }
  Bool implies(const Bool& a, const Bool& b) const { return {!a.v || b.v}; }
  Int mod(const Int& x, int f) const {
    log->mark_ordered(x.cls, "mod");
    return {((x.v % f) + f) % f, x.cls, log};
  }
  Int div(const Int& x, int f) const {
    log->mark_ordered(x.cls, "div");
    return {x.v / f - ((x.v % f != 0 && x.v < 0) ? 1 : 0), x.cls, log};
  }
  // f(i) for every i (as the symbolic domain builds its ite chain), the one equal to idx chosen.
  template <class F>
  auto select(int n, const Int& idx, F f, decltype(f(0)) dflt) const {
    if (n == jobs) log->mark_id(idx.cls);
    auto r = dflt;
    for (int i = n - 1; i >= 0; --i) {
      auto fi = f(i);
      if constexpr (std::is_same_v<decltype(fi), Int>) log->unite(fi.cls, dflt.cls);
      if (idx.v == i) r = fi;
    }
    return r;
  }

  template <class F>
  void members(const DevSet& s, F&& f) const {
    for (int dev = 0; dev < static_cast<int>(s.size()); ++dev) f(dev, s[dev]);
  }
  Int size(const DevSet& s) const {
    std::int64_t n = 0;
    for (const auto& in : s) n += in.v ? 1 : 0;
    return k(n);
  }
  Bool contains(const DevSet& s, int dev) const { return s[dev]; }
  DevSet no_devices(int m) const { return DevSet(static_cast<std::size_t>(m), b(false)); }

  class NodeSums {
   public:
    NodeSums(const IdOrderDomain& d, int nodes) {
      for (int n = 0; n < nodes; ++n) {
        devices_.push_back(d.k(0));
        mem_.push_back(d.k(0));
      }
    }
    void add(int node, const Int& devices, const Int& mem) {
      devices_[node] = devices_[node] + devices;
      mem_[node] = mem_[node] + mem;
    }
    template <class F>
    void for_each(F&& f) {
      for (int n = 0; n < static_cast<int>(devices_.size()); ++n) f(n, devices_[n], mem_[n]);
    }

   private:
    std::vector<Int> devices_, mem_;
  };
  NodeSums node_sums(int nodes) const { return NodeSums(*this, nodes); }
};

}  // namespace orrery::checker
