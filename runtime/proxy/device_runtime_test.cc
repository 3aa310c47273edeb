// End-to-end tests of the device side with real processes: orrery-proxy children, workers
// (the test process itself through the worker library, or orrery-train-mlp launched by the
// NodeRuntime), shared-memory rings and collectives, checkpoint shards on disk.
//
// ORRERY_TEST_BACKEND (default host; cuda in the fake CUDA build) picks the proxies' backend.
// ctest runs the suite twice: plainly, and as cuda.* with ORRERY_TEST_BACKEND=cuda (label gpu),
// which skips every test, saying why, where there is no usable GPU. On a GPU machine the same tests then check, on the
// device: pointers valid after a restore in a new proxy process, splicing, checkpoint round
// trips, a foreign handle refused, and final weights bit-identical to the host reference.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/bin_dir.h"
#include "runtime/common/loopback_port.h"
#include "runtime/node/node_runtime.h"
#include "runtime/proxy/address_space.h"
#include "runtime/proxy/rank_order_inputs.h"
#include "runtime/proxy/ring.h"
#include "runtime/proxy/shard.h"
#include "runtime/worker/worker.h"
#include "runtime/workloads/mlp_job.h"
#ifdef ORRERY_HAVE_CUDA
#include "runtime/proxy/cuda/cuda_backend.h"
#endif

namespace orrery::runtime {
namespace {

using Kind = JobEvent::Kind;

#ifndef ORRERY_TEST_BACKEND_DEFAULT
#define ORRERY_TEST_BACKEND_DEFAULT "host"
#endif

std::string test_backend() {
  const char* b = std::getenv("ORRERY_TEST_BACKEND");
  return b != nullptr && *b != '\0' ? b : ORRERY_TEST_BACKEND_DEFAULT;
}

// Skips the whole suite when the backend asked for cannot run here: prints why and exits 77,
// which ctest reports as Skipped (SKIP_RETURN_CODE), so a GPU suite that did not run never reads
// as passed. With fewer GPUs than a test node has devices, the node's devices share the GPUs
// (ORRERY_CUDA_DEVICES, orrery-proxy --help): splicing, restore and fencing are per proxy
// process, so sharing a GPU changes none of them.
class BackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (test_backend() == "host") return;
#ifdef ORRERY_HAVE_CUDA
    if (test_backend() != "cuda") skip("unknown ORRERY_TEST_BACKEND " + test_backend());
    if (auto s = cuda_device_usable(0); !s) skip(s.reason());
    int count = 1;
    while (cuda_device_usable(count).ok()) ++count;
    std::string map;
    for (int d = 0; d < 8; ++d) map += (d ? "," : "") + std::to_string(d % count);
    ::setenv("ORRERY_CUDA_DEVICES", map.c_str(), 1);
#else
    skip("backend " + test_backend() + " is not built here (no nvcc)");
#endif
  }

 private:
  [[noreturn]] static void skip(const std::string& why) {
    std::printf("SKIPPED: %s (GPU tests skipped)\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
};
const auto* const kBackendEnvironment =
    ::testing::AddGlobalTestEnvironment(new BackendEnvironment);

class Dir {
 public:
  Dir() {
    std::string t = "/tmp/orrery_device_test.XXXXXX";
    path_ = ::mkdtemp(t.data());
  }
  ~Dir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string unique(const std::string& what) {
  static int n = 0;
  return "/orrery-t-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

// One orrery-proxy child, killed when the test ends.
class ProxyChild {
 public:
  ProxyChild(const std::string& shm, const std::string& ckpt, int device = 0) : shm_(shm) {
    const std::string bin = orrery::bin_dir(ORRERY_BIN_DIR) + "/orrery-proxy";
    std::vector<std::string> args = {bin, "--shm", shm, "--device", std::to_string(device),
                                     "--mem-mib", "64",
                                     "--ckpt-dir", ckpt, "--backend", test_backend()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    for (int i = 0; i < 4000; ++i) {  // 20 s: a CUDA context on a shared GPU takes a while
      auto m = ShmMapping::open(shm, sizeof(ProxySegment));
      if (m.ok() && static_cast<ProxySegment*>(m->data())->header.ready.load() == 1) {
        map_ = std::move(m.value());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "proxy not ready";
  }
  ~ProxyChild() {
    ::kill(pid_, SIGTERM);
    int st;
    ::waitpid(pid_, &st, 0);
    ::shm_unlink(shm_.c_str());
  }
  ProxySegment* seg() const { return static_cast<ProxySegment*>(map_.data()); }
  // What the node runtime does: a command on the proxy's command ring.
  void command(const Command& c) {
    ProxyHeader& h = seg()->header;
    const std::uint32_t head = h.cmd_head.load();
    h.cmds[head % kCommandDepth] = c;
    h.cmd_head.store(head + 1);
    h.doorbell.fetch_add(1);
    futex_wake(&h.doorbell);
  }

 private:
  std::string shm_;
  pid_t pid_ = -1;
  ShmMapping map_;
};

WorkerEnv env_for(const std::string& proxy, int job, int rank, int world, std::int64_t restore = -1) {
  WorkerEnv e;
  e.proxy = proxy;
  e.collective = unique("coll");
  e.job = job;
  e.epoch = 1;
  e.rank = rank;
  e.world = world;
  e.restore_step = restore;
  return e;
}

TEST(DeviceProxy, RingRoundTripMovesBytesBothWays) {
  Dir dir;
  const std::string shm = unique("ring");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  auto w = Worker::connect(env_for(shm, 3, 0, 1));
  ASSERT_TRUE(w.ok()) << w.reason();
  // 3.5 MiB: more than the ring's 1 MiB data area, so copies travel in several requests.
  const std::size_t n = 3 * kDataBytes + kDataBytes / 2;
  auto p = (*w)->alloc(n);
  ASSERT_TRUE(p.ok()) << p.reason();
  EXPECT_EQ(*p, job_window(3));  // the first allocation of the job sits at its window's base
  std::vector<unsigned char> out(n), back(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(i * 7 + (i >> 12));
  ASSERT_TRUE((*w)->copy_h2d(*p, out.data(), n).ok());
  ASSERT_TRUE((*w)->copy_d2h(back.data(), *p, n).ok());
  EXPECT_EQ(out, back);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE((*w)->nop().ok());
  auto q = (*w)->alloc(100);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, job_window(3) + round_granule(n));  // a function of the allocation sequence
}

TEST(DeviceProxy, QueuedLaunchesRunInOrderAndTheirErrorIsReportedOnce) {
  Dir dir;
  const std::string shm = unique("async");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  auto w = Worker::connect(env_for(shm, 71, 0, 1));
  ASSERT_TRUE(w.ok());
  auto p = (*w)->alloc(16 * sizeof(float));
  ASSERT_TRUE(p.ok());
  for (int i = 0; i < 20; ++i) {
    const DevPtr target = i == 7 ? *p + (1 << 20) : *p;  // the 8th names memory it does not own
    ASSERT_TRUE((*w)->launch("fill", {target, 16, float_arg(static_cast<float>(i))}).ok());
  }
  float out[16] = {};
  Status s = (*w)->copy_d2h(out, *p, sizeof out);  // the first call that waits
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("argument 0"), std::string::npos) << s.reason();
  ASSERT_TRUE((*w)->copy_d2h(out, *p, sizeof out).ok());
  EXPECT_EQ(out[0], 19.f);  // every good launch ran, in order, the failed one changed nothing
  EXPECT_EQ(out[15], 19.f);
}

TEST(DeviceProxy, SlotsAreReusedAfterWorkersLeave) {
  Dir dir;
  const std::string shm = unique("slots");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  // More workers one after another than the segment has slots: closed slots are taken again,
  // and each newcomer starts from clean rings and its job's window base.
  for (int i = 0; i < kMaxWorkers + 8; ++i) {
    WorkerEnv e = env_for(shm, 50 + i, 0, 1);
    auto w = Worker::connect(e);
    ASSERT_TRUE(w.ok()) << i << ": " << w.reason();
    auto p = (*w)->alloc(1000);
    ASSERT_TRUE(p.ok()) << p.reason();
    EXPECT_EQ(*p, job_window(50 + i));
  }
  auto mem = Worker::connect(env_for(shm, 99, 0, 1));
  ASSERT_TRUE(mem.ok());
  auto info = (*mem)->mem_info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->first, 64ull << 20);
  EXPECT_EQ(info->second, 0u);  // every departed worker's memory was freed
}

TEST(DeviceProxy, ForeignHandleIsRefusedNeverDereferenced) {
  Dir dir;
  const std::string shm = unique("foreign");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  auto a = Worker::connect(env_for(shm, 11, 0, 1));
  auto b = Worker::connect(env_for(shm, 12, 0, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  auto pa = (*a)->alloc(4096);
  auto pb = (*b)->alloc(4096);
  ASSERT_TRUE(pa.ok() && pb.ok());
  const float secret[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*a)->copy_h2d(*pa, secret, sizeof secret).ok());
  float stolen[4] = {};
  Status s = (*b)->copy_d2h(stolen, *pa, sizeof stolen);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("not within an allocation of job 12"), std::string::npos) << s.reason();
  // Launches are asynchronous: the refusal comes back with the next call that waits.
  ASSERT_TRUE((*b)->launch("fill", {*pa, 4, float_arg(0.f)}).ok());
  s = (*b)->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("argument 0"), std::string::npos) << s.reason();
  EXPECT_TRUE((*b)->synchronize().ok());  // reported once
  EXPECT_FALSE((*b)->copy_d2d(*pb, *pa, 16).ok());
  EXPECT_FALSE((*b)->free(*pa).ok());
  // Its own buffer, but reaching past its end, is refused too.
  (void)(*b)->launch("fill", {*pb, 1u << 20, float_arg(0.f)});
  EXPECT_FALSE((*b)->synchronize().ok());
  // Its own buffer at a misaligned address: refused on every backend (on a GPU the fault would
  // poison the device context for every job), and the proxy serves on.
  (void)(*b)->launch("fill", {*pb + 2, 1, float_arg(0.f)});
  s = (*b)->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("not aligned to 4 bytes"), std::string::npos) << s.reason();
  ASSERT_TRUE((*b)->launch("fill", {*pb + 4, 1, float_arg(0.f)}).ok());
  EXPECT_TRUE((*b)->synchronize().ok());
  float check[4] = {};
  ASSERT_TRUE((*a)->copy_d2h(check, *pa, sizeof check).ok());
  EXPECT_EQ(std::memcmp(check, secret, sizeof secret), 0);
}

TEST(DeviceProxy, RestoreOnAnotherProxyKeepsAddressesContentsAndHostState) {
  Dir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const int job = 21;
  DevPtr a = 0, b = 0;
  std::vector<float> pa(50'000), pb(1000);
  for (std::size_t i = 0; i < pa.size(); ++i) pa[i] = static_cast<float>(i) * 0.5f;
  for (std::size_t i = 0; i < pb.size(); ++i) pb[i] = static_cast<float>(i) + 0.25f;
  {
    const std::string shm = unique("ckpt-a");
    ProxyChild proxy(shm, ckpt);
    auto w = Worker::connect(env_for(shm, job, 0, 1));
    ASSERT_TRUE(w.ok()) << w.reason();
    a = *(*w)->alloc(pa.size() * 4);
    b = *(*w)->alloc(pb.size() * 4);
    ASSERT_TRUE((*w)->copy_h2d(a, pa.data(), pa.size() * 4).ok());
    ASSERT_TRUE((*w)->copy_h2d(b, pb.data(), pb.size() * 4).ok());
    std::int64_t state = 777;
    ASSERT_TRUE((*w)->register_host_state(&state, sizeof state).ok());
    proxy.command(Command{CommandKind::kCheckpoint, job, 1, -1, 0});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto flags = (*w)->allreduce(b, pb.size(), 0);
    ASSERT_TRUE(flags.ok()) << flags.reason();
    EXPECT_EQ(*flags & kFlagCheckpoint, kFlagCheckpoint);
    auto bd = (*w)->step_boundary(1);
    ASSERT_TRUE(bd.ok()) << bd.reason();
    EXPECT_TRUE(bd->checkpointed);
    EXPECT_FALSE(bd->stop);
  }
  ASSERT_TRUE(std::filesystem::exists(shard_file(ckpt, job, 1, 0)));
  const std::string shm = unique("ckpt-b");
  ProxyChild other(shm, ckpt);  // another device (another process)
  auto w = Worker::connect(env_for(shm, job, 0, 1, 1));
  ASSERT_TRUE(w.ok()) << w.reason();
  ASSERT_TRUE((*w)->restored());
  EXPECT_EQ((*w)->restored_step(), 1);
  EXPECT_EQ(*(*w)->alloc(pa.size() * 4), a);
  EXPECT_EQ(*(*w)->alloc(pb.size() * 4), b);
  std::int64_t state = 0;
  ASSERT_TRUE((*w)->register_host_state(&state, sizeof state).ok());
  EXPECT_EQ(state, 777);
  std::vector<float> qa(pa.size()), qb(pb.size());
  ASSERT_TRUE((*w)->copy_d2h(qa.data(), a, qa.size() * 4).ok());
  ASSERT_TRUE((*w)->copy_d2h(qb.data(), b, qb.size() * 4).ok());
  EXPECT_EQ(qa, pa);
  EXPECT_EQ(qb, pb);  // allreduce over one rank leaves it as it was
  // A later allocation continues after the restored ones.
  EXPECT_EQ(*(*w)->alloc(10), b + round_granule(pb.size() * 4));
}

// Two ranks of one job spliced on one 64 MiB device, each using 40 MiB at the same addresses:
// each sees the whole device while it runs, and its bytes survive the other's turns.
TEST(DeviceProxy, SplicedRanksEachSeeTheWholeDevice) {
  Dir dir;
  const std::string shm = unique("splice");
  ProxyChild proxy(shm, dir.path() + "/ckpt");  // --mem-mib 64
  const std::string coll = unique("coll");
  const std::uint64_t big = 40ull << 20;
  DevPtr addr[2] = {0, 0};
  bool intact[2] = {false, false};
  float sums[2] = {0, 0};
  std::string errors[2];
  auto rank_main = [&](int rank) {
    WorkerEnv e = env_for(shm, 41, rank, 2);
    e.collective = coll;
    e.splice = {0, 1};
    auto w = Worker::connect(e);
    if (!w) return void(errors[rank] = w.reason());
    auto p = (*w)->alloc(big);
    auto g = (*w)->alloc(4 * sizeof(float));
    if (!p || !g) return void(errors[rank] = "alloc failed");
    addr[rank] = *p;
    const std::vector<unsigned char> mine(big, static_cast<unsigned char>(0xa0 + rank));
    if (!(*w)->copy_h2d(*p, mine.data(), big)) return void(errors[rank] = "h2d");
    const float grad[4] = {static_cast<float>(rank + 1), 0, 0, 0};
    (void)(*w)->copy_h2d(*g, grad, sizeof grad);
    for (int step = 0; step < 3; ++step) {  // three safe points: the ranks take turns
      if (!(*w)->allreduce(*g, 4, step)) return void(errors[rank] = "allreduce");
    }
    float out[4];
    (void)(*w)->copy_d2h(out, *g, sizeof out);
    sums[rank] = out[0];
    std::vector<unsigned char> back(big);
    (void)(*w)->copy_d2h(back.data(), *p, big);
    intact[rank] = back == mine;
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_EQ(addr[0], addr[1]);  // the same device addresses
  EXPECT_TRUE(intact[0]);
  EXPECT_TRUE(intact[1]);
  // (1 + 2) = 3, then 3 + 3 = 6, then 12: each step sums both ranks' buffers in rank order.
  EXPECT_EQ(sums[0], 12.f);
  EXPECT_EQ(sums[1], 12.f);
}

// Two proxies summing on their devices (the cuda backend on distinct GPUs: over NCCL), and one
// of them failing its part of a step (here: its rank's allreduce changes size, which the device
// path refuses): both ranks get an error for that step, neither waits for ever. The host
// collectives have no such failure, so this runs where the job's allreduce is on the devices:
// the fake CUDA build (each proxy process is a GPU of its own) or two distinct GPUs.
TEST(DeviceProxy, AProxyFailingItsPartOfTheDeviceAllreduceFailsTheStepOnEveryProxy) {
  if (test_backend() != "cuda") GTEST_SKIP() << "the host backend sums on the host";
#ifndef ORRERY_FAKE_CUDA
  const char* map = std::getenv("ORRERY_CUDA_DEVICES");
  if (map == nullptr || std::string(map).rfind("0,1", 0) != 0) {
    GTEST_SKIP() << "needs node devices 0 and 1 on two GPUs (ORRERY_CUDA_DEVICES=" <<
                 (map != nullptr ? map : "") << ")";
  }
#endif
  Dir dir;
  const std::string shm[2] = {unique("fail0"), unique("fail1")};
  ProxyChild p0(shm[0], dir.path() + "/ckpt", 0), p1(shm[1], dir.path() + "/ckpt", 1);
  const std::string coll = unique("coll");
  std::string first[2], second[2];
  auto rank_main = [&](int rank) {
    WorkerEnv e = env_for(shm[rank], 43, rank, 2);
    e.collective = coll;
    auto w = Worker::connect(e);
    if (!w) return void(first[rank] = w.reason());
    auto g = (*w)->alloc(64 * sizeof(float));
    if (!g) return void(first[rank] = g.reason());
    const std::vector<float> grad(64, static_cast<float>(rank + 1));
    (void)(*w)->copy_h2d(*g, grad.data(), grad.size() * sizeof(float));
    auto a = (*w)->allreduce(*g, 64, 0);
    first[rank] = a ? "ok" : a.reason();
    auto b = (*w)->allreduce(*g, rank == 0 ? 63 : 64, 1);
    second[rank] = b ? "ok" : b.reason();
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(first[0], "ok");
  EXPECT_EQ(first[1], "ok");
  EXPECT_NE(second[0].find("63 floats, but this job's allreduce on the device has 64"),
            std::string::npos) << second[0];
  EXPECT_NE(second[1].find("another proxy of the job failed its part"), std::string::npos)
      << second[1];
}

// allreduce_host across machines (two proxies, the TCP collective): gradients in the worker's
// reduce buffer (host_buffer) are summed where they lie, at its start or at an offset into it;
// a buffer of the worker's own goes through the bulk window. Every result is the rank-order sum
// bit for bit, and large copies staged through the bulk window never touch the reduce buffer.
TEST(DeviceProxy, HostAllreduceAcrossMachinesSumsTheReduceBufferWhereItLies) {
  Dir dir;
  const std::string shm[2] = {unique("hb0"), unique("hb1")};
  ProxyChild p0(shm[0], dir.path() + "/ckpt", 0), p1(shm[1], dir.path() + "/ckpt", 1);
  LoopbackPort port;
  const std::string coll = "tcp://127.0.0.1:" + std::to_string(port.port()) + "/hb";
  const std::uint64_t n = 1'000'003, at = 4099;  // many chunks, a ragged last one
  std::string why[2];
  auto rank_main = [&](int rank) {
    auto fail = [&](const std::string& w) { why[rank] = w; };
    WorkerEnv e = env_for(shm[rank], 44, rank, 2);
    e.collective = coll;
    auto w = Worker::connect(e);
    if (!w) return fail(w.reason());
    auto dev = (*w)->alloc(8 << 20);
    if (!dev) return fail(dev.reason());
    auto hb = (*w)->host_buffer(n + at);
    if (!hb) return fail(hb.reason());
    std::vector<unsigned char> big(8 << 20, static_cast<unsigned char>(rank + 1));
    std::vector<float> own(n);
    for (std::int64_t step = 0; step < 4; ++step) {
      const auto x = testing::inputs(2, n, static_cast<unsigned>(10 + step));
      const auto want = testing::rank_order_sum(x);
      // Steps 0 and 3 at the buffer's start, 1 at an offset into it, 2 in a buffer of our own.
      float* data = step == 2 ? own.data() : *hb + (step == 1 ? at : 0);
      std::memcpy(data, x[rank].data(), n * sizeof(float));
      auto f = (*w)->allreduce_host(data, n, step);
      if (!f) return fail("step " + std::to_string(step) + ": " + f.reason());
      // 8 MiB through the bulk window, both ways: the sum in the reduce buffer stays.
      if (auto st = (*w)->copy_h2d(*dev, big.data(), big.size()); !st) return fail(st.reason());
      if (auto st = (*w)->copy_d2h(big.data(), *dev, big.size()); !st) return fail(st.reason());
      if (std::memcmp(data, want.data(), n * sizeof(float)) != 0) {
        return fail("step " + std::to_string(step) + ": not the rank-order sum");
      }
      if (auto b = (*w)->step_boundary(step + 1); !b) return fail(b.reason());
    }
    why[rank] = "ok";
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(why[0], "ok");
  EXPECT_EQ(why[1], "ok");
}

// A worker sending thousands of random requests (sizes, addresses near and inside its window and
// a neighbour's, kernels with random arguments) gets errors, not a crashed proxy, and never
// reaches the other job's bytes.
TEST(DeviceProxy, RandomRequestsNeitherCrashTheProxyNorReachAnotherJob) {
  Dir dir;
  const std::string shm = unique("random");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  auto victim = Worker::connect(env_for(shm, 61, 0, 1));
  auto noisy = Worker::connect(env_for(shm, 62, 0, 1));
  ASSERT_TRUE(victim.ok() && noisy.ok());
  auto vp = (*victim)->alloc(1 << 16);
  ASSERT_TRUE(vp.ok());
  std::vector<unsigned char> vbytes(1 << 16, 0x5c);
  ASSERT_TRUE((*victim)->copy_h2d(*vp, vbytes.data(), vbytes.size()).ok());

  std::uint64_t x = 0x1234567;
  auto rnd = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<DevPtr> mine;
  const std::uint64_t bases[] = {job_window(61), job_window(62), 0, ~0ull - 4096, 4096};
  auto any_addr = [&]() -> DevPtr {
    if (!mine.empty() && rnd() % 2 == 0) return mine[rnd() % mine.size()] + rnd() % 70000 - 1000;
    return bases[rnd() % 5] + rnd() % (1 << 20);
  };
  const auto& kernels = all_kernels();
  std::vector<unsigned char> buf(1 << 16);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    Status st;
    switch (rnd() % 7) {
      case 0: {
        auto p = (*noisy)->alloc(rnd() % 3 == 0 ? rnd() : rnd() % 200000);
        if (p) mine.push_back(*p);
        st = p.status();
        break;
      }
      case 1: st = (*noisy)->free(any_addr()); break;
      case 2: st = (*noisy)->copy_h2d(any_addr(), buf.data(), rnd() % buf.size()); break;
      case 3: st = (*noisy)->copy_d2h(buf.data(), any_addr(), rnd() % buf.size()); break;
      case 4: st = (*noisy)->copy_d2d(any_addr(), any_addr(), rnd() % 100000); break;
      default: {
        const KernelDef& k = kernels[rnd() % kernels.size()];
        std::uint64_t a[16];
        for (int j = 0; j < 16; ++j) a[j] = rnd() % 3 == 0 ? any_addr() : rnd() % 64;
        // Launch with the kernel's own argument count (a wrong count is refused too).
        switch (k.nargs) {
          case 3: st = (*noisy)->launch(k.name, {a[0], a[1], a[2]}); break;
          case 4: st = (*noisy)->launch(k.name, {a[0], a[1], a[2], a[3]}); break;
          case 5: st = (*noisy)->launch(k.name, {a[0], a[1], a[2], a[3], a[4]}); break;
          case 8: st = (*noisy)->launch(k.name, {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]}); break;
          default: st = (*noisy)->launch(k.name, {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]}); break;
        }
        break;
      }
    }
    refused += st.ok() ? 0 : 1;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_TRUE((*noisy)->nop().ok());  // still served
  std::vector<unsigned char> back(vbytes.size());
  ASSERT_TRUE((*victim)->copy_d2h(back.data(), *vp, back.size()).ok());
  EXPECT_EQ(back, vbytes);
}

TEST(DeviceProxy, OlderEpochIsFenced) {
  Dir dir;
  const std::string shm = unique("fence");
  ProxyChild proxy(shm, dir.path() + "/ckpt");
  WorkerEnv newer = env_for(shm, 31, 0, 1);
  newer.epoch = 5;
  auto w = Worker::connect(newer);
  ASSERT_TRUE(w.ok()) << w.reason();
  WorkerEnv older = env_for(shm, 31, 0, 1);
  older.epoch = 4;
  auto stale = Worker::connect(older);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.reason().find("fenced"), std::string::npos) << stale.reason();
  // The newer incarnation is untouched.
  EXPECT_TRUE((*w)->alloc(64).ok());
}

TEST(DeviceWorkerEnvironment, MissingOrBadVariablesAreNamed) {
  for (const char* v : {"ORRERY_PROXY", "ORRERY_COLLECTIVE", "ORRERY_JOB", "ORRERY_EPOCH",
                        "ORRERY_RANK", "ORRERY_WORLD", "ORRERY_SPLICE", "ORRERY_RESTORE_STEP"}) {
    ::unsetenv(v);
  }
  auto e = worker_env_from_environment();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.reason().find("ORRERY_PROXY"), std::string::npos);
  ::setenv("ORRERY_PROXY", "/p", 1);
  ::setenv("ORRERY_COLLECTIVE", "/c", 1);
  ::setenv("ORRERY_JOB", "4", 1);
  ::setenv("ORRERY_EPOCH", "2", 1);
  ::setenv("ORRERY_RANK", "x1", 1);
  ::setenv("ORRERY_WORLD", "2", 1);
  e = worker_env_from_environment();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.reason().find("ORRERY_RANK=x1 is not an integer"), std::string::npos) << e.reason();
  ::setenv("ORRERY_RANK", "2", 1);
  e = worker_env_from_environment();
  ASSERT_FALSE(e.ok());  // rank 2 of a world of 2
  ::setenv("ORRERY_RANK", "1", 1);
  ::setenv("ORRERY_SPLICE", "0,1", 1);
  e = worker_env_from_environment();
  ASSERT_TRUE(e.ok()) << e.reason();
  EXPECT_EQ(e->restore_step, -1);
  EXPECT_EQ(e->splice, (std::vector<int>{0, 1}));
  auto w = Worker::connect(*e);  // no proxy by that name
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.reason().find("cannot reach the proxy"), std::string::npos) << w.reason();
}

TEST(DeviceMlpArguments, BadArgumentsAreNamed) {
  auto c = parse_mlp_args({"--steps=0"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.reason().find("--steps"), std::string::npos);
  EXPECT_FALSE(parse_mlp_args({"--lr=-1"}).ok());
  EXPECT_FALSE(parse_mlp_args({"--hidden=abc"}).ok());
  EXPECT_FALSE(parse_mlp_args({"--bogus"}).ok());
  EXPECT_FALSE(parse_mlp_args({"--din=4096", "--hidden=8192"}).ok());  // too large a model
  auto ok = parse_mlp_args({"--steps=7", "--seed=3", "--reference", "--world=3"});
  ASSERT_TRUE(ok.ok()) << ok.reason();
  EXPECT_EQ(ok->steps, 7);
  EXPECT_TRUE(ok->reference);
  // The reference is a pure function of its configuration.
  EXPECT_EQ(run_mlp_reference(*ok).digest, run_mlp_reference(*ok).digest);
  auto other = *ok;
  other.world = 2;
  EXPECT_NE(run_mlp_reference(*ok).digest, run_mlp_reference(other).digest);
}

// ---- through the NodeRuntime, with orrery-train-mlp workers ----

const std::vector<std::string> kArgs = {"--steps=24", "--batch=16", "--din=16", "--hidden=32",
                                        "--dout=4", "--seed=5"};

std::string reference_digest(int world) {
  std::vector<std::string> a = kArgs;
  auto cfg = parse_mlp_args(a);
  EXPECT_TRUE(cfg.ok());
  cfg->world = world;
  char b[32];
  std::snprintf(b, sizeof b, "digest=%016llx",
                static_cast<unsigned long long>(run_mlp_reference(*cfg).digest));
  return b;
}

// A node runtime of `devices` 64 MiB devices on `dir`: node `name`, the suite's backend unless
// another is named.
std::unique_ptr<NodeRuntime> start(const Dir& dir, int devices, const std::string& name = "test",
                                   const std::string& backend = test_backend()) {
  NodeRuntimeOptions o;
  o.node_name = name;
  o.devices = devices;
  o.device_mem_mib = 64;
  o.backend = backend;
  o.data_dir = dir.path();
  o.bin_dir = orrery::bin_dir(ORRERY_BIN_DIR);
  auto rt = start_node_runtime(o);
  EXPECT_TRUE(rt.ok()) << rt.reason();
  return rt.ok() ? std::move(rt.value()) : nullptr;
}

// Polls until an event of `kind` for `job` (or a crash), at most `seconds`.
std::vector<JobEvent> wait_for(NodeRuntime& rt, int job, Kind kind, double seconds = 30) {
  std::vector<JobEvent> seen;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    for (auto& e : rt.poll()) {
      seen.push_back(e);
      if (e.job == job && (e.kind == kind || e.kind == Kind::kCrashed)) return seen;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ADD_FAILURE() << "no event of kind " << static_cast<int>(kind) << " for job " << job;
  return seen;
}

const JobEvent* find(const std::vector<JobEvent>& ev, Kind k) {
  for (const auto& e : ev) {
    if (e.kind == k) return &e;
  }
  return nullptr;
}

LaunchSpec spec(int job, std::int64_t epoch, int world, std::vector<LocalPlacement> local,
                std::vector<std::string> extra = {}) {
  LaunchSpec s;
  s.job = job;
  s.epoch = epoch;
  s.world = world;
  s.local = std::move(local);
  s.command = {"orrery-train-mlp"};
  for (auto& a : kArgs) s.command.push_back(a);
  for (auto& e : extra) s.command.push_back(e);
  s.collective = unique("coll");
  return s;
}

TEST(NodeRuntime, SplicedRunsGiveTheUnsplicedAndReferenceDigest) {
  Dir dir;
  auto rt = start(dir, 4);
  ASSERT_TRUE(rt);
  const std::string ref = reference_digest(4);
  const std::vector<std::vector<LocalPlacement>> placements = {
      {{0, {0}}, {1, {1}}, {2, {2}}, {3, {3}}},  // unspliced
      {{0, {0, 1}}, {1, {2, 3}}},                // W=4 on 2 devices
      {{2, {0, 1, 2, 3}}},                       // W=4 on 1 device
      {{1, {3, 0}}, {3, {2, 1}}},                // other devices, other orders
  };
  int job = 100;
  for (const auto& pl : placements) {
    ++job;
    ASSERT_TRUE(rt->launch(spec(job, 1, 4, pl)).ok());
    auto ev = wait_for(*rt, job, Kind::kCompleted);
    ASSERT_EQ(ev.back().kind, Kind::kCompleted) << ev.back().detail;
    EXPECT_NE(ev.back().detail.find(ref), std::string::npos)
        << "placement " << job - 100 << ": " << ev.back().detail << " vs " << ref;
    EXPECT_EQ(ev.back().step, 24);
    EXPECT_NE(find(ev, Kind::kStarted), nullptr);
    EXPECT_NE(find(ev, Kind::kProgress), nullptr);
  }
  EXPECT_TRUE(rt->running().empty());
}

TEST(NodeRuntime, CheckpointThenRestoreOnOtherDevicesGivesTheSameDigest) {
  Dir dir;
  auto rt = start(dir, 4);
  ASSERT_TRUE(rt);
  const int job = 200;
  ASSERT_TRUE(rt->launch(spec(job, 1, 4, {{0, {0, 1}}, {1, {2, 3}}}, {"--step-delay-us=5000"})).ok());
  auto ev = wait_for(*rt, job, Kind::kProgress);
  ASSERT_EQ(ev.back().kind, Kind::kProgress);
  ASSERT_TRUE(rt->checkpoint(job, 1, -1, true).ok());
  ev = wait_for(*rt, job, Kind::kStopped);
  ASSERT_EQ(ev.back().kind, Kind::kStopped) << ev.back().detail;
  const JobEvent* ck = find(ev, Kind::kCheckpointed);
  ASSERT_NE(ck, nullptr);
  const std::int64_t step = ck->step;
  ASSERT_GT(step, 0);
  ASSERT_LT(step, 24);
  for (int r = 0; r < 4; ++r) {
    auto rd = ShardReader::open(rt->shard_path(job, step, r));
    ASSERT_TRUE(rd.ok()) << rd.reason();
    EXPECT_EQ(rd->meta().allocs.front().addr, job_window(job));  // stable addresses
  }
  // Fencing: the old incarnation can no longer be launched, checkpointed or stopped.
  EXPECT_FALSE(rt->checkpoint(job, 0, -1, false).ok());
  LaunchSpec again = spec(job, 2, 4, {{3, {0}}, {2, {1}}, {1, {2}}, {0, {3}}});
  again.restore_step = step;
  ASSERT_TRUE(rt->launch(again).ok());
  EXPECT_FALSE(rt->launch(spec(job, 1, 4, {{0, {0, 1, 2, 3}}})).ok());
  ev = wait_for(*rt, job, Kind::kCompleted);
  ASSERT_EQ(ev.back().kind, Kind::kCompleted) << ev.back().detail;
  EXPECT_NE(ev.back().detail.find(reference_digest(4)), std::string::npos) << ev.back().detail;
  EXPECT_NE(ev.back().detail.find("restored_from=" + std::to_string(step)), std::string::npos);
}

// Two node runtimes on one machine meet in the shared-memory collective named by the spec.
TEST(NodeRuntime, TwoNodesOnOneMachineShareTheShmCollective) {
  Dir da, db;
  auto a = start(da, 1);
  // Always the host backend: in the cuda suite this job mixes backends, and its proxies must
  // agree to sum on the host (collective_negotiation.h).
  auto b = start(db, 1, "second", "host");
  ASSERT_TRUE(a && b);
  const int job = 550;
  LaunchSpec sa = spec(job, 1, 3, {{0, {0, 2}}});
  LaunchSpec sb = sa;  // the same collective name
  sb.local = {{0, {1}}};
  ASSERT_TRUE(a->launch(sa).ok());
  ASSERT_TRUE(b->launch(sb).ok());
  auto ea = wait_for(*a, job, Kind::kCompleted);
  auto eb = wait_for(*b, job, Kind::kCompleted);
  ASSERT_EQ(ea.back().kind, Kind::kCompleted) << ea.back().detail;
  ASSERT_EQ(eb.back().kind, Kind::kCompleted) << eb.back().detail;
  const std::string ref = reference_digest(3);
  EXPECT_NE(ea.back().detail.find(ref), std::string::npos) << ea.back().detail;
  EXPECT_NE(eb.back().detail.find(ref), std::string::npos) << eb.back().detail;
}

// Two nodes (two NodeRuntimes, as two machines would run) and the TCP collective between them:
// the same digest as the reference.
TEST(NodeRuntime, TwoNodesOverTheTcpCollectiveGiveTheReferenceDigest) {
  Dir da, db;
  auto a = start(da, 1);
  auto b = start(db, 2, "other");  // cuda suite: the negotiation and NCCL bootstrap over TCP
  ASSERT_TRUE(a && b);
  LoopbackPort port;  // the rendezvous's (rank 0's node serves it)
  const int job = 500;
  LaunchSpec sa = spec(job, 1, 4, {{0, {0, 1}}});
  sa.collective = "tcp://127.0.0.1:" + std::to_string(port.port()) + "/j500-e1";
  LaunchSpec sb = sa;
  sb.local = {{0, {2}}, {1, {3}}};
  ASSERT_TRUE(b->launch(sb).ok());  // the far node first: it waits for the rendezvous
  ASSERT_TRUE(a->launch(sa).ok());
  auto ea = wait_for(*a, job, Kind::kCompleted);
  auto eb = wait_for(*b, job, Kind::kCompleted);
  ASSERT_EQ(ea.back().kind, Kind::kCompleted) << ea.back().detail;
  ASSERT_EQ(eb.back().kind, Kind::kCompleted) << eb.back().detail;
  const std::string ref = reference_digest(4);
  EXPECT_NE(ea.back().detail.find(ref), std::string::npos) << ea.back().detail;
  EXPECT_NE(eb.back().detail.find(ref), std::string::npos) << eb.back().detail;
  EXPECT_NE(eb.back().detail.find("rank=2"), std::string::npos);
}

// What made the TCP mesh hang once (an 8-rank job restored across two nodes, cli_e2e_local_cluster:
// 36bd75c): a job cut and restored across two nodes at steps > 0, again and again. Each
// incarnation is a new epoch with its own rendezvous (a port of its own, as the core derives one
// per epoch), its steps start at the restored step, its first allreduce negotiates there and
// sends host data two group steps on, its ranks are spread over other devices than before, and
// the proxies that served the previous incarnations live on. Shards are copied to the node that
// restores them, as the core's store would send them. Every incarnation must cut where asked and
// the last must finish with the reference digest, never hang.
TEST(NodeRuntime, RestoresAcrossTwoNodesAtLaterStepsOverTheTcpCollective) {
  Dir da, db;
  auto a = start(da, 4);
  auto b = start(db, 4, "restore-b");
  ASSERT_TRUE(a && b);
  NodeRuntime* rts[2] = {a.get(), b.get()};
  const int job = 800, world = 8;
  struct Incarnation {
    std::vector<LocalPlacement> local[2];  // node a's share, node b's
    std::int64_t cut;                      // cut there and stop; -1: run to the end
  };
  const std::vector<Incarnation> incs = {
      {{{{0, {0, 1}}, {1, {2, 3}}}, {{0, {4, 5}}, {1, {6, 7}}}}, 6},                  // blocks, spliced
      {{{{3, {0}}, {2, {3}}, {1, {4}}, {0, {6}}}, {{2, {1}}, {3, {2}}, {0, {5}}, {1, {7}}}}, 12},
      {{{{1, {0, 7}}}, {{2, {1, 2}}, {0, {3, 4}}, {3, {5, 6}}}}, 18},
      {{{{0, {1}}, {1, {2}}}, {{3, {0}}, {2, {3}}, {1, {4}}, {0, {5, 6, 7}}}}, -1},  // rank 0 on b
  };
  std::int64_t restore = -1;
  std::vector<int> holder(world, -1);  // which node has each rank's latest shard
  for (std::size_t e = 0; e < incs.size(); ++e) {
    const Incarnation& inc = incs[e];
    const std::int64_t epoch = static_cast<std::int64_t>(e) + 1;
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    LoopbackPort port;
    for (int n = 0; n < 2; ++n) {
      for (const auto& p : inc.local[n]) {
        for (int r : p.ranks) {
          if (restore < 0 || holder[r] == n) continue;
          const std::string from = rts[holder[r]]->shard_path(job, restore, r);
          const std::string to = rts[n]->shard_path(job, restore, r);
          std::filesystem::create_directories(std::filesystem::path(to).parent_path());
          std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
        }
      }
    }
    for (int n : {1, 0}) {  // the far node first
      LaunchSpec s = spec(job, epoch, world, inc.local[n], {"--step-delay-us=20000"});
      s.collective = "tcp://127.0.0.1:" + std::to_string(port.port()) + "/j800-e" + std::to_string(epoch);
      s.restore_step = restore;
      ASSERT_TRUE(rts[n]->launch(s).ok());
      if (inc.cut >= 0) {
        ASSERT_TRUE(rts[n]->checkpoint(job, epoch, inc.cut, true).ok());
      }
    }
    const Kind end = inc.cut >= 0 ? Kind::kStopped : Kind::kCompleted;
    for (int n = 0; n < 2; ++n) {
      auto ev = wait_for(*rts[n], job, end, 60);
      ASSERT_FALSE(ev.empty()) << "node " << n << ": no event at all (a hang)";
      ASSERT_EQ(ev.back().kind, end) << "node " << n << ": " << ev.back().detail;
      if (inc.cut >= 0) {
        const JobEvent* ck = find(ev, Kind::kCheckpointed);
        ASSERT_NE(ck, nullptr) << "node " << n;
        EXPECT_EQ(ck->step, inc.cut) << "node " << n;
      } else {
        EXPECT_NE(ev.back().detail.find(reference_digest(world)), std::string::npos)
            << "node " << n << ": " << ev.back().detail;
        EXPECT_NE(ev.back().detail.find("restored_from=" + std::to_string(restore)),
                  std::string::npos) << ev.back().detail;
      }
      for (const auto& p : inc.local[n]) {
        for (int r : p.ranks) holder[r] = n;
      }
    }
    restore = inc.cut;
  }
}

TEST(NodeRuntime, CheckpointAtAGivenStepAndGoOn) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  const int job = 600;
  // 20 ms a step: the request for step 20 must reach the workers before they pass it (with 5 ms,
  // 100 ms from Started, a loaded machine once missed it and the boundary was skipped).
  ASSERT_TRUE(rt->launch(spec(job, 1, 2, {{0, {1, 0}}}, {"--step-delay-us=20000"})).ok());
  auto ev = wait_for(*rt, job, Kind::kStarted);
  ASSERT_EQ(ev.back().kind, Kind::kStarted);
  ASSERT_TRUE(rt->checkpoint(job, 1, 20, false).ok());
  EXPECT_FALSE(rt->checkpoint(job, 1, 0, false).ok());  // a boundary that is never cut
  ev = wait_for(*rt, job, Kind::kCompleted);
  ASSERT_EQ(ev.back().kind, Kind::kCompleted) << ev.back().detail;
  const JobEvent* ck = find(ev, Kind::kCheckpointed);
  ASSERT_NE(ck, nullptr);
  EXPECT_EQ(ck->step, 20);
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(std::filesystem::exists(rt->shard_path(job, 20, r)));
  EXPECT_FALSE(std::filesystem::exists(rt->shard_path(job, 21, 0)));
  EXPECT_NE(ev.back().detail.find(reference_digest(2)), std::string::npos) << ev.back().detail;
}

// The pid of this process's child whose command line contains `needle`.
pid_t find_child(const std::string& needle) {
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string comm, state;
    pid_t self = 0, ppid = 0;
    stat >> self >> comm >> state >> ppid;
    if (ppid != ::getpid()) continue;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
    std::string all((std::istreambuf_iterator<char>(cmd)), {});
    if (all.find(needle) != std::string::npos) found = pid;
  }
  ::closedir(d);
  return found;
}

TEST(NodeRuntime, DeadProxyIsReportedCrashedAndReplaced) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  const int job = 700;
  ASSERT_TRUE(rt->launch(spec(job, 1, 1, {{0, {0}}}, {"--step-delay-us=20000"})).ok());
  ASSERT_EQ(wait_for(*rt, job, Kind::kStarted).back().kind, Kind::kStarted);
  const pid_t proxy = find_child("orrery-proxy");
  ASSERT_GT(proxy, 0);
  ::kill(proxy, SIGKILL);
  auto ev = wait_for(*rt, job, Kind::kCrashed);
  ASSERT_EQ(ev.back().kind, Kind::kCrashed);
  EXPECT_NE(ev.back().detail.find("proxy of device 0"), std::string::npos) << ev.back().detail;
  EXPECT_TRUE(rt->running().empty());
  // A fresh proxy took the device over: the next incarnation runs there.
  ASSERT_TRUE(rt->launch(spec(job, 2, 1, {{0, {0}}})).ok());
  ev = wait_for(*rt, job, Kind::kCompleted);
  ASSERT_EQ(ev.back().kind, Kind::kCompleted) << ev.back().detail;
  EXPECT_NE(ev.back().detail.find(reference_digest(1)), std::string::npos) << ev.back().detail;
  EXPECT_NE(find_child("orrery-proxy"), proxy);
}

// The pid of a child of this process running orrery-train-mlp as `rank` of `job`.
pid_t find_worker(int job, int rank) {
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
    std::string all((std::istreambuf_iterator<char>(env)), {});
    if (all.find("ORRERY_JOB=" + std::to_string(job) + '\0') != std::string::npos &&
        all.find(std::string("ORRERY_RANK=") + std::to_string(rank) + '\0') != std::string::npos &&
        all.find("ORRERY_PROXY=/orrery-test-" + std::to_string(::getpid())) != std::string::npos) {
      found = pid;
    }
  }
  ::closedir(d);
  return found;
}

TEST(NodeRuntime, KilledWorkerIsReportedCrashed) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  const int job = 300;
  ASSERT_TRUE(rt->launch(spec(job, 1, 2, {{0, {0}}, {1, {1}}}, {"--step-delay-us=20000"})).ok());
  auto ev = wait_for(*rt, job, Kind::kStarted);
  ASSERT_EQ(ev.back().kind, Kind::kStarted);
  const pid_t victim = find_worker(job, 1);
  ASSERT_GT(victim, 0);
  ::kill(victim, SIGKILL);
  ev = wait_for(*rt, job, Kind::kCrashed);
  ASSERT_EQ(ev.back().kind, Kind::kCrashed);
  EXPECT_NE(ev.back().detail.find("rank 1"), std::string::npos) << ev.back().detail;
  EXPECT_NE(ev.back().detail.find("signal 9"), std::string::npos) << ev.back().detail;
  EXPECT_TRUE(rt->running().empty());
  // The devices are free again: a new incarnation runs to completion.
  ASSERT_TRUE(rt->launch(spec(job, 2, 2, {{1, {0, 1}}})).ok());
  ev = wait_for(*rt, job, Kind::kCompleted);
  EXPECT_EQ(ev.back().kind, Kind::kCompleted) << ev.back().detail;
}

TEST(NodeRuntime, CorruptShardIsAClearError) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  const int job = 400;
  ASSERT_TRUE(rt->launch(spec(job, 1, 1, {{0, {0}}}, {"--step-delay-us=5000"})).ok());
  wait_for(*rt, job, Kind::kProgress);
  ASSERT_TRUE(rt->checkpoint(job, 1, -1, true).ok());
  auto ev = wait_for(*rt, job, Kind::kStopped);
  const JobEvent* ck = find(ev, Kind::kCheckpointed);
  ASSERT_NE(ck, nullptr);
  const std::string shard = rt->shard_path(job, ck->step, 0);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x01');
  }
  LaunchSpec again = spec(job, 2, 1, {{0, {0}}});
  again.restore_step = ck->step;
  EXPECT_FALSE(rt->launch(spec(job, 1, 1, {{0, {0}}})).ok());  // fenced
  LaunchSpec missing = again;
  missing.restore_step = ck->step + 1000;
  EXPECT_FALSE(rt->launch(missing).ok());  // no shard: nothing starts
  ASSERT_TRUE(rt->launch(again).ok());
  ev = wait_for(*rt, job, Kind::kCrashed);
  ASSERT_EQ(ev.back().kind, Kind::kCrashed);
  EXPECT_NE(ev.back().detail.find("checksum mismatch"), std::string::npos) << ev.back().detail;
}

}  // namespace
}  // namespace orrery::runtime
