#include "rpc/client_connection.h"

#include "rpc/connection.h"
#include "rpc/convert.h"
#include "rpc/wire_status.h"

namespace orrery::rpc {

namespace {

class EventSinkImpl final : public wire::EventSink::Server {
 public:
  EventSinkImpl(const std::function<bool(const service::ClusterEvent&)>& on_event,
                kj::Own<kj::PromiseFulfiller<void>> stop, std::string* error)
      : on_event_(on_event), stop_(kj::mv(stop)), error_(error) {}
  // Dropped while the watch runs: the core ended it, or the connection went (then the sink goes
  // before the disconnect is seen). Said as unavailable rather than KJ's "PromiseFulfiller was
  // destroyed without fulfilling the promise".
  ~EventSinkImpl() noexcept(false) {
    if (stop_->isWaiting()) stop_->reject(exception_of(Status::Unavailable("the core ended the watch")));
  }
  kj::Promise<void> push(PushContext ctx) override {
    bool more = false;
    auto e = event_from_wire(ctx.getParams().getEvent());
    if (!e) *error_ = "bad event from the core: " + e.reason();
    else more = on_event_(*e);
    ctx.getResults().setMore(more);
    if (!more) stop_->fulfill();
    return kj::READY_NOW;
  }

 private:
  std::function<bool(const service::ClusterEvent&)> on_event_;
  kj::Own<kj::PromiseFulfiller<void>> stop_;
  std::string* error_;
};

class RpcClientApi final : public service::ClientApi {
 public:
  RpcClientApi(std::unique_ptr<Connection> c, wire::ClientApi::Client api)
      : c_(std::move(c)), api_(kj::mv(api)) {}
  ~RpcClientApi() noexcept override {}

  Result<int> submit(const service::JobSpec& spec) override {
    int id = -1;
    auto st = call([&] {
      auto req = api_.submitRequest();
      job_spec_to_wire(spec, req.initSpec());
      id = wait_call(*c_, req.send()).getJob();
    });
    if (!st) return st;
    return id;
  }
  Status cancel(int job) override {
    return call([&] {
      auto req = api_.cancelRequest();
      req.setJob(job);
      wait_call(*c_, req.send());
    });
  }
  Status suspend(int job) override {
    return call([&] {
      auto req = api_.suspendRequest();
      req.setJob(job);
      wait_call(*c_, req.send());
    });
  }
  Status resume(int job) override {
    return call([&] {
      auto req = api_.resumeRequest();
      req.setJob(job);
      wait_call(*c_, req.send());
    });
  }
  Result<std::vector<service::JobStatus>> jobs() override {
    std::vector<service::JobStatus> out;
    std::string bad;
    auto st = call([&] {
      auto resp = wait_call(*c_, api_.jobsRequest().send());
      for (auto j : resp.getJobs()) {
        auto s = job_status_from_wire(j);
        if (!s) bad = s.reason();
        else out.push_back(*s);
      }
    });
    if (!st) return st;
    if (!bad.empty()) return Status::Internal("bad job status from the core: " + bad);
    return out;
  }
  Result<std::vector<service::NodeStatus>> nodes() override {
    std::vector<service::NodeStatus> out;
    std::string bad;
    auto st = call([&] {
      auto resp = wait_call(*c_, api_.nodesRequest().send());
      for (auto n : resp.getNodes()) {
        auto s = node_status_from_wire(n);
        if (!s) bad = s.reason();
        else out.push_back(*s);
      }
    });
    if (!st) return st;
    if (!bad.empty()) return Status::Internal("bad node status from the core: " + bad);
    return out;
  }
  Status preempt(int job, int beneficiary) override {
    return call([&] {
      auto req = api_.preemptRequest();
      req.setJob(job);
      req.setBeneficiary(beneficiary);
      wait_call(*c_, req.send());
    });
  }
  Status migrate(int job, std::optional<std::string> to_node) override {
    return call([&] {
      auto req = api_.migrateRequest();
      req.setJob(job);
      req.setToNode(to_node.value_or(""));
      wait_call(*c_, req.send());
    });
  }
  Status resize(int job, int devices, int beneficiary) override {
    return call([&] {
      auto req = api_.resizeRequest();
      req.setJob(job);
      req.setDevices(devices);
      req.setBeneficiary(beneficiary);
      wait_call(*c_, req.send());
    });
  }
  Status drain(const std::string& node) override {
    return call([&] {
      auto req = api_.drainRequest();
      req.setNode(node);
      wait_call(*c_, req.send());
    });
  }
  Status undrain(const std::string& node) override {
    return call([&] {
      auto req = api_.undrainRequest();
      req.setNode(node);
      wait_call(*c_, req.send());
    });
  }
  Status watch(std::uint64_t after_seq,
               const std::function<bool(const service::ClusterEvent&)>& on_event) override {
    std::string error;
    auto st = call([&] {
      auto paf = kj::newPromiseAndFulfiller<void>();
      auto req = api_.watchRequest();
      req.setAfterSeq(after_seq);
      req.setSink(kj::heap<EventSinkImpl>(on_event, kj::mv(paf.fulfiller), &error));
      auto resp = wait_call(*c_, req.send());
      auto handle = resp.getHandle();
      kj::mv(paf.promise)
          .exclusiveJoin(c_->disconnected.addBranch())
          .exclusiveJoin(heartbeat())
          .wait(c_->io.waitScope);
    });
    // Runs what is already queued: a lost connection shows here when the sink went first.
    if (!st.ok() && !c_->lost) c_->io.waitScope.poll();
    if (c_->lost) return Status::Unavailable("connection to " + c_->address + " lost");
    // A failure without a code here is KJ's own ("PromiseFulfiller was destroyed without fulfilling
    // the promise" when the sink went unseen): the watch broke with its connection, not a refusal.
    if (st.code() == StatusCode::kUnknown)
      return Status::Unavailable("the watch on " + c_->address + " ended: " + st.reason());
    if (!st) return st;
    if (!error.empty()) return Status::Internal(error);
    return Status::Ok();
  }
  Result<std::vector<std::string>> logs(int job, int max_lines) override {
    std::vector<std::string> out;
    auto st = call([&] {
      auto req = api_.logsRequest();
      req.setJob(job);
      req.setMaxLines(max_lines);
      auto resp = wait_call(*c_, req.send());
      for (auto l : resp.getLines()) out.emplace_back(l.cStr(), l.size());
    });
    if (!st) return st;
    return out;
  }
  Result<service::WorkerOutput> output(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes) override {
    service::WorkerOutput out;
    auto st = call([&] {
      auto req = api_.outputRequest();
      req.setJob(job);
      req.setRank(rank);
      req.setOffset(offset);
      req.setMaxBytes(max_bytes);
      auto resp = wait_call(*c_, req.send());
      auto w = resp.getOutput();
      auto data = w.getData();
      out.data.assign(reinterpret_cast<const char*>(data.begin()), data.size());
      out.next_offset = w.getNextOffset();
      out.size = w.getSize();
      out.job_ended = w.getJobEnded();
    });
    if (!st) return st;
    return out;
  }

 private:
  // While a watch waits for events, which may be minutes apart: a cheap call (the node list) every
  // kWatchHeartbeatMs under the call deadline. A core that was killed closes the connection, which
  // the watch sees at once; this is for a core that stopped answering without closing it (its host
  // gone, the process stopped): that ends the watch too, with kDeadlineExceeded. No timeout: no
  // heartbeat.
  kj::Promise<void> heartbeat() {
    if (c_->timeout_ms <= 0) return kj::NEVER_DONE;
    return c_->io.provider->getTimer().afterDelay(kWatchHeartbeatMs * kj::MILLISECONDS).then([this] {
      return by_deadline(*c_, api_.nodesRequest().send().ignoreResult(), call_deadline(*c_)).then([this] {
        return heartbeat();
      });
    });
  }

  // Runs one request; the core's refusal comes back with its code (rpc/wire_status.h).
  template <class F>
  Status call(F&& f) {
    if (c_->lost) return Status::Unavailable("connection to " + c_->address + " lost");
    KJ_IF_MAYBE(e, kj::runCatchingExceptions(f)) { return call_failed(*c_, *e); }
    return Status::Ok();
  }
  std::unique_ptr<Connection> c_;
  wire::ClientApi::Client api_;
};

}  // namespace

Result<std::unique_ptr<service::ClientApi>> connect_client(const std::string& address,
                                                           const std::string& secret,
                                                           std::int64_t timeout_ms) {
  auto c = connect_to(address, timeout_ms);
  if (!c) return c.status();
  auto& conn = **c;
  kj::Maybe<wire::ClientApi::Client> api;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    KJ_IF_MAYBE(b, conn.bootstrap) {
      auto req = b->loginClientRequest();
      req.setSecret(secret);
      api = by_deadline(conn, req.send(), conn.connect_by).wait(conn.io.waitScope).getApi();
    }
  })) {
    auto st = status_of(*e);  // a wrong secret is kPermissionDenied
    if (st.code() == StatusCode::kDeadlineExceeded) return st;  // names the address already
    return st.with_reason(address + ": " + st.reason());
  }
  KJ_IF_MAYBE(a, api) {
    return std::unique_ptr<service::ClientApi>(new RpcClientApi(std::move(*c), kj::mv(*a)));
  }
  return Status::Internal(address + ": login gave no client API");
}

}  // namespace orrery::rpc
