// The collective negotiation (collective_negotiation.h) as the proxies run it: each proxy's
// offers for its ranks (round 1) and rank 0's bootstrap id (round 2), summed in rank order as the
// host group does, decoded by every proxy.
#include "runtime/proxy/collective_negotiation.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "runtime/proxy/kernels.h"

namespace orrery::runtime {
namespace {

struct Proxy {
  std::uint64_t nonce;
  CollectiveOffer offer;
  std::vector<int> ranks;
  std::uint32_t count = 70'000;
};

CollectiveOffer gpu(unsigned char tag, bool across = true) {
  CollectiveOffer o;
  o.across_devices = across;
  for (int i = 0; i < 16; ++i) o.uuid[i] = static_cast<unsigned char>(tag * 17 + i * 29);
  return o;
}

CollectiveId some_id() {
  CollectiveId id;
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(255 - i * 7);
  return id;
}

// The host group's result: the contributions of every rank, summed in rank order.
std::vector<float> rank_order_sum(const std::map<int, std::vector<float>>& by_rank) {
  std::vector<const float*> in;
  for (auto& [r, v] : by_rank) in.push_back(v.data());
  std::vector<float> sum(by_rank.begin()->second.size());
  sum_in_rank_order(in.data(), static_cast<int>(in.size()), sum.size(), sum.data());
  return sum;
}

std::vector<float> negotiate(const std::vector<Proxy>& proxies, int world) {
  std::map<int, std::vector<float>> by_rank;
  for (const Proxy& p : proxies) {
    for (int r : p.ranks) by_rank[r] = negotiation_offer(world, r, p.nonce, p.offer, p.count);
  }
  return rank_order_sum(by_rank);
}

// Round 2: rank 0's holder gives `id` (or none), every other rank contributes zeros.
std::vector<float> bootstrap(int world, const CollectiveId* id) {
  std::map<int, std::vector<float>> by_rank;
  for (int r = 0; r < world; ++r) by_rank[r] = id_offer(r, id);
  return rank_order_sum(by_rank);
}

TEST(CollectiveNegotiation, ProxiesOnDistinctGpusAgreeOnTheDevicesInTheirLowestRanksOrder) {
  // Splicing: proxy A holds ranks 1 and 3, B ranks 0 and 4, C rank 2.
  const std::vector<Proxy> proxies = {{0xa1a1a1a1a1a1a1a1ull, gpu(1), {1, 3}},
                                      {0x0000000000000b0bull, gpu(2), {4, 0}},
                                      {0xffffffffffffffffull, gpu(3), {2}}};
  const std::vector<float> sum = negotiate(proxies, 5);
  const std::vector<std::vector<int>> want = {{0, 4}, {1, 3}, {2}};
  for (std::size_t p = 0; p < proxies.size(); ++p) {
    auto n = decode_negotiation(sum.data(), 5, proxies[p].nonce);
    ASSERT_TRUE(n.ok()) << n.reason();
    EXPECT_TRUE(n->on_device) << n->why;
    EXPECT_EQ(n->setup.world, 5);
    EXPECT_EQ(n->setup.ranks_by_device, want);
    EXPECT_EQ(n->setup.device_rank, std::vector<int>({1, 0, 2})[p]);
    EXPECT_EQ(n->setup.count, 70'000u);
  }
}

TEST(CollectiveNegotiation, TheBootstrapIdArrivesExactlyOrItsAbsenceIsAnError) {
  const CollectiveId id = some_id();
  auto got = decode_id(bootstrap(5, &id).data());
  ASSERT_TRUE(got.ok()) << got.reason();
  EXPECT_EQ(got.value(), id);
  const CollectiveId zeros{};
  got = decode_id(bootstrap(2, &zeros).data());
  ASSERT_TRUE(got.ok()) << got.reason();
  EXPECT_EQ(got.value(), zeros);
  got = decode_id(bootstrap(3, nullptr).data());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.reason().find("could not make an NCCL bootstrap id"), std::string::npos)
      << got.reason();
  std::vector<float> bad = bootstrap(2, &id);
  bad[7] += 0.5f;
  EXPECT_FALSE(decode_id(bad.data()).ok());
}

TEST(CollectiveNegotiation, TwoProxiesOnOneGpuSendTheWholeJobToTheHost) {
  const std::vector<Proxy> proxies = {{11, gpu(7), {0}}, {12, gpu(7), {1}}, {13, gpu(8), {2}}};
  const std::vector<float> sum = negotiate(proxies, 3);
  for (const Proxy& p : proxies) {
    auto n = decode_negotiation(sum.data(), 3, p.nonce);
    ASSERT_TRUE(n.ok()) << n.reason();
    EXPECT_FALSE(n->on_device);
    EXPECT_NE(n->why.find("ranks 0 and 1 are on one GPU"), std::string::npos) << n->why;
  }
}

TEST(CollectiveNegotiation, OneProxyWithoutNcclSendsTheWholeJobToTheHost) {
  const std::vector<Proxy> proxies = {{21, gpu(1), {0}}, {22, gpu(2, false), {1}}};
  auto n = decode_negotiation(negotiate(proxies, 2).data(), 2, 21);
  ASSERT_TRUE(n.ok()) << n.reason();
  EXPECT_FALSE(n->on_device);
  EXPECT_NE(n->why.find("proxy of rank 1 cannot"), std::string::npos) << n->why;
  // The host backend offers nothing: all zeros but present.
  const std::vector<Proxy> host = {{31, CollectiveOffer{}, {0}}, {32, CollectiveOffer{}, {1}}};
  auto h = decode_negotiation(negotiate(host, 2).data(), 2, 32);
  ASSERT_TRUE(h.ok()) << h.reason();
  EXPECT_FALSE(h->on_device);
}

TEST(CollectiveNegotiation, MissingOrForeignOffersAreErrors) {
  // Rank 1 made no offer (a proxy of an older build contributing data, or nothing).
  std::map<int, std::vector<float>> only0;
  only0[0] = negotiation_offer(2, 0, 41, gpu(1), 8);
  only0[1] = std::vector<float>(negotiation_floats(2), 0.0f);
  std::vector<float> sum = rank_order_sum(only0);
  auto n = decode_negotiation(sum.data(), 2, 41);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.reason().find("rank 1 made no offer"), std::string::npos) << n.reason();
  // Gradients where an offer should be.
  sum = negotiate({{41, gpu(1), {0, 1}}}, 2);
  sum[3] = 0.5f;
  n = decode_negotiation(sum.data(), 2, 41);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.reason().find("rank 0's offer is malformed"), std::string::npos) << n.reason();
  // A proxy that is not in the sum.
  sum = negotiate({{41, gpu(1), {0, 1}}}, 2);
  n = decode_negotiation(sum.data(), 2, 42);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.reason().find("not in the sum"), std::string::npos) << n.reason();
  // Proxies whose first allreduce differs in size (any path would fail or hang on it).
  std::vector<Proxy> sizes = {{51, gpu(1), {0}}, {52, gpu(2), {1}}};
  sizes[1].count = 16'777'217;  // bytes 0x01000001: every byte carried
  n = decode_negotiation(negotiate(sizes, 2).data(), 2, 51);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.reason().find("rank 0 has 70000 floats, rank 1 16777217"), std::string::npos)
      << n.reason();
}

}  // namespace
}  // namespace orrery::runtime
