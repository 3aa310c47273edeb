// The workers' output: chunks the nodes ship (NodeSession.output) kept per (job, rank) in the
// OutputStore, and read back by clients (ClientApi::output, `orrery logs JOB --rank R`).
// docs/runtime.md, "Workers' output".
#include "core/service/service.h"
#include "core/service/service_internal.h"

namespace orrery::service {

namespace {

bool ended(spec::JobState s) {
  return s == spec::JobState::kCompleted || s == spec::JobState::kFailed || s == spec::JobState::kCancelled;
}

}  // namespace

OutputStore& Service::output_store() {
  if (!output_) output_ = std::make_unique<OutputStore>(options_.data_dir.empty() ? "" : options_.data_dir + "/output");
  return *output_;
}

Status Service::worker_output(const NodeSession& s, int job, std::int64_t epoch, int rank, std::string_view data) {
  if (!session_current(s)) return Status::FailedPrecondition("session superseded or not registered; register again");
  conns_[static_cast<std::size_t>(s.node)]->last_seen_ms = clock_.now_ms();
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  const auto& jv = core_->cluster().jobs[job];
  if (rank < 0 || rank >= jv.world)
    return Status::NotFound(job_str(job) + " has no rank " + std::to_string(rank) + " (world " +
                            std::to_string(jv.world) + ")");
  // Output of an earlier incarnation arriving late (a node that reconnects) is still the job's.
  if (epoch < 0 || epoch > jv.epoch)
    return Status::FailedPrecondition(job_str(job) + " has no epoch " + std::to_string(epoch) +
                                      " (its newest is " + std::to_string(jv.epoch) + ")");
  if (data.size() > kOutputChunkMax)
    return Status::InvalidArgument("output chunk of " + std::to_string(data.size()) + " bytes (at most " +
                                   std::to_string(kOutputChunkMax) + ")");
  const auto& node = core_->fleet().nodes[static_cast<std::size_t>(s.node)].name;
  return output_store().append(job, rank, epoch, node, data);
}

Result<WorkerOutput> Service::output(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes) {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  const auto world = core_->cluster().jobs[job].world;
  if (rank < 0 || rank >= world)
    return Status::NotFound(job_str(job) + " has no rank " + std::to_string(rank) + " (world " +
                            std::to_string(world) + ")");
  auto out = output_store().read(job, rank, offset, max_bytes);
  if (!out) return out.status();
  out->job_ended = ended(core_->state(job));
  return out;
}

}  // namespace orrery::service
