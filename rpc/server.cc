#include "rpc/server.h"

#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/compat/http.h>

#include "core/fleet.h"
#include "core/policy/type_speed.h"
#include "rpc/connection.h"
#include "rpc/convert.h"
#include "rpc/secret.h"
#include "rpc/wire_status.h"

namespace orrery::rpc {

namespace {

using service::Service;

// A refused request: the exception carries the status's code and reason (rpc/wire_status.h).
kj::Exception refuse(const Status& st) { return exception_of(st); }

// --- client API --------------------------------------------------------------------------------

class WatchHandle final : public wire::Watch::Server {
 public:
  explicit WatchHandle(std::shared_ptr<bool> alive) : alive_(std::move(alive)) {}
  ~WatchHandle() noexcept(false) { *alive_ = false; }

 private:
  std::shared_ptr<bool> alive_;
};

// Pushes a watcher's events one at a time (the next push waits for the previous answer).
struct WatchPump : std::enable_shared_from_this<WatchPump> {
  wire::EventSink::Client sink;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::deque<service::ClusterEvent> queue;
  bool in_flight = false;
  explicit WatchPump(wire::EventSink::Client s) : sink(std::move(s)) {}

  void pump() {
    if (in_flight || queue.empty() || !*alive) return;
    in_flight = true;
    auto req = sink.pushRequest();
    event_to_wire(queue.front(), req.initEvent());
    queue.pop_front();
    auto self = shared_from_this();
    req.send()
        .then(
            [self](capnp::Response<wire::EventSink::PushResults>&& r) {
              self->in_flight = false;
              if (!r.getMore()) *self->alive = false;
              self->pump();
            },
            [self](kj::Exception&& e) {
              // The watcher is gone (it disconnected: the usual end of `orrery watch`) or its sink
              // failed; either way it gets no more events.
              self->in_flight = false;
              *self->alive = false;
              if (e.getType() != kj::Exception::Type::DISCONNECTED)
                std::cerr << "orrery-core: dropping a watcher: " << description_of(e) << "\n";
            })
        .detach([](kj::Exception&& e) {
          std::cerr << "orrery-core: watch event pump failed: " << description_of(e) << "\n";
        });
  }
};

class ClientApiImpl final : public wire::ClientApi::Server {
 public:
  explicit ClientApiImpl(Service& s) : s_(s) {}

  kj::Promise<void> submit(SubmitContext ctx) override {
    auto spec = job_spec_from_wire(ctx.getParams().getSpec());
    if (!spec) return refuse(spec.status());
    auto id = s_.submit(*spec);
    if (!id) return refuse(id.status());
    ctx.getResults().setJob(*id);
    return kj::READY_NOW;
  }
  kj::Promise<void> cancel(CancelContext ctx) override {
    return done(s_.cancel(ctx.getParams().getJob()));
  }
  kj::Promise<void> suspend(SuspendContext ctx) override {
    return done(s_.suspend(ctx.getParams().getJob()));
  }
  kj::Promise<void> resume(ResumeContext ctx) override {
    return done(s_.resume(ctx.getParams().getJob()));
  }
  kj::Promise<void> jobs(JobsContext ctx) override {
    auto jobs = s_.jobs();
    if (!jobs) return refuse(jobs.status());
    auto list = ctx.getResults().initJobs(static_cast<unsigned>(jobs->size()));
    for (unsigned i = 0; i < jobs->size(); ++i) job_status_to_wire((*jobs)[i], list[i]);
    return kj::READY_NOW;
  }
  kj::Promise<void> nodes(NodesContext ctx) override {
    auto nodes = s_.nodes();
    if (!nodes) return refuse(nodes.status());
    auto list = ctx.getResults().initNodes(static_cast<unsigned>(nodes->size()));
    for (unsigned i = 0; i < nodes->size(); ++i) node_status_to_wire((*nodes)[i], list[i]);
    return kj::READY_NOW;
  }
  kj::Promise<void> preempt(PreemptContext ctx) override {
    return done(s_.preempt(ctx.getParams().getJob(), ctx.getParams().getBeneficiary()));
  }
  kj::Promise<void> migrate(MigrateContext ctx) override {
    auto to = text_from_wire(ctx.getParams().getToNode(), "to_node");
    if (!to) return refuse(to.status());
    std::optional<std::string> target;
    if (!to->empty()) target = *to;
    return done(s_.migrate(ctx.getParams().getJob(), target));
  }
  kj::Promise<void> resize(ResizeContext ctx) override {
    auto p = ctx.getParams();
    return done(s_.resize(p.getJob(), p.getDevices(), p.getBeneficiary()));
  }
  kj::Promise<void> drain(DrainContext ctx) override {
    auto n = text_from_wire(ctx.getParams().getNode(), "node");
    if (!n) return refuse(n.status());
    return done(s_.drain(*n));
  }
  kj::Promise<void> undrain(UndrainContext ctx) override {
    auto n = text_from_wire(ctx.getParams().getNode(), "node");
    if (!n) return refuse(n.status());
    return done(s_.undrain(*n));
  }
  kj::Promise<void> watch(WatchContext ctx) override {
    auto pump = std::make_shared<WatchPump>(ctx.getParams().getSink());
    auto st = s_.watch(ctx.getParams().getAfterSeq(), [pump](const service::ClusterEvent& e) {
      if (!*pump->alive) return false;
      pump->queue.push_back(e);
      if (pump->queue.size() > 100000) {  // a watcher that stopped reading is dropped
        *pump->alive = false;
        return false;
      }
      pump->pump();
      return true;
    });
    if (!st) return refuse(st);
    ctx.getResults().setHandle(kj::heap<WatchHandle>(pump->alive));
    return kj::READY_NOW;
  }
  kj::Promise<void> logs(LogsContext ctx) override {
    auto lines = s_.logs(ctx.getParams().getJob(), ctx.getParams().getMaxLines());
    if (!lines) return refuse(lines.status());
    auto list = ctx.getResults().initLines(static_cast<unsigned>(lines->size()));
    for (unsigned i = 0; i < lines->size(); ++i) list.set(i, (*lines)[i]);
    return kj::READY_NOW;
  }
  kj::Promise<void> output(OutputContext ctx) override {
    auto p = ctx.getParams();
    auto o = s_.output(p.getJob(), p.getRank(), p.getOffset(), p.getMaxBytes());
    if (!o) return refuse(o.status());
    auto w = ctx.getResults().initOutput();
    w.setData(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(o->data.data()), o->data.size()));
    w.setNextOffset(o->next_offset);
    w.setSize(o->size);
    w.setJobEnded(o->job_ended);
    return kj::READY_NOW;
  }

 private:
  static kj::Promise<void> done(const Status& st) {
    if (!st) return refuse(st);
    return kj::READY_NOW;
  }
  Service& s_;
};

// --- node API ----------------------------------------------------------------------------------

class RpcNodeLink final : public service::NodeLink, public kj::TaskSet::ErrorHandler {
 public:
  RpcNodeLink(Service& s, wire::NodeAgent::Client agent) : s_(s), agent_(std::move(agent)), tasks_(*this) {}
  ~RpcNodeLink() noexcept override {}
  void set_session(service::NodeSession session) { session_ = session; }

  void launch(const service::LaunchCommand& cmd) override {
    auto req = agent_.launchRequest();
    launch_to_wire(cmd, req.initLaunch());
    track(req.send().ignoreResult(), cmd.job, cmd.epoch, "launch", true);
  }
  void checkpoint(int job, std::int64_t epoch, std::int64_t at_step, bool then_stop) override {
    auto req = agent_.checkpointRequest();
    req.setJob(job);
    req.setEpoch(epoch);
    req.setAtStep(at_step);
    req.setThenStop(then_stop);
    track(req.send().ignoreResult(), job, epoch, "checkpoint", true);
  }
  void stop(int job, std::int64_t epoch) override {
    auto req = agent_.stopRequest();
    req.setJob(job);
    req.setEpoch(epoch);
    track(req.send().ignoreResult(), job, epoch, "stop", false);
  }
  // Every tracked command has its own handler (track()); this sees only a handler's own failure.
  void taskFailed(kj::Exception&& e) override {
    std::cerr << "orrery-core: handling a node command's failure failed: " << description_of(e) << "\n";
  }

 private:
  void track(kj::Promise<void> p, int job, std::int64_t epoch, const char* what, bool fatal) {
    Service* s = &s_;
    auto session = session_;
    std::string w = what;
    tasks_.add(p.catch_([s, session, job, epoch, w, fatal](kj::Exception&& e) {
      std::string msg = w + " job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                        " failed: " + reason_of(e);
      if (fatal) s->command_failed(session, job, epoch, msg, w == "checkpoint");
      else std::cerr << "orrery-core: " << msg << "\n";
    }));
  }
  Service& s_;
  wire::NodeAgent::Client agent_;
  service::NodeSession session_;
  kj::TaskSet tasks_;
};

// Every chunk of a transfer counts as a heartbeat of its node: a large shard on a slow link must
// not make the node look lost.
class UploadSink final : public wire::ByteSink::Server {
 public:
  UploadSink(std::unique_ptr<service::ShardUpload> up, Service& s, service::NodeSession session)
      : up_(std::move(up)), s_(s), session_(session) {}
  kj::Promise<void> write(WriteContext ctx) override {
    (void)s_.heartbeat(session_);
    auto chunk = ctx.getParams().getChunk();
    auto st = up_->write(std::string_view(reinterpret_cast<const char*>(chunk.begin()), chunk.size()));
    if (!st) return refuse(st);
    return kj::READY_NOW;
  }
  kj::Promise<void> done(DoneContext) override {
    auto st = up_->finish();
    if (!st) return refuse(st);
    return kj::READY_NOW;
  }

 private:
  std::unique_ptr<service::ShardUpload> up_;
  Service& s_;
  service::NodeSession session_;
};

kj::Promise<void> stream_download(std::shared_ptr<service::ShardDownload> d, wire::ByteSink::Client sink,
                                  Service& s, service::NodeSession session) {
  (void)s.heartbeat(session);
  auto chunk = d->read(1 << 18);
  if (!chunk) return refuse(chunk.status());
  if (chunk->empty()) return sink.doneRequest().send().ignoreResult();
  auto req = sink.writeRequest();
  req.setChunk(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(chunk->data()), chunk->size()));
  return req.send().then([d, sink, &s, session]() mutable { return stream_download(d, sink, s, session); });
}

class NodeSessionImpl final : public wire::NodeSession::Server {
 public:
  NodeSessionImpl(Service& s, service::NodeSession session) : s_(s), session_(session) {}
  ~NodeSessionImpl() noexcept(false) { s_.disconnected(session_); }

  kj::Promise<void> heartbeat(HeartbeatContext ctx) override {
    auto st = s_.heartbeat(session_);
    if (!st) return refuse(st);
    ctx.getResults().setTimeoutMs(s_.heartbeat_timeout_ms());
    return kj::READY_NOW;
  }
  kj::Promise<void> report(ReportContext ctx) override {
    auto r = report_from_wire(ctx.getParams().getReport());
    if (!r) return refuse(r.status());
    auto st = s_.report(session_, *r);
    if (!st) return refuse(st);
    return kj::READY_NOW;
  }
  kj::Promise<void> uploadShard(UploadShardContext ctx) override {
    auto p = ctx.getParams();
    auto up = s_.upload_shard(session_, p.getJob(), p.getEpoch(), p.getStep(), p.getRank(), p.getSize(),
                              p.getCrc32c());
    if (!up) return refuse(up.status());
    ctx.getResults().setSink(kj::heap<UploadSink>(std::move(*up), s_, session_));
    return kj::READY_NOW;
  }
  kj::Promise<void> downloadShard(DownloadShardContext ctx) override {
    auto p = ctx.getParams();
    auto d = s_.download_shard(session_, p.getJob(), p.getStep(), p.getRank());
    if (!d) return refuse(d.status());
    std::shared_ptr<service::ShardDownload> dl(std::move(*d));
    return stream_download(dl, p.getSink(), s_, session_).then([dl, ctx]() mutable {
      ctx.getResults().setSize(dl->size());
      ctx.getResults().setCrc32c(dl->crc());
    });
  }
  kj::Promise<void> output(OutputContext ctx) override {
    auto p = ctx.getParams();
    auto data = p.getData();
    auto st = s_.worker_output(session_, p.getJob(), p.getEpoch(), p.getRank(),
                               std::string_view(reinterpret_cast<const char*>(data.begin()), data.size()));
    if (!st) return refuse(st);
    return kj::READY_NOW;
  }

 private:
  Service& s_;
  service::NodeSession session_;
};

class NodeApiImpl final : public wire::NodeApi::Server {
 public:
  explicit NodeApiImpl(Service& s) : s_(s) {}
  kj::Promise<void> register_(RegisterContext ctx) override {
    auto p = ctx.getParams();
    auto name = text_from_wire(p.getName(), "name");
    if (!name) return refuse(name.status());
    auto inv = inventory_from_wire(p.getInventory());
    if (!inv) return refuse(inv.status());
    auto running = running_from_wire(p.getRunning());
    if (!running) return refuse(running.status());
    auto link = std::make_shared<RpcNodeLink>(s_, p.getAgent());
    auto host = text_from_wire(p.getHost(), "host");
    if (!host) return refuse(host.status());
    auto session = s_.register_node(*name, *inv, *running, link, *host);
    if (!session) return refuse(session.status());
    link->set_session(*session);
    ctx.getResults().setSession(kj::heap<NodeSessionImpl>(s_, *session));
    ctx.getResults().setHeartbeatMs(std::max<std::int64_t>(20, s_.heartbeat_timeout_ms() / 5));
    return kj::READY_NOW;
  }

 private:
  Service& s_;
};

class BootstrapImpl final : public wire::Bootstrap::Server {
 public:
  BootstrapImpl(Service& s, std::string secret) : s_(s), secret_(std::move(secret)) {}
  kj::Promise<void> loginClient(LoginClientContext ctx) override {
    if (!secret_matches(secret_, std::string(ctx.getParams().getSecret().cStr())))
      return refuse(Status::PermissionDenied("authentication failed: wrong secret"));
    ctx.getResults().setApi(kj::heap<ClientApiImpl>(s_));
    return kj::READY_NOW;
  }
  kj::Promise<void> loginNode(LoginNodeContext ctx) override {
    if (!secret_matches(secret_, std::string(ctx.getParams().getSecret().cStr())))
      return refuse(Status::PermissionDenied("authentication failed: wrong secret"));
    ctx.getResults().setApi(kj::heap<NodeApiImpl>(s_));
    return kj::READY_NOW;
  }

 private:
  Service& s_;
  std::string secret_;
};

// --- /metrics ----------------------------------------------------------------------------------

class MetricsHttp final : public kj::HttpService {
 public:
  MetricsHttp(Service& s, kj::HttpHeaderTable& table) : s_(s), table_(table) {}
  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders&,
                            kj::AsyncInputStream&, Response& response) override {
    kj::HttpHeaders headers(table_);
    if (method != kj::HttpMethod::GET || (url != "/metrics" && !url.startsWith("/metrics?"))) {
      kj::StringPtr body = "not found: try /metrics\n";
      auto stream = response.send(404, "Not Found", headers, body.size());
      auto p = stream->write(body.begin(), body.size());
      return p.attach(kj::mv(stream));
    }
    headers.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; version=0.0.4");
    auto text = kj::heapString(s_.metrics_text().c_str());
    auto stream = response.send(200, "OK", headers, text.size());
    auto p = stream->write(text.begin(), text.size());
    return p.attach(kj::mv(stream), kj::mv(text));
  }

 private:
  Service& s_;
  kj::HttpHeaderTable& table_;
};

// serve's clock (core/clock.h): milliseconds since the Unix epoch, read from the system clock once
// at start and advanced by the steady clock, so it never goes back while the process runs, and the
// times it stamps (journaled with every decision) mean the same after a restart, or a reboot, as
// before: `orrery watch` shows wall-clock times, and `orrery ls` the age of a job recovered from
// the journal (core/service/client_api.h, kWallClockFloorMs). With core::SystemClock (the steady
// clock: time since boot) watch printed the host's uptime as a time of day, and a restarted core
// could not tell how old a recovered job was.
class WallClock final : public core::Clock {
 public:
  WallClock() : origin_ms_(ms_of(std::chrono::system_clock::now()) - ms_of(std::chrono::steady_clock::now())) {}
  std::int64_t now_ms() const override { return origin_ms_ + ms_of(std::chrono::steady_clock::now()); }

 private:
  template <class TimePoint>
  static std::int64_t ms_of(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }
  std::int64_t origin_ms_;
};

kj::Promise<void> tick_loop(kj::Timer& timer, Service& s, std::int64_t tick_ms) {
  return timer.afterDelay(tick_ms * kj::MILLISECONDS).then([&timer, &s, tick_ms] {
    s.tick();
    return tick_loop(timer, s, tick_ms);
  });
}

}  // namespace

capnp::Capability::Client make_bootstrap(Service& service, std::string secret) {
  return kj::heap<BootstrapImpl>(service, std::move(secret));
}

int serve(const ServeOptions& o, std::ostream& out, std::ostream& err) {
  auto secret = read_secret_file(o.secret_file);
  if (!secret) {
    err << "orrery-core serve: " << secret.reason() << "\n";
    return 1;
  }
  if (o.data_dir.empty()) {
    err << "orrery-core serve: --data DIR is required\n";
    return 1;
  }
  std::optional<core::Fleet> fleet;
  if (!o.fleet_file.empty()) {
    auto f = core::Fleet::load(o.fleet_file);
    if (!f) {
      err << "orrery-core serve: " << f.reason() << "\n";
      return 1;
    }
    fleet = std::move(*f);
  }
  WallClock clock;
  service::ServiceOptions so;
  so.data_dir = o.data_dir;
  so.heartbeat_timeout_ms = o.heartbeat_timeout_ms;
  so.cut_timeout_ms = o.cut_timeout_ms;
  so.user_checkpoint_root = o.user_checkpoint_root;
  so.launch_timeout_ms = o.launch_timeout_ms;
  so.policy = o.policy;
  so.one_node_gangs = o.one_node_gangs;
  if (!o.type_speed.empty()) {
    auto sp = core::policy::parse_type_speed(o.type_speed);
    if (!sp) {
      err << "orrery-core serve: --type-speed: " << sp.reason() << "\n";
      return 1;
    }
    so.type_speed = *sp;
  }
  auto svc = Service::open(so, std::move(fleet), clock);
  if (!svc) {
    err << "orrery-core serve: " << svc.reason() << "\n";
    return 1;
  }
  Service& s = **svc;
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  std::signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    auto io = kj::setupAsyncIo();
    auto addr = io.provider->getNetwork().parseAddress(o.listen.c_str(), 7070).wait(io.waitScope);
    auto listener = addr->listen();
    capnp::TwoPartyServer server(make_bootstrap(s, *secret));
    auto listening = server.listen(*listener);
    std::string host = o.listen.substr(0, o.listen.rfind(':'));
    out << "orrery-core serve: listening on " << host << ":" << listener->getPort()
        << " (client and node APIs); data " << o.data_dir << ": " << s.recovery_summary()
        << "; heartbeat timeout " << s.heartbeat_timeout_ms() << " ms; policy " << o.policy << std::endl;
    kj::Own<kj::HttpHeaderTable> table;
    kj::Own<MetricsHttp> metrics;
    kj::Own<kj::HttpServer> http;
    kj::Own<kj::ConnectionReceiver> mlistener;
    kj::Promise<void> mloop = kj::NEVER_DONE;
    if (!o.metrics.empty()) {
      table = kj::heap<kj::HttpHeaderTable>();
      metrics = kj::heap<MetricsHttp>(s, *table);
      http = kj::heap<kj::HttpServer>(io.provider->getTimer(), *table, *metrics);
      auto maddr = io.provider->getNetwork().parseAddress(o.metrics.c_str(), 9090).wait(io.waitScope);
      mlistener = maddr->listen();
      mloop = http->listenHttp(*mlistener);
      std::string mhost = o.metrics.substr(0, o.metrics.rfind(':'));
      out << "orrery-core serve: metrics on http://" << mhost << ":" << mlistener->getPort() << "/metrics"
          << std::endl;
    }
    auto ticks = tick_loop(io.provider->getTimer(), s, o.tick_ms);
    auto signalled = io.unixEventPort.onSignal(SIGTERM)
                         .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                         .then([](siginfo_t) {});
    signalled.exclusiveJoin(kj::mv(listening))
        .exclusiveJoin(kj::mv(ticks))
        .exclusiveJoin(kj::mv(mloop))
        .wait(io.waitScope);
    out << "orrery-core serve: stopping" << std::endl;
    s.detach_transport();
  })) {
    err << "orrery-core serve: " << e->getDescription().cStr() << "\n";
    rc = 1;
  }
  return rc;
}

}  // namespace orrery::rpc
