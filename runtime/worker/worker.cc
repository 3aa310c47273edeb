#include "runtime/worker/worker.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/proxy/collective.h"
#include "spec/limits.h"

namespace orrery::runtime {
namespace {

Result<long long> env_int(const char* name, bool required, long long dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) return Status::Error(std::string(name) + " is not set");
    return dflt;
  }
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0') return Status::Error(std::string(name) + "=" + v + " is not an integer");
  return x;
}

}  // namespace

Result<WorkerEnv> worker_env_from_environment() {
  WorkerEnv e;
  const char* p = std::getenv("ORRERY_PROXY");
  if (p == nullptr || *p == '\0') return Status::Error("ORRERY_PROXY is not set");
  e.proxy = p;
  const char* c = std::getenv("ORRERY_COLLECTIVE");
  if (c == nullptr || *c == '\0') return Status::Error("ORRERY_COLLECTIVE is not set");
  e.collective = c;
  auto job = env_int("ORRERY_JOB", true, 0);
  auto epoch = env_int("ORRERY_EPOCH", true, 0);
  auto rank = env_int("ORRERY_RANK", true, 0);
  auto world = env_int("ORRERY_WORLD", true, 0);
  auto restore = env_int("ORRERY_RESTORE_STEP", false, -1);
  for (auto* r : {&job, &epoch, &rank, &world, &restore}) {
    if (!r->ok()) return r->status();
  }
  // The proxy refuses a hello from a larger world: say so here, before any int conversion.
  if (*world < 1 || *world > spec::kMaxRunWorld) {
    return Status::Error("ORRERY_WORLD must be in 1.." + std::to_string(spec::kMaxRunWorld));
  }
  e.job = static_cast<int>(*job);
  e.epoch = *epoch;
  e.rank = static_cast<int>(*rank);
  e.world = static_cast<int>(*world);
  e.restore_step = *restore;
  if (e.world <= 0 || e.rank < 0 || e.rank >= e.world) {
    return Status::Error("ORRERY_RANK/ORRERY_WORLD out of range");
  }
  if (const char* s = std::getenv("ORRERY_SPLICE"); s != nullptr && *s != '\0') {
    std::stringstream ss(s);
    for (std::string part; std::getline(ss, part, ',');) {
      if (!part.empty()) e.splice.push_back(std::atoi(part.c_str()));
    }
  }
  return e;
}

Result<std::unique_ptr<Worker>> Worker::connect_from_env() {
  auto e = worker_env_from_environment();
  if (!e) return e.status();
  return connect(*e);
}

Result<std::unique_ptr<Worker>> Worker::connect(const WorkerEnv& env) {
  std::unique_ptr<Worker> w(new Worker());
  w->env_ = env;
  if (w->env_.splice.empty()) w->env_.splice = {env.rank};
  auto m = ShmMapping::open(env.proxy, sizeof(ProxySegment));
  if (!m) return Status::Error("cannot reach the proxy: " + m.reason());
  w->map_ = std::move(m.value());
  w->seg_ = static_cast<ProxySegment*>(w->map_.data());
  const ProxyHeader& h = w->seg_->header;
  if (h.magic != kProxyMagic || h.version != kProxyVersion ||
      h.ready.load(std::memory_order_acquire) != 1) {
    return Status::Error(env.proxy + " is not a ready orrery proxy segment");
  }
  // Claim a slot: a free one first, else one whose previous worker is done.
  int slot = -1;
  for (auto want : {SlotState::kFree, SlotState::kClosed}) {
    for (int i = 0; i < kMaxWorkers && slot < 0; ++i) {
      std::uint32_t expected = static_cast<std::uint32_t>(want);
      if (w->seg_->slots[i].state.compare_exchange_strong(
              expected, static_cast<std::uint32_t>(SlotState::kClaimed))) {
        slot = i;
      }
    }
    if (slot >= 0) break;
  }
  if (slot < 0) return Status::Error("the proxy has no free worker slot");
  WorkerSlot& s = w->seg_->slots[slot];
  // Start from empty rings: drop a response a previous worker never read and a request it never
  // had answered (the proxy does not look at a slot it does not own until a new request comes).
  s.resp_tail.store(s.resp_head.load());
  s.req_head.store(s.req_tail.load());
  s.worker_sleeping.store(0);
  s.hello_done.store(0);
  s.result[0] = '\0';
  s.busy_ns.store(0);
  w->ring_ = std::make_unique<WorkerRing>(w->seg_, slot);

  std::string text = env.collective + "\n";
  for (std::size_t i = 0; i < w->env_.splice.size(); ++i) {
    text += (i ? "," : "") + std::to_string(w->env_.splice[i]);
  }
  if (text.size() + 1 > kDataBytes) return Status::Error("hello: names too long");
  std::memcpy(s.data, text.c_str(), text.size() + 1);
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kHello);
  r.a[0] = static_cast<std::uint64_t>(env.job);
  r.a[1] = static_cast<std::uint64_t>(env.epoch);
  r.a[2] = static_cast<std::uint64_t>(env.rank);
  r.a[3] = static_cast<std::uint64_t>(env.world);
  r.a[4] = static_cast<std::uint64_t>(env.restore_step);
  r.a[5] = static_cast<std::uint64_t>(::getpid());
  Response resp = w->call(r);
  if (resp.code != 0) {
    w->dead_ = true;
    return Status::Error(std::string("hello refused: ") + resp.error);
  }
  w->restored_ = resp.v[0] == 1;
  w->restored_states_ = resp.v[1];
  return w;
}

Worker::~Worker() {
  host_coll_.reset();
  if (ring_ && !dead_) {
    Request r;
    r.op = static_cast<std::uint32_t>(Op::kBye);
    call(r);
  }
}

void Worker::drain(std::uint32_t keep) {
  while (inflight_ > keep) {
    Response x = ring_->wait();
    --inflight_;
    if (x.code != 0 && launch_error_.empty()) launch_error_ = std::string("launch: ") + x.error;
    if (x.code == 2 || x.code < 0) {
      dead_ = true;
      inflight_ = 0;  // nothing more will be answered
    }
  }
}

Response Worker::call(Request& r) {
  drain(0);
  if (dead_) {
    Response d;
    d.code = 2;
    std::snprintf(d.error, sizeof d.error, "%s",
                  launch_error_.empty() ? "this worker's session was ended by the proxy"
                                        : launch_error_.c_str());
    return d;
  }
  if (!launch_error_.empty()) {  // an earlier asynchronous launch failed: report it here
    Response e;
    e.code = 1;
    std::snprintf(e.error, sizeof e.error, "%s", launch_error_.c_str());
    launch_error_.clear();
    return e;
  }
  Response resp = ring_->call(r);
  if (resp.code == 2 || resp.code < 0) dead_ = true;
  return resp;
}

Status Worker::status_of(const Response& r, const char* what) {
  if (r.code == 0) return Status::Ok();
  return Status::Error(std::string(what) + ": " + r.error);
}

Result<DevPtr> Worker::alloc(std::uint64_t bytes) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kAlloc);
  r.a[0] = bytes;
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string(resp.error));
  return resp.v[0];
}

Status Worker::free(DevPtr p) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kFree);
  r.a[0] = p;
  return status_of(call(r), "free");
}

// Up to a data area's worth through the ring; more through the bulk window, one request per
// window's worth (a round trip per MiB cost more than the copy on a busy machine).
Status Worker::copy_h2d(DevPtr dst, const void* src, std::uint64_t n) {
  const auto* c = static_cast<const unsigned char*>(src);
  const bool bulk = n > kDataBytes;
  if (bulk) {
    if (auto st = ensure_window(n); !st) return st;
  }
  const std::uint64_t piece = bulk ? window_.size() : kDataBytes;
  for (std::uint64_t off = 0; off < n; off += piece) {
    const std::uint64_t k = std::min<std::uint64_t>(piece, n - off);
    std::memcpy(bulk ? static_cast<unsigned char*>(window_.data()) : ring_->data(), c + off, k);
    Request r;
    r.op = static_cast<std::uint32_t>(bulk ? Op::kCopyH2DWindow : Op::kCopyH2D);
    r.a[0] = dst + off;
    r.a[1] = k;
    if (auto s = status_of(call(r), "copy_h2d"); !s) return s;
  }
  return Status::Ok();
}

Status Worker::copy_d2h(void* dst, DevPtr src, std::uint64_t n) {
  auto* c = static_cast<unsigned char*>(dst);
  const bool bulk = n > kDataBytes;
  if (bulk) {
    if (auto st = ensure_window(n); !st) return st;
  }
  const std::uint64_t piece = bulk ? window_.size() : kDataBytes;
  for (std::uint64_t off = 0; off < n; off += piece) {
    const std::uint64_t k = std::min<std::uint64_t>(piece, n - off);
    Request r;
    r.op = static_cast<std::uint32_t>(bulk ? Op::kCopyD2HWindow : Op::kCopyD2H);
    r.a[0] = src + off;
    r.a[1] = k;
    if (auto s = status_of(call(r), "copy_d2h"); !s) return s;
    std::memcpy(c + off, bulk ? static_cast<unsigned char*>(window_.data()) : ring_->data(), k);
  }
  return Status::Ok();
}

Status Worker::copy_d2d(DevPtr dst, DevPtr src, std::uint64_t n) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kCopyD2D);
  r.a[0] = dst;
  r.a[1] = src;
  r.a[2] = n;
  return status_of(call(r), "copy_d2d");
}

Status Worker::launch(std::string_view kernel, std::initializer_list<std::uint64_t> args) {
  if (kernel.size() >= sizeof(Request::name)) return Status::Error("kernel name too long");
  if (args.size() + 1 > static_cast<std::size_t>(kRingArgs)) return Status::Error("too many kernel arguments");
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kLaunch);
  std::memcpy(r.name, kernel.data(), kernel.size());
  r.a[0] = args.size();
  std::size_t i = 1;
  for (auto a : args) r.a[i++] = a;
  drain(kRingDepth - 2);  // room for this one and for a synchronous call behind it
  if (dead_) return status_of(call(r), "launch");  // the session is over: say why
  // An earlier launch's error stays pending for the next call that waits; this one is queued.
  ring_->submit(r);
  ++inflight_;
  return Status::Ok();
}

Status Worker::synchronize() {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kSync);
  return status_of(call(r), "synchronize");
}

Result<std::uint64_t> Worker::allreduce(DevPtr buf, std::uint64_t count, std::int64_t step) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kAllreduce);
  r.a[0] = buf;
  r.a[1] = count;
  r.a[2] = static_cast<std::uint64_t>(step);
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string("allreduce: ") + resp.error);
  last_flags_ = resp.v[0];
  return resp.v[0];
}

Status Worker::register_host_state(void* p, std::uint64_t n) {
  if (n > kDataBytes / 2) return Status::Error("host state larger than half the data area");
  states_.emplace_back(p, n);
  if (!restored_) return Status::Ok();
  const std::uint64_t idx = states_.size() - 1;
  if (idx >= restored_states_) return Status::Error("more host state registered than was checkpointed");
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kRestoredState);
  r.a[0] = idx;
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string("restored state: ") + resp.error);
  if (resp.v[0] != n) {
    return Status::Error("host state " + std::to_string(idx) + " has " + std::to_string(n) +
                         " bytes, the checkpoint " + std::to_string(resp.v[0]));
  }
  std::memcpy(p, ring_->data(), n);
  return Status::Ok();
}

Result<StepBoundary> Worker::step_boundary(std::int64_t steps_done) {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kStepBoundary);
  r.a[0] = static_cast<std::uint64_t>(steps_done);
  if ((last_flags_ & kFlagCheckpoint) != 0) {
    unsigned char* d = ring_->data();
    std::uint64_t off = states_.size() * 8;
    for (std::size_t i = 0; i < states_.size(); ++i) {
      const std::uint64_t n = states_[i].second;
      if (off + n > kDataBytes) return Status::Error("host state does not fit the data area");
      std::memcpy(d + i * 8, &n, 8);
      std::memcpy(d + off, states_[i].first, n);
      off += n;
    }
    r.a[1] = states_.size();
  }
  last_flags_ = 0;
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string("step boundary: ") + resp.error);
  StepBoundary b;
  b.checkpointed = (resp.v[0] & kFlagCheckpointed) != 0;
  b.stop = (resp.v[0] & kFlagStop) != 0;
  return b;
}

Status Worker::report(std::string_view text) {
  const std::size_t n = std::min<std::size_t>(text.size(), 159);
  std::memcpy(ring_->data(), text.data(), n);
  ring_->data()[n] = 0;
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kReport);
  return status_of(call(r), "report");
}

Status Worker::nop() {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kNop);
  return status_of(call(r), "nop");
}

Result<std::pair<std::uint64_t, std::uint64_t>> Worker::mem_info() {
  Request r;
  r.op = static_cast<std::uint32_t>(Op::kMemInfo);
  Response resp = call(r);
  if (resp.code != 0) return Status::Error(std::string("mem_info: ") + resp.error);
  return std::make_pair(resp.v[0], resp.v[1]);
}

}  // namespace orrery::runtime
