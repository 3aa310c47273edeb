// How the proxies of one job incarnation agree where its allreduce runs, before its first step.
// Each proxy knows only its own ranks and its own device, and a proxy that sums on the device
// while another sums on the host would compute garbage: so the decision is taken from data every
// proxy sees identically, the results of host allreduces (CollectiveGroup) at the two group
// steps before the first one.
//
// Round 1 (offers): each proxy contributes, for every rank it holds, a block: present, whether
// its backend can join an allreduce across devices (CUDA with NCCL loaded), a nonce naming the
// proxy, its device's UUID, and the allreduce's size (its first call's count; every proxy must
// agree, on any path). Every value is one byte carried in a float, and exactly one rank
// contributes non-zero to each float, so the rank-ordered sum is exact: each proxy decodes the
// same bytes and takes the same decision.
//
// The data goes over the devices (DeviceCollective) only when every proxy can, and no two
// proxies share a device (NCCL refuses one GPU twice in a communicator: e.g. test nodes with
// several logical devices on one GPU). Otherwise the whole job sums on the host, as before.
//
// Round 2 (only when on the devices): the proxy holding rank 0 contributes a fresh bootstrap id
// for the communicator (NCCL's ncclUniqueId), the same way. It is made only then: creating one
// starts NCCL's bootstrap root, a thread that waits for the ranks to connect, forever if none do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/device_collective.h"

namespace orrery::runtime {

// Floats one round-1 contribution has, for a job of `world` ranks.
std::uint64_t negotiation_floats(int world);

// What this proxy contributes for `rank` in round 1 (negotiation_floats(world) floats); `count`:
// the floats of the allreduce that opened the negotiation.
std::vector<float> negotiation_offer(int world, int rank, std::uint64_t nonce,
                                     const CollectiveOffer& offer, std::uint32_t count);

struct Negotiated {
  bool on_device = false;       // the data goes through a DeviceCollective
  std::string why;              // when not on the device: why
  DeviceCollectiveSetup setup;  // world, placement, count; the id comes in round 2
};

// Decodes the sum of every rank's offer. An error when it is not a sum of well-formed offers
// (a rank missing, a value that is not a byte) or the ranks' counts differ. Devices are numbered in the order of their
// lowest rank; `nonce` picks this proxy's.
Result<Negotiated> decode_negotiation(const float* sum, int world, std::uint64_t nonce);

// Round 2: floats of a contribution; what `rank` contributes (`id` given by the holder of rank 0,
// carried in rank 0's contribution only; nullptr when it could not make one); the id in the sum,
// or an error when rank 0's holder had none.
std::uint64_t id_floats();
std::vector<float> id_offer(int rank, const CollectiveId* id);
Result<CollectiveId> decode_id(const float* sum);

}  // namespace orrery::runtime
