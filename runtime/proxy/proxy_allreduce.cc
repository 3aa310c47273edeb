// ProxyServer: where a job's allreduce runs (on the devices or the host group, negotiated between
// its proxies: collective_negotiation.h), a rank's contribution, and failing the allreduce alike on
// every proxy (proxy_server.h).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "runtime/proxy/collective_negotiation.h"
#include "runtime/proxy/proxy_server.h"
#include "runtime/proxy/proxy_server_internal.h"

namespace orrery::runtime {

using namespace proxy_internal;

// A rank's allreduce request: on a device buffer (`buf`), or on host floats in its window
// (`host`; count 0: the safe point and its flags only). Answered later (serve_session), when
// the sum is there; false.
bool ProxyServer::begin_reduce(Session& s, Rank& rk, std::uint64_t buf, std::uint64_t count,
                               std::int64_t step, bool host, Response* out) {
  auto fail = [&](const std::string& why) {
    *out = error_response(why);
    return true;
  };
  if (!s.coll) {
    // Every proxy of the job sizes it alike: the data, or a negotiation if that is larger.
    auto co = open_collective_group(
        s.collective, s.world,
        std::max({std::max<std::uint64_t>(count, 1), negotiation_floats(s.world), id_floats()}),
        s.order);
    if (!co) return fail("allreduce: " + co.reason());
    s.coll = std::move(co.value());
  }
  // Host data stays on the host: every rank of the job makes the same calls, so every proxy
  // takes this same decision without negotiating.
  if (s.reduce == Session::Reduce::kUnset && host) s.reduce = Session::Reduce::kHost;
  if (s.reduce == Session::Reduce::kUnset) {
    if (auto st = choose_reduce(s, step, count); !st) return fail("allreduce: " + st.reason());
  }
  rk.reduce_step = step;
  rk.reduce_buf = buf;
  rk.reduce_count = count;
  rk.reduce_host = host;
  rk.contributed = false;
  if (s.reduce == Session::Reduce::kFailed) {
    return fail("allreduce: " + fail_reduce(s, rk, s.reduce_error).reason());
  }
  // While a negotiation is open (its first rank died, say) the contribution waits for it.
  if (s.reduce != Session::Reduce::kNegotiating && s.reduce != Session::Reduce::kBootstrapping) {
    if (auto st = contribute(s, rk); !st) {
      if (s.reduce == Session::Reduce::kDevice) st = fail_reduce(s, rk, st.reason());
      return fail("allreduce: " + st.reason());
    }
  }
  rk.in_reduce = true;
  return false;
}

// One proxy holds every rank: nothing to agree on; the backend sums on the device if it can.
// Several: each proxy contributes its offer for all its ranks two group steps before the first
// one, and the rank that asked waits (resident: no splice switch) until the rounds are decoded.
Status ProxyServer::choose_reduce(Session& s, std::int64_t step, std::uint64_t count) {
  if (s.world == static_cast<int>(s.order.size())) {
    DeviceCollectiveSetup setup;
    setup.world = s.world;
    setup.ranks_by_device = {s.order};
    std::sort(setup.ranks_by_device[0].begin(), setup.ranks_by_device[0].end());
    setup.count = count;
    auto d = be_->open_device_collective(setup);
    if (d) {
      s.dcoll = std::move(d.value());
      s.reduce = Session::Reduce::kDevice;
    } else {
      if (be_->name() != "host") {
        std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on the host: %s\n", opt_.device,
                     s.job, d.reason().c_str());
      }
      s.reduce = Session::Reduce::kHost;
    }
    return Status::Ok();
  }
  const CollectiveOffer offer = be_->collective_offer();
  s.negotiation_step = group_step(step) - 2;
  for (int r : s.order) {
    const std::vector<float> v =
        negotiation_offer(s.world, r, nonce_, offer, static_cast<std::uint32_t>(count));
    if (auto st = s.coll->contribute(r, s.negotiation_step, v.data(), v.size(), 0); !st) return st;
  }
  s.reduce = Session::Reduce::kNegotiating;
  return Status::Ok();
}

// The rank that opened the negotiation stays resident until it is over; then it contributes,
// and the next rank gets the device.
bool ProxyServer::serve_negotiation(Session& s, Rank& rk, WorkerSlot& ws) {
  const bool round1 = s.reduce == Session::Reduce::kNegotiating;
  const float* sum = s.coll->result(s.negotiation_step + (round1 ? 0 : 1), nullptr);
  if (sum == nullptr) {
    if (auto h = s.coll->health(); !h) return answer_reduce_error(rk, ws, fail_reduce(s, rk, h.reason()));
    return false;
  }
  Status st = round1 ? finish_negotiation(s, sum) : finish_bootstrap(s, sum);
  if (st && s.reduce == Session::Reduce::kBootstrapping) return true;  // round 2 is out
  if (st) st = contribute(s, rk);
  if (!st) return answer_reduce_error(rk, ws, fail_reduce(s, rk, st.reason()));
  if (s.order.size() > 1) {
    if (auto sw = switch_to_next(s); !sw) drop_session(s.job, sw.reason());
  }
  return true;
}

// Every proxy decodes the same sum: they all take the same way, or this one fails the job's
// allreduce (its workers exit and the node reports the job) rather than sum differently.
Status ProxyServer::finish_negotiation(Session& s, const float* sum) {
  auto n = decode_negotiation(sum, s.world, nonce_);
  if (!n) return n.status();
  if (!n->on_device) {
    if (be_->name() != "host") {
      std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on the host: %s\n", opt_.device, s.job,
                   n->why.c_str());
    }
    s.reduce = Session::Reduce::kHost;
    return Status::Ok();
  }
  s.agreed = std::move(n->setup);
  // Round 2: the communicator's id, from the proxy holding rank 0.
  CollectiveId id{};
  bool have_id = false;
  if (std::find(s.order.begin(), s.order.end(), 0) != s.order.end()) {
    auto made = be_->new_collective_id();
    if (made) {
      id = made.value();
      have_id = true;
    } else {
      // Every proxy reads the missing id in round 2 and fails the job's allreduce alike.
      std::fprintf(stderr, "orrery-proxy[%d]: job %d: %s\n", opt_.device, s.job,
                   made.reason().c_str());
    }
  }
  for (int r : s.order) {
    const std::vector<float> v = id_offer(r, have_id ? &id : nullptr);
    if (auto st = s.coll->contribute(r, s.negotiation_step + 1, v.data(), v.size(), 0); !st) {
      return st;
    }
  }
  s.reduce = Session::Reduce::kBootstrapping;
  return Status::Ok();
}

Status ProxyServer::finish_bootstrap(Session& s, const float* sum) {
  auto id = decode_id(sum);
  if (!id) return id.status();
  s.agreed.id = id.value();
  auto d = be_->open_device_collective(s.agreed);
  if (!d) return Status::Error("the job's proxies agreed to sum on the devices, but " + d.reason());
  s.dcoll = std::move(d.value());
  s.reduce = Session::Reduce::kDevice;
  std::fprintf(stderr, "orrery-proxy[%d]: job %d sums on %zu devices over NCCL (device %d)\n",
               opt_.device, s.job, s.agreed.ranks_by_device.size(), s.agreed.device_rank);
  return Status::Ok();
}

Status ProxyServer::fail_reduce(Session& s, Rank& rk, const std::string& why) {
  if (s.reduce != Session::Reduce::kFailed) {
    s.reduce = Session::Reduce::kFailed;
    s.reduce_error = why;
    std::fprintf(stderr, "orrery-proxy[%d]: job %d: the allreduce fails: %s\n", opt_.device, s.job,
                 why.c_str());
  }
  if (!rk.contributed && s.coll) {
    (void)contribute_flags(s, rk, kFlagReduceFailed);
    rk.contributed = true;
  }
  return Status::Error(s.reduce_error);
}

bool ProxyServer::answer_reduce_error(Rank& rk, WorkerSlot& ws, const Status& st) {
  rk.in_reduce = false;
  publish_response(&ws, error_response("allreduce: " + st.reason()));
  return true;
}

// The step's flags without data: one float, so that every rank of the job sees the same flags.
Status ProxyServer::contribute_flags(Session& s, const Rank& rk, std::uint64_t flags) {
  const float none = 0.0f;
  return s.coll->contribute(rk.rank, group_step(rk.reduce_step), &none, 1, flags);
}

// On the device: the data to the device collective, and one float with the flags to the host
// group (the flags decide checkpoints and stops, and every rank must see the same).
Status ProxyServer::contribute(Session& s, Rank& rk) {
  const std::int64_t step = rk.reduce_step;
  const std::uint64_t count = rk.reduce_count;
  Status st;
  if (rk.reduce_host) {
    // The window's floats, or only the flags: the host group, whatever the data path.
    if (count == 0) {
      st = contribute_flags(s, rk, flags_for(s, step));
    } else {
      // A proxy of one rank lets the group assemble the sum where the data lie (the window or
      // the reduce buffer): the worker waits, so nothing else touches it, and serve_session has
      // nothing to copy.
      float* d = rk.reduce_data;
      st = s.order.size() == 1
               ? s.coll->contribute_into(rk.rank, group_step(step), d, count, flags_for(s, step), d)
               : s.coll->contribute(rk.rank, group_step(step), d, count, flags_for(s, step));
    }
  } else if (s.reduce == Session::Reduce::kDevice) {
    st = s.dcoll->contribute(rk.rank, step, rk.reduce_buf, count);
    if (st) st = contribute_flags(s, rk, flags_for(s, step));
  } else {
    const void* src = be_->host_view(rk.reduce_buf, count * sizeof(float));
    std::vector<float> staging;
    if (src == nullptr) {
      staging.resize(count);
      st = be_->copy_d2h(staging.data(), rk.reduce_buf, count * sizeof(float));
      src = staging.data();
    }
    if (st) {
      st = s.coll->contribute(rk.rank, group_step(step), static_cast<const float*>(src), count,
                              flags_for(s, step));
    }
  }
  rk.contributed = st.ok();
  return st;
}

std::uint64_t ProxyServer::flags_for(const Session& s, std::int64_t step) {
  auto p = pending_.find(s.job);
  if (p == pending_.end() || p->second.epoch < s.epoch) return 0;
  if (p->second.at_step >= 0 && p->second.at_step != step + 1) return 0;
  return kFlagCheckpoint | (p->second.then_stop ? kFlagStop : 0);
}

}  // namespace orrery::runtime
