#include "runtime/node/agent.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace orrery::runtime {

void Agent::enqueue(AgentCommand cmd, std::function<void(Status)> done) {
  queue_.emplace_back(std::move(cmd), std::move(done));
}

void Agent::drop_commands(const std::string& why) {
  auto q = std::move(queue_);
  queue_.clear();
  for (auto& [cmd, done] : q)
    if (done) done(Status::Unavailable(why));  // the connection to the core is gone
}

bool Agent::runs(int job, std::int64_t epoch) const {
  for (auto& [j, e] : runtime_.running())
    if (j == job && e == epoch) return true;
  return false;
}

std::vector<service::Incarnation> Agent::running() const {
  std::vector<service::Incarnation> out;
  for (auto& [j, e] : runtime_.running()) out.push_back({j, e});
  // An incarnation that ended while the core was unreachable still has its last reports (e.g.
  // Completed) to deliver: registering it lets a restarted core adopt it and take them, instead of
  // declaring its workers lost.
  for (const auto& e : outbox_) {
    service::Incarnation inc{e.job, e.epoch};
    if (std::find(out.begin(), out.end(), inc) == out.end()) out.push_back(inc);
  }
  return out;
}

Status Agent::check_epoch(int job, std::int64_t epoch) const {
  auto it = newest_.find(job);
  if (it != newest_.end() && epoch < it->second)
    return Status::FailedPrecondition("stale epoch " + std::to_string(epoch) + " for job " +
                                      std::to_string(job) + ": this node has seen epoch " +
                                      std::to_string(it->second));
  return Status::Ok();
}

Status Agent::launch(CoreLink& core, const service::LaunchCommand& c) {
  if (auto st = check_epoch(c.job, c.epoch); !st) return st;
  // Launching a newer epoch stops every older incarnation of the job here.
  if (runs(c.job, c.epoch)) {
    newest_[c.job] = c.epoch;
    return Status::Ok();  // sent again after a reconnect
  }
  for (auto& [j, e] : runtime_.running())
    if (j == c.job && e < c.epoch) (void)runtime_.stop(j, e);
  newest_[c.job] = c.epoch;
  if (c.local.empty()) {
    shares_.erase(c.job);
    return Status::Ok();
  }
  if (c.restore_step >= 0)
    for (const auto& share : c.local)
      for (int rank : share.ranks) {
        auto st = core.download_shard(c.job, c.restore_step, rank,
                                      runtime_.shard_path(c.job, c.restore_step, rank));
        if (!st) return st.with_reason("fetching the shard of rank " + std::to_string(rank) + ": " + st.reason());
      }
  LaunchSpec spec;
  spec.job = c.job;
  spec.epoch = c.epoch;
  spec.world = c.world;
  for (const auto& s : c.local) spec.local.push_back(LocalPlacement{s.device, s.ranks});
  spec.command = c.command;
  spec.env = c.env;
  spec.workdir = c.workdir;
  spec.mode = c.mode;
  spec.grace_ms = c.grace_ms;
  spec.checkpoint_dir = c.checkpoint_dir;
  spec.restart_count = c.restart_count;
  if (!c.master_addr.empty()) spec.master_addr = c.master_addr;
  spec.master_port = c.master_port;
  spec.restore_step = c.restore_step;
  spec.collective = c.collective;  // the core names the incarnation's group, the same on every node
  auto st = runtime_.launch(spec);
  if (!st) return st;
  shares_[c.job] = c;
  return Status::Ok();
}

Status Agent::execute(CoreLink& core, const AgentCommand& cmd) {
  switch (cmd.kind) {
    case AgentCommand::Kind::kLaunch:
      return launch(core, cmd.launch);
    case AgentCommand::Kind::kCheckpoint: {
      if (auto st = check_epoch(cmd.job, cmd.epoch); !st) return st;
      if (!runs(cmd.job, cmd.epoch))
        return Status::NotFound("job " + std::to_string(cmd.job) + " epoch " + std::to_string(cmd.epoch) +
                                " does not run on this node");
      return runtime_.checkpoint(cmd.job, cmd.epoch, cmd.at_step, cmd.then_stop);
    }
    case AgentCommand::Kind::kStop: {
      if (auto st = check_epoch(cmd.job, cmd.epoch); !st) return st;
      newest_[cmd.job] = std::max(newest_[cmd.job], cmd.epoch);
      Status out = Status::Ok();
      for (auto& [j, e] : runtime_.running())
        if (j == cmd.job && e == cmd.epoch) out = runtime_.stop(j, e);
      return out;
    }
  }
  return Status::Internal("unknown command");
}

bool Agent::forward(CoreLink& core, const JobEvent& e) {
  service::NodeReport r;
  r.kind = static_cast<service::NodeReport::Kind>(static_cast<int>(e.kind));
  r.job = e.job;
  r.epoch = e.epoch;
  r.step = e.step;
  r.gpu_ms = e.gpu_ms;
  r.detail = e.detail;
  r.platform = e.platform;
  if (e.kind == JobEvent::Kind::kCheckpointed) {
    auto it = shares_.find(e.job);
    // A checkpoint whose local shard is missing cannot be restored from: the incarnation is
    // reported crashed (it restarts from its last stored checkpoint) rather than left waiting.
    if (it != shares_.end() && it->second.epoch == e.epoch)
      for (const auto& share : it->second.local)
        for (int rank : share.ranks) {
          std::error_code ec;
          auto path = runtime_.shard_path(e.job, e.step, rank);
          if (!std::filesystem::exists(path, ec)) {
            r.kind = service::NodeReport::Kind::kCrashed;
            r.platform = true;
            r.detail = "checkpoint of step " + std::to_string(e.step) + ": local shard " + path + " missing";
          }
        }
    if (r.kind == service::NodeReport::Kind::kCheckpointed && it != shares_.end() && it->second.epoch == e.epoch)
      for (const auto& share : it->second.local)
        for (int rank : share.ranks) {
          auto st = core.upload_shard(e.job, e.epoch, e.step, rank, runtime_.shard_path(e.job, e.step, rank));
          if (!st) {
            if (!core.connected()) return false;
            std::fprintf(stderr, "orrery-node: upload of job %d step %lld rank %d refused: %s\n", e.job,
                         static_cast<long long>(e.step), rank, st.reason().c_str());
            return true;  // refused (stale): do not report a checkpoint the store lacks
          }
        }
  }
  auto st = core.report(r);
  if (!st) {
    if (!core.connected()) return false;
    std::fprintf(stderr, "orrery-node: report refused: %s\n", st.reason().c_str());
  }
  return true;
}

bool Agent::send_output(CoreLink& core, const OutputChunk& c) {
  auto st = core.output(c);
  if (st) return true;
  if (!core.connected()) return false;
  dropped_output_bytes_ += c.data.size();
  if (last_refused_output_ != std::pair{c.job, c.epoch}) {
    last_refused_output_ = {c.job, c.epoch};
    std::fprintf(stderr, "orrery-node: output of job %d epoch %lld refused, dropped: %s\n", c.job,
                 static_cast<long long>(c.epoch), st.reason().c_str());
  }
  return true;
}

void Agent::ship_output(CoreLink& core) {
  std::size_t budget = kOutputPerPump;
  // What an earlier pump could not deliver goes first; until it is all out nothing new is taken,
  // which keeps it within one pump's budget.
  while (!unsent_output_.empty() && budget > 0) {
    if (!core.connected() || !send_output(core, unsent_output_.front())) return;
    budget -= std::min(budget, unsent_output_.front().data.size());
    unsent_output_.pop_front();
  }
  if (!unsent_output_.empty() || budget == 0 || !core.connected()) return;
  for (auto& c : runtime_.take_output(budget))
    if (!core.connected() || !send_output(core, c)) unsent_output_.push_back(std::move(c));
}

void Agent::pump(CoreLink& core) {
  while (!queue_.empty() && core.connected()) {
    auto [cmd, done] = std::move(queue_.front());
    queue_.pop_front();
    auto st = execute(core, cmd);
    if (!st && st.code() == StatusCode::kFailedPrecondition) ++stale_commands_;
    if (done) done(st);
  }
  for (auto& e : runtime_.poll()) outbox_.push_back(std::move(e));
  ship_output(core);
  while (!outbox_.empty() && core.connected()) {
    if (!forward(core, outbox_.front())) break;
    outbox_.pop_front();
  }
}

}  // namespace orrery::runtime
