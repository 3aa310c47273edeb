#include "runtime/proxy/collective_negotiation.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace orrery::runtime {
namespace {

// Per rank: [present, across_devices, nonce (8 bytes, little end first), uuid (16 bytes),
// count (4 bytes)].
constexpr std::uint64_t kPresent = 0, kAcross = 1, kNonce = 2, kUuid = 10, kCount = 26,
                        kPerRank = 30;
constexpr std::uint64_t kIdBytes = sizeof(CollectiveId);

std::string uuid_text(const std::array<unsigned char, 16>& u) {
  char buf[40];
  int n = 0;
  for (std::size_t i = 0; i < u.size(); ++i) {
    n += std::snprintf(buf + n, sizeof buf - n, "%s%02x",
                       (i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "", u[i]);
  }
  return buf;
}

// A float that carries one byte, else false.
bool byte_at(const float* sum, std::uint64_t at, unsigned char* out) {
  const float f = sum[at];
  if (!(f >= 0.0f && f <= 255.0f) || f != static_cast<float>(static_cast<int>(f))) return false;
  *out = static_cast<unsigned char>(f);
  return true;
}

}  // namespace

std::uint64_t negotiation_floats(int world) { return static_cast<std::uint64_t>(world) * kPerRank; }

std::vector<float> negotiation_offer(int world, int rank, std::uint64_t nonce,
                                     const CollectiveOffer& offer, std::uint32_t count) {
  std::vector<float> v(negotiation_floats(world), 0.0f);
  float* b = v.data() + static_cast<std::uint64_t>(rank) * kPerRank;
  b[kPresent] = 1.0f;
  b[kAcross] = offer.across_devices ? 1.0f : 0.0f;
  for (int i = 0; i < 8; ++i) b[kNonce + i] = static_cast<float>((nonce >> (8 * i)) & 0xff);
  for (int i = 0; i < 16; ++i) b[kUuid + i] = static_cast<float>(offer.uuid[i]);
  for (int i = 0; i < 4; ++i) b[kCount + i] = static_cast<float>((count >> (8 * i)) & 0xff);
  return v;
}

Result<Negotiated> decode_negotiation(const float* sum, int world, std::uint64_t nonce) {
  auto byte = [&](std::uint64_t at, unsigned char* out) { return byte_at(sum, at, out); };
  struct Proxy {
    bool across = true;
    std::array<unsigned char, 16> uuid{};
    std::vector<int> ranks;
  };
  Negotiated out;
  std::vector<std::uint64_t> order;  // nonces by lowest rank
  std::map<std::uint64_t, Proxy> proxies;
  for (int r = 0; r < world; ++r) {
    const std::uint64_t b = static_cast<std::uint64_t>(r) * kPerRank;
    unsigned char v[kPerRank];
    for (std::uint64_t i = 0; i < kPerRank; ++i) {
      if (!byte(b + i, &v[i])) {
        return Status::Error("collective negotiation: rank " + std::to_string(r) +
                             "'s offer is malformed");
      }
    }
    if (v[kPresent] != 1 || v[kAcross] > 1) {
      return Status::Error("collective negotiation: rank " + std::to_string(r) +
                           (v[kPresent] == 0 ? " made no offer" : "'s offer is malformed"));
    }
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(v[kNonce + i]) << (8 * i);
    std::array<unsigned char, 16> uuid{};
    std::copy(v + kUuid, v + kUuid + 16, uuid.begin());
    std::uint32_t count = 0;
    for (int i = 0; i < 4; ++i) count |= static_cast<std::uint32_t>(v[kCount + i]) << (8 * i);
    if (r == 0) {
      out.setup.count = count;
    } else if (count != out.setup.count) {
      return Status::Error("collective negotiation: the job's ranks disagree on the allreduce's "
                           "size: rank 0 has " + std::to_string(out.setup.count) + " floats, rank " +
                           std::to_string(r) + " " + std::to_string(count));
    }
    auto [it, fresh] = proxies.try_emplace(n);
    if (fresh) {
      order.push_back(n);
      it->second.uuid = uuid;
    } else if (it->second.uuid != uuid) {
      return Status::Error("collective negotiation: one proxy offered two devices");
    }
    it->second.across = it->second.across && v[kAcross] == 1;
    it->second.ranks.push_back(r);
  }
  auto mine = std::find(order.begin(), order.end(), nonce);
  if (mine == order.end()) {
    return Status::Error("collective negotiation: this proxy's offer is not in the sum");
  }
  out.setup.world = world;
  out.setup.device_rank = static_cast<int>(mine - order.begin());
  for (std::uint64_t n : order) out.setup.ranks_by_device.push_back(proxies[n].ranks);
  for (std::size_t d = 0; d < order.size() && out.why.empty(); ++d) {
    const Proxy& p = proxies[order[d]];
    if (!p.across) {
      out.why = "the proxy of rank " + std::to_string(p.ranks.front()) +
                " cannot join an allreduce across devices (host backend, or no NCCL)";
    }
    for (std::size_t e = 0; e < d && out.why.empty(); ++e) {
      if (proxies[order[e]].uuid == p.uuid) {
        out.why = "ranks " + std::to_string(proxies[order[e]].ranks.front()) + " and " +
                  std::to_string(p.ranks.front()) + " are on one GPU (" + uuid_text(p.uuid) +
                  ") in two proxies";
      }
    }
  }
  out.on_device = out.why.empty();
  return out;
}

std::uint64_t id_floats() { return kIdBytes + 1; }

// [present, id bytes]: present tells "rank 0's holder had no id" from an id of zeros.
std::vector<float> id_offer(int rank, const CollectiveId* id) {
  std::vector<float> v(id_floats(), 0.0f);
  if (rank == 0 && id != nullptr) {
    v[0] = 1.0f;
    for (std::uint64_t i = 0; i < kIdBytes; ++i) v[1 + i] = static_cast<float>((*id)[i]);
  }
  return v;
}

Result<CollectiveId> decode_id(const float* sum) {
  unsigned char present = 0;
  if (!byte_at(sum, 0, &present) || present > 1) {
    return Status::Error("collective negotiation: the bootstrap id is malformed");
  }
  if (present == 0) {
    return Status::Error("collective negotiation: the proxy holding rank 0 could not make an NCCL "
                         "bootstrap id (its stderr says why)");
  }
  CollectiveId id{};
  for (std::uint64_t i = 0; i < kIdBytes; ++i) {
    if (!byte_at(sum, 1 + i, &id[i])) {
      return Status::Error("collective negotiation: the bootstrap id is malformed");
    }
  }
  return id;
}

}  // namespace orrery::runtime
