// The simulator's pending events (runtime/sim/simulator.cc), earliest first; events at the same
// simulated millisecond in the order they were pushed. Plus the timers of running jobs (their next
// finish and periodic checkpoint), which move often and must not leave an event behind each time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orrery::sim {

// kStarted and kCutDone are the runtime's answers to the protocol's launch and cut commands
// (their `ver` is the incarnation's epoch); kFinish and kCheckpoint are a running job's own.
enum class Ev : std::uint8_t { kArrive, kFinish, kCutDone, kStarted, kCheckpoint, kFail, kRepair, kRound, kScript };

// 24 bytes (the kind rides in the low byte of the order): the heap is a run's hottest memory.
struct Event {
  std::int64_t t;
  std::uint64_t order;  // seq << 8 | kind: events at the same t in the order they were pushed
  std::int32_t a;       // workload index, job or node
  std::uint32_t ver;    // the job's version when scheduled: stale events are dropped
  Event(std::int64_t t_ms, std::uint64_t seq, Ev kind, std::int32_t a_, std::uint32_t ver_)
      : t(t_ms), order(seq << 8 | static_cast<std::uint8_t>(kind)), a(a_), ver(ver_) {}
  std::uint64_t seq() const { return order >> 8; }
  Ev kind() const { return static_cast<Ev>(order & 0xff); }
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
};

// A running job's next finish (or periodic checkpoint): the event it would be, (t, seq) in the
// queue's order and the job's version then. Every periodic checkpoint, resize or pause moves a
// job's finish, and each move used to leave its old event in the queue until its time: the queue
// held one stale event per checkpoint of every running job (millions on a 1M-job run), and its
// pops were the simulator's largest cost. Now a job keeps at most one entry per timer in the queue
// ahead of the event it stands for (`wake_seq`): a move to a later time pushes nothing (the entry
// still in the queue wakes the job first and pushes the event then, with the seq it was given
// when it was set), a move to an earlier time pushes the event. Events keep their (t, seq), so
// a run handles them in exactly the order it would have.
struct JobTimer {
  static constexpr std::uint64_t kNone = UINT64_MAX;
  std::int64_t t = 0;
  std::uint64_t seq = kNone;       // kNone: not set
  std::uint64_t wake_seq = kNone;  // the job's earliest queue entry for this timer (kNone: none)
  std::int64_t wake_t = 0;
  std::uint32_t ver = 0;
};

class EventQueue {
 public:
  bool empty() const { return v_.empty(); }
  // Takes out the earliest event.
  Event pop() {
    const Event top = v_.front();
    const Event last = v_.back();
    v_.pop_back();
    if (!v_.empty()) sift_down(last);
    return top;
  }
  // A new event, after every event pushed before it at the same t.
  void push(std::int64_t t, Ev kind, int a, std::uint32_t ver) { insert(Event{t, seq_++, kind, a, ver}); }

  // Sets `timer` of job `job` (at version `ver`) to the event (t, the next seq).
  void arm(JobTimer& timer, Ev kind, int job, std::uint32_t ver, std::int64_t t) {
    timer.t = t;
    timer.seq = seq_++;
    timer.ver = ver;
    if (timer.wake_seq == JobTimer::kNone || t < timer.wake_t) {
      insert(Event{t, timer.seq, kind, job, 0});
      timer.wake_seq = timer.seq;
      timer.wake_t = t;
    }
  }
  // A popped entry of `timer` (its job now at version `ver_now`): true if it is the event the
  // timer is set to and the job has not moved on since (handle it now); else it was ahead of that
  // event, which goes into the queue if no other entry stands for it.
  bool fire(const Event& e, JobTimer& timer, std::uint32_t ver_now) {
    if (e.seq() == timer.wake_seq) timer.wake_seq = JobTimer::kNone;
    if (timer.seq == JobTimer::kNone) return false;
    if (timer.ver != ver_now) {  // superseded
      timer.seq = JobTimer::kNone;
      return false;
    }
    if (e.seq() == timer.seq) {
      timer.seq = JobTimer::kNone;
      return true;
    }
    if (timer.wake_seq == JobTimer::kNone) {
      insert(Event{timer.t, timer.seq, e.kind(), e.a, 0});
      timer.wake_seq = timer.seq;
      timer.wake_t = timer.t;
    }
    return false;
  }

 private:
  // A 4-ary heap, half as deep as a binary one, its children a cache line apart at most. Keys are
  // unique (the order carries a unique seq), so events pop in exactly the order
  // std::priority_queue would pop them.
  void insert(const Event& e) {
    std::size_t i = v_.size();
    v_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!(v_[parent] > e)) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }
  // Puts `e` at the root's place and sifts it down.
  void sift_down(const Event& e) {
    const std::size_t n = v_.size();
    std::size_t i = 0;
    while (true) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < std::min(first + 4, n); ++c)
        if (v_[best] > v_[c]) best = c;
      if (!(e > v_[best])) break;
      v_[i] = v_[best];
      i = best;
    }
    v_[i] = e;
  }

  std::vector<Event> v_;
  std::uint64_t seq_ = 0;
};

}  // namespace orrery::sim
