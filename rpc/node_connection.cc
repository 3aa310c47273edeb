#include "rpc/node_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "base/crc32c.h"
#include "rpc/connection.h"
#include "rpc/convert.h"

namespace orrery::rpc {

namespace {

// Commands from the core: queued in the agent, answered when pump() carries them out.
class NodeAgentImpl final : public wire::NodeAgent::Server {
 public:
  explicit NodeAgentImpl(runtime::Agent& a) : a_(a) {}
  kj::Promise<void> launch(LaunchContext ctx) override {
    auto l = launch_from_wire(ctx.getParams().getLaunch());
    if (!l) return exception_of(l.status());
    runtime::AgentCommand c;
    c.kind = runtime::AgentCommand::Kind::kLaunch;
    c.launch = std::move(*l);
    return queue(std::move(c));
  }
  kj::Promise<void> checkpoint(CheckpointContext ctx) override {
    runtime::AgentCommand c;
    c.kind = runtime::AgentCommand::Kind::kCheckpoint;
    c.job = ctx.getParams().getJob();
    c.epoch = ctx.getParams().getEpoch();
    c.at_step = ctx.getParams().getAtStep();
    c.then_stop = ctx.getParams().getThenStop();
    return queue(std::move(c));
  }
  kj::Promise<void> stop(StopContext ctx) override {
    runtime::AgentCommand c;
    c.kind = runtime::AgentCommand::Kind::kStop;
    c.job = ctx.getParams().getJob();
    c.epoch = ctx.getParams().getEpoch();
    return queue(std::move(c));
  }

 private:
  kj::Promise<void> queue(runtime::AgentCommand c) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    auto f = std::make_shared<kj::Own<kj::PromiseFulfiller<void>>>(kj::mv(paf.fulfiller));
    a_.enqueue(std::move(c), [f](Status st) {
      if (st) (*f)->fulfill();
      else (*f)->reject(exception_of(st));
    });
    return kj::mv(paf.promise);
  }
  runtime::Agent& a_;
};

class DownloadSink final : public wire::ByteSink::Server {
 public:
  DownloadSink(std::ofstream* out, std::uint32_t* crc, std::uint64_t* size) : out_(out), crc_(crc), size_(size) {}
  kj::Promise<void> write(WriteContext ctx) override {
    auto chunk = ctx.getParams().getChunk();
    std::string_view v(reinterpret_cast<const char*>(chunk.begin()), chunk.size());
    out_->write(v.data(), static_cast<std::streamsize>(v.size()));
    *crc_ = crc32c_extend(*crc_, v);
    *size_ += v.size();
    return kj::READY_NOW;
  }
  kj::Promise<void> done(DoneContext) override { return kj::READY_NOW; }

 private:
  std::ofstream* out_;
  std::uint32_t* crc_;
  std::uint64_t* size_;
};

class RpcCoreLink final : public runtime::CoreLink {
 public:
  RpcCoreLink(Connection& c, wire::NodeSession::Client s) : c_(c), s_(kj::mv(s)) {}
  ~RpcCoreLink() noexcept override {}
  bool connected() const override { return !c_.lost; }

  Status report(const service::NodeReport& r) override {
    return call([&] {
      auto req = s_.reportRequest();
      report_to_wire(r, req.initReport());
      req.send().wait(c_.io.waitScope);
    });
  }
  Status output(const runtime::OutputChunk& c) override {
    return call([&] {
      auto req = s_.outputRequest();
      req.setJob(c.job);
      req.setEpoch(c.epoch);
      req.setRank(c.rank);
      req.setData(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(c.data.data()), c.data.size()));
      req.send().wait(c_.io.waitScope);
    });
  }
  Status heartbeat() {
    return call([&] { s_.heartbeatRequest().send().wait(c_.io.waitScope); });
  }
  Status upload_shard(int job, std::int64_t epoch, std::int64_t step, int rank, const std::string& path) override {
    // Two passes in 1 MiB chunks (size and checksum are announced first), so memory stays bounded
    // whatever the shard's size.
    constexpr std::size_t kChunk = 1 << 20;
    std::string buf(kChunk, '\0');
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    {
      std::ifstream in(path, std::ios::binary);
      if (!in) return Status::Internal("cannot read local shard " + path);
      while (in) {
        in.read(buf.data(), kChunk);
        auto n = static_cast<std::size_t>(in.gcount());
        crc = crc32c_extend(crc, std::string_view(buf.data(), n));
        size += n;
      }
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::Internal("cannot read local shard " + path);
    return call([&] {
      auto req = s_.uploadShardRequest();
      req.setJob(job);
      req.setEpoch(epoch);
      req.setStep(step);
      req.setRank(rank);
      req.setSize(size);
      req.setCrc32c(crc);
      auto sink = req.send().wait(c_.io.waitScope).getSink();
      while (in) {
        in.read(buf.data(), kChunk);
        auto n = static_cast<std::size_t>(in.gcount());
        if (n == 0) break;
        auto w = sink.writeRequest();
        w.setChunk(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(buf.data()), n));
        w.send().wait(c_.io.waitScope);
      }
      sink.doneRequest().send().wait(c_.io.waitScope);
    });
  }
  Status download_shard(int job, std::int64_t step, int rank, const std::string& path) override {
    std::string tmp = path + ".part";
    {
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    }
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::Internal("cannot write " + tmp);
    std::uint32_t crc = 0;
    std::uint64_t size = 0;
    std::uint32_t want_crc = 0;
    std::uint64_t want_size = 0;
    auto st = call([&] {
      auto req = s_.downloadShardRequest();
      req.setJob(job);
      req.setStep(step);
      req.setRank(rank);
      req.setSink(kj::heap<DownloadSink>(&out, &crc, &size));
      auto resp = req.send().wait(c_.io.waitScope);
      want_crc = resp.getCrc32c();
      want_size = resp.getSize();
    });
    out.close();
    if (!st) {
      std::remove(tmp.c_str());
      return st;
    }
    if (size != want_size || crc != want_crc) {
      std::remove(tmp.c_str());
      return Status::Internal("shard of job " + std::to_string(job) + " step " + std::to_string(step) + " rank " +
                           std::to_string(rank) + " arrived damaged (size or checksum mismatch)");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::Internal("cannot rename " + tmp);
    return Status::Ok();
  }

 private:
  // Runs one request; the core's refusal comes back with its code (rpc/wire_status.h).
  template <class F>
  Status call(F&& f) {
    if (c_.lost) return Status::Unavailable("connection to the core lost");
    KJ_IF_MAYBE(e, kj::runCatchingExceptions(f)) { return call_failed(c_, *e); }
    return Status::Ok();
  }
  Connection& c_;
  wire::NodeSession::Client s_;
};

// This end's IP address of the connection to the core: how other nodes reach this machine when
// it shares a network with them. "" (said on `err`) when the socket cannot tell: the node then
// advertises no address, and jobs spanning it and other nodes cannot form their collective.
std::string local_address(kj::AsyncIoStream& stream, std::ostream& err) {
  sockaddr_storage addr{};
  kj::uint len = sizeof addr;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { stream.getsockname(reinterpret_cast<sockaddr*>(&addr), &len); })) {
    err << "orrery-node: cannot tell this end's address of the connection to the core ("
        << description_of(*e) << "); pass --advertise ADDR\n";
    return "";
  }
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
  return buf;
}

// 0: connection lost (retry); 1: refused for good. `held_before`: this agent was registered in an
// earlier session.
int one_session(const NodeConnectionOptions& o, runtime::Agent& agent, const std::atomic<bool>& stop,
                std::ostream& out, std::ostream& err, bool held_before, bool* registered) {
  auto c = connect_to(o.core_address);
  if (!c) return 0;
  auto& conn = **c;
  kj::Maybe<wire::NodeSession::Client> session;
  std::int64_t heartbeat_ms = 1000;
  Status refused;
  bool disconnected = false;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    KJ_IF_MAYBE(b, conn.bootstrap) {
      auto login = b->loginNodeRequest();
      login.setSecret(o.secret);
      auto api = login.send().wait(conn.io.waitScope).getApi();
      auto reg = api.registerRequest();
      reg.setName(o.name);
      auto inv = reg.initInventory();
      inv.setDeviceType(o.inventory.device_type);
      inv.setDevices(o.inventory.devices);
      inv.setDeviceMemMib(o.inventory.device_mem_mib);
      auto running = agent.running();
      auto list = reg.initRunning(static_cast<unsigned>(running.size()));
      for (unsigned i = 0; i < running.size(); ++i) {
        list[i].setJob(running[i].job);
        list[i].setEpoch(running[i].epoch);
      }
      reg.setAgent(kj::heap<NodeAgentImpl>(agent));
      reg.setHost(o.advertise.empty() ? local_address(*conn.stream, err) : o.advertise);
      auto resp = reg.send().wait(conn.io.waitScope);
      session = resp.getSession();
      heartbeat_ms = resp.getHeartbeatMs();
    }
  })) {
    if (e->getType() == kj::Exception::Type::DISCONNECTED) disconnected = true;
    else refused = status_of(*e);
  }
  if (disconnected) return 0;
  if (!refused.ok()) {
    // A node being failed over may register again shortly (kUnavailable); anything else is
    // final.
    if (refused.code() == StatusCode::kUnavailable) {
      out << "orrery-node: " << refused.reason() << std::endl;
      return 0;
    }
    // The name is taken by a live agent. For an agent that was registered before (reconnecting
    // while the core has not yet seen its old connection end) that is its own old session, which
    // expires within a heartbeat timeout: try again. A second agent started under a live node's
    // name stops here, and the live one's jobs are untouched.
    if (refused.code() == StatusCode::kAlreadyExists && held_before) {
      out << "orrery-node: " << refused.reason() << "; trying again" << std::endl;
      return 0;
    }
    err << "orrery-node: " << o.core_address << " refused " << o.name << ": " << refused.reason() << "\n";
    return 1;
  }
  KJ_IF_MAYBE(s, session) {
    *registered = true;
    out << "orrery-node: " << o.name << " registered with " << o.core_address << " ("
        << o.inventory.devices << " " << o.inventory.device_type << " devices, "
        << agent.running().size() << " incarnations running), heartbeat every " << heartbeat_ms
        << " ms" << std::endl;
    RpcCoreLink link(conn, *s);
    auto& timer = conn.io.provider->getTimer();
    auto next_beat = timer.now();
    while (!stop.load() && link.connected()) {
      if (timer.now() >= next_beat) {
        auto st = link.heartbeat();
        if (!st && link.connected()) {
          out << "orrery-node: heartbeat refused (" << st.reason() << "), registering again" << std::endl;
          break;
        }
        next_beat = timer.now() + heartbeat_ms * kj::MILLISECONDS;
      }
      agent.pump(link);
      // Lets the core's commands in while waiting.
      timer.afterDelay(o.pump_ms * kj::MILLISECONDS).exclusiveJoin(conn.disconnected.addBranch()).wait(conn.io.waitScope);
    }
    agent.drop_commands("connection to the core lost");
  }
  return 0;
}

}  // namespace

int run_node_connection(const NodeConnectionOptions& o, runtime::Agent& agent, const std::atomic<bool>& stop,
                        std::ostream& out, std::ostream& err) {
  std::int64_t backoff_ms = 100;
  bool held_before = false;  // this agent held the node's session in an earlier connection
  while (!stop.load()) {
    bool registered = false;
    int rc = one_session(o, agent, stop, out, err, held_before, &registered);
    held_before = held_before || registered;
    if (rc != 0) return rc;
    if (stop.load()) break;
    if (registered) {
      backoff_ms = 100;
      out << "orrery-node: connection to " << o.core_address << " lost, reconnecting" << std::endl;
    }
    // While disconnected the runtime keeps running; its events wait in the agent's outbox.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
    while (!stop.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    backoff_ms = std::min<std::int64_t>(backoff_ms * 2, 5000);
  }
  return 0;
}

}  // namespace orrery::rpc
