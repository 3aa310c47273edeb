// The fake NCCL (fake_nccl.cc) across real processes: each test makes a unique id, forks 2 or 3
// ranks that each use their own fake CUDA device (cudaMalloc, streams, copies) and the fake NCCL,
// and checks in the parent what every rank reported through a pipe and its exit status, then
// that nothing is left in the rendezvous directory once every rank destroyed its comm. NCCL calls
// only enqueue on the stream, as on a GPU: a rank synchronizes its stream before it reads what
// they received (download does), and failures found when an op ran are read from
// ncclCommGetAsyncError after that synchronization. Ranks run with the fake's eager progress off:
// data uploaded with cudaMemcpyAsync is still queued when an NCCL call is made, so an op that
// did not run after its stream's earlier ops would send the fake's 0xCD fill.
// Covered: grouped send/recv in both directions and around a ring (several messages between one
// pair, in order), ungrouped send/recv, nested groups, in-place AllGather with uneven sizes,
// AllReduce sum in rank order, Broadcast, a single-rank comm (ncclCommInitAll), two comms whose
// groups two processes issue in opposite orders (from one thread, and from a thread per comm),
// ops left queued by an abort, and the errors: receive size mismatch, bad peer, a group over two
// streams, inaccessible pointers, receive timeout, InitRank timeout with a rank missing, an id
// that does not fit.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/fake_cuda.h"

namespace {

// ---- in a rank: checks that report instead of asserting (the parent asserts) ------------------

std::string at(int line) { return "line " + std::to_string(line) + ": "; }

#define RANK_CHECK(cond)                                  \
  do {                                                    \
    if (!(cond)) return at(__LINE__) + "failed: " #cond; \
  } while (0)

#define RANK_CHECK_MSG(cond, msg)                                        \
  do {                                                                   \
    if (!(cond)) return at(__LINE__) + "failed: " #cond ": " + (msg);    \
  } while (0)

#define RANK_NCCL(expr)                                                                    \
  do {                                                                                     \
    const ncclResult_t r_ = (expr);                                                        \
    if (r_ != ncclSuccess) {                                                               \
      return at(__LINE__) + #expr + ": " + ncclGetErrorString(r_) + ": " +                 \
             ncclGetLastError(nullptr);                                                    \
    }                                                                                      \
  } while (0)

// expr must fail with `want`, and ncclGetLastError must then contain `text`.
#define RANK_NCCL_FAILS(expr, want, text)                                                    \
  do {                                                                                       \
    const ncclResult_t r_ = (expr);                                                          \
    if (r_ != (want)) {                                                                      \
      return at(__LINE__) + #expr + " returned " + ncclGetErrorString(r_) + ", want " +      \
             ncclGetErrorString(want);                                                       \
    }                                                                                        \
    const std::string m_ = ncclGetLastError(nullptr);                                        \
    if (m_.find(text) == std::string::npos) {                                                \
      return at(__LINE__) + #expr + ": last error '" + m_ + "' does not say '" + (text) + "'"; \
    }                                                                                        \
  } while (0)

#define RANK_CUDA(expr)                                                                  \
  do {                                                                                   \
    const cudaError_t e_ = (expr);                                                       \
    if (e_ != cudaSuccess) return at(__LINE__) + #expr + ": " + cudaGetErrorString(e_); \
  } while (0)

// Propagates a helper's report.
#define RANK_TRY(expr)                    \
  do {                                    \
    std::string s_ = (expr);              \
    if (!s_.empty()) return s_;           \
  } while (0)

struct Rank {
  int rank = 0, nranks = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::string dir;  // the id's directory
};

// A device buffer of n elements, filled (lazily: queued on the stream) from `host`, which must
// outlive the first synchronization of the stream.
template <class T>
std::string upload(T** d, const std::vector<T>& host, cudaStream_t s) {
  RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(d), host.size() * sizeof(T)));
  RANK_CUDA(cudaMemcpyAsync(*d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return "";
}

template <class T>
std::string download(std::vector<T>* out, const T* d, std::size_t n, cudaStream_t s) {
  out->assign(n, T{});
  RANK_CUDA(cudaMemcpyAsync(out->data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  RANK_CUDA(cudaStreamSynchronize(s));
  return "";
}

template <class T>
std::string same(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) {
    return std::string(what) + ": size " + std::to_string(got.size()) + " != " +
           std::to_string(want.size());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return std::string(what) + ": first difference at element " + std::to_string(i);
    }
  }
  return "";
}

std::vector<float> floats(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) * 0.25f;
  return v;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t pending_ops() { return fake_cuda_stats().pending_ops; }

// Entries under `dir`, recursively, relative to it.
std::vector<std::string> entries(const std::string& dir, const std::string& prefix = "") {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    out.push_back(prefix + name);
    struct stat st;
    if (::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      for (auto& s : entries(dir + "/" + name, prefix + name + "/")) out.push_back(s);
    }
  }
  ::closedir(d);
  return out;
}

void remove_tree(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      remove_tree(path);
    } else {
      ::unlink(path.c_str());
    }
  }
  ::closedir(d);
  ::rmdir(dir.c_str());
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ---- the parent ---------------------------------------------------------------------------------

struct Outcome {
  int status = -1;     // waitpid's
  std::string report;  // "" when every check held
};

constexpr int kDeadlineS = 60;

// Forks one process per rank running fn(rank); collects what each reported and how it ended.
// A rank still running after kDeadlineS is killed.
std::vector<Outcome> spawn(int n, const std::function<std::string(int)>& fn) {
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1);
  std::vector<Outcome> out(n);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      out[r].report = "pipe failed";
      continue;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string report;
      try {
        report = fn(r);
      } catch (const std::exception& e) {
        report = std::string("exception: ") + e.what();
      }
      if (report.size() > 4000) report.resize(4000);
      const ssize_t w = ::write(p[1], report.data(), report.size());
      (void)w;
      ::close(p[1]);
      ::_exit(report.empty() ? 0 : 1);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      out[r].report = "fork failed";
      continue;
    }
    pids[r] = pid;
    fds[r] = p[0];
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineS);
  for (int r = 0; r < n; ++r) {
    if (pids[r] < 0) continue;
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status, 0);
        out[r].report = "killed after " + std::to_string(kDeadlineS) + " s; ";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    out[r].status = status;
    char buf[4096];
    ssize_t got;
    while ((got = ::read(fds[r], buf, sizeof buf)) > 0) out[r].report.append(buf, got);
    ::close(fds[r]);
  }
  return out;
}

// Each rank's own setup around `body`: its stream, its comm (checked), and the teardown.
std::string rank_main(const ncclUniqueId& id, int nranks, int rank,
                      const std::function<std::string(Rank&)>& body) {
  fake_cuda_set_eager(0);
  if (std::getenv("FAKE_NCCL_TIMEOUT_S") == nullptr) ::setenv("FAKE_NCCL_TIMEOUT_S", "20", 1);
  Rank r;
  r.rank = rank;
  r.nranks = nranks;
  r.dir = id.internal;
  RANK_CUDA(cudaSetDevice(0));
  RANK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  RANK_NCCL(ncclCommInitRank(&r.comm, nranks, id, rank));
  int count = -1, user_rank = -1, device = -1;
  RANK_NCCL(ncclCommCount(r.comm, &count));
  RANK_NCCL(ncclCommUserRank(r.comm, &user_rank));
  RANK_NCCL(ncclCommCuDevice(r.comm, &device));
  RANK_CHECK(count == nranks && user_rank == rank && device == 0);
  std::string report = body(r);
  // A body that broke its comm on purpose destroys it itself (and sets comm to null).
  if (r.comm != nullptr) {
    ncclResult_t async = ncclInternalError;
    const ncclResult_t got = ncclCommGetAsyncError(r.comm, &async);
    if (report.empty() && (got != ncclSuccess || async != ncclSuccess)) {
      report = "the comm reports an asynchronous error: " +
               std::string(ncclGetErrorString(async));
    }
    const ncclResult_t destroyed = ncclCommDestroy(r.comm);
    if (report.empty() && destroyed != ncclSuccess) report = "ncclCommDestroy failed";
  }
  RANK_CUDA(cudaStreamDestroy(r.stream));
  return report;
}

class FakeNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fake_nccl_test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ::setenv("FAKE_NCCL_DIR", base_.c_str(), 1);
    ::unsetenv("FAKE_NCCL_TIMEOUT_S");
  }
  void TearDown() override {
    ::unsetenv("FAKE_NCCL_DIR");
    ::unsetenv("FAKE_NCCL_TIMEOUT_S");
    remove_tree(base_);
  }

  ncclUniqueId new_id() {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    const ncclResult_t r = ncclGetUniqueId(&id);
    EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
    return id;
  }

  // Every outcome is a clean exit with nothing to report.
  static void expect_clean(const std::vector<Outcome>& out) {
    for (std::size_t r = 0; r < out.size(); ++r) {
      EXPECT_EQ(out[r].report, "") << "rank " << r;
      EXPECT_TRUE(WIFEXITED(out[r].status) && WEXITSTATUS(out[r].status) == 0)
          << "rank " << r << " ended with status " << out[r].status;
    }
  }

  // Nothing left under the base directory: the id's directory is gone too.
  void expect_nothing_left() {
    EXPECT_EQ(join(entries(base_)), "") << "left in " << base_;
  }

  // Forks `n` ranks of a comm of `nranks` (n by default) running body; every rank must report
  // nothing and exit 0, and nothing may be left once they destroyed their comms.
  void run(int n, const std::function<std::string(Rank&)>& body, int nranks = 0) {
    if (nranks == 0) nranks = n;
    const ncclUniqueId id = new_id();
    ASSERT_TRUE(exists(id.internal)) << id.internal;
    expect_clean(spawn(n, [&](int rank) { return rank_main(id, nranks, rank, body); }));
    EXPECT_FALSE(exists(id.internal)) << id.internal << " was not removed";
    expect_nothing_left();
  }

  std::string base_;
};

// ---- point to point -----------------------------------------------------------------------------

// Both directions in one group, several messages each way: rank 0 sends 3 of the same size (the
// order shows in their contents), rank 1 sends 4 of different sizes (a mismatched order would
// also fail the size check); then ungrouped send then receive.
TEST_F(FakeNccl, GroupedSendRecvBothDirectionsInOrder) {
  run(2, [](Rank& r) -> std::string {
    const int peer = 1 - r.rank;
    const std::vector<std::size_t> sizes0 = {64, 64, 64}, sizes1 = {5, 300, 1, 77};
    const auto& mine = r.rank == 0 ? sizes0 : sizes1;
    const auto& theirs = r.rank == 0 ? sizes1 : sizes0;
    std::vector<std::vector<float>> out, want;
    std::vector<float*> send, recv;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      out.push_back(floats(mine[k], 1000.0f * r.rank + 100.0f * k));
      send.push_back(nullptr);
      RANK_TRY(upload(&send.back(), out.back(), r.stream));
    }
    for (std::size_t k = 0; k < theirs.size(); ++k) {
      want.push_back(floats(theirs[k], 1000.0f * peer + 100.0f * k));
      recv.push_back(nullptr);
      RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv.back()), theirs[k] * sizeof(float)));
    }
    RANK_NCCL(ncclGroupStart());
    // Receives first in program order: the group must still post the sends first.
    for (std::size_t k = 0; k < theirs.size(); ++k) {
      RANK_NCCL(ncclRecv(recv[k], theirs[k], ncclFloat32, peer, r.comm, r.stream));
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      RANK_NCCL(ncclSend(send[k], mine[k], ncclFloat32, peer, r.comm, r.stream));
    }
    RANK_NCCL(ncclGroupEnd());
    for (std::size_t k = 0; k < theirs.size(); ++k) {
      std::vector<float> got;
      RANK_TRY(download(&got, recv[k], theirs[k], r.stream));
      RANK_TRY(same(got, want[k], ("message " + std::to_string(k)).c_str()));
    }

    // Ungrouped: a send returns without waiting for its receive.
    std::vector<int32_t> a(33), b(33);
    for (int i = 0; i < 33; ++i) a[i] = r.rank * 1000 + i;
    int32_t *da = nullptr, *db = nullptr;
    RANK_TRY(upload(&da, a, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&db), 33 * sizeof(int32_t)));
    if (r.rank == 0) {
      RANK_NCCL(ncclSend(da, 33, ncclInt32, peer, r.comm, r.stream));
      RANK_NCCL(ncclRecv(db, 33, ncclInt32, peer, r.comm, r.stream));
    } else {
      RANK_NCCL(ncclRecv(db, 33, ncclInt32, peer, r.comm, r.stream));
      RANK_NCCL(ncclSend(da, 33, ncclInt32, peer, r.comm, r.stream));
    }
    std::vector<int32_t> got;
    RANK_TRY(download(&got, db, 33, r.stream));
    for (int i = 0; i < 33; ++i) b[i] = peer * 1000 + i;
    RANK_TRY(same(got, b, "ungrouped"));
    for (float* p : send) RANK_CUDA(cudaFree(p));
    for (float* p : recv) RANK_CUDA(cudaFree(p));
    RANK_CUDA(cudaFree(da));
    RANK_CUDA(cudaFree(db));
    return "";
  });
}

// Three ranks, each sending to the next and receiving from the previous, twice, with a self
// send/recv in the same group.
TEST_F(FakeNccl, GroupedRingWithSelfSend) {
  run(3, [](Rank& r) -> std::string {
    const int next = (r.rank + 1) % 3, prev = (r.rank + 2) % 3;
    for (int round = 0; round < 2; ++round) {
      const std::vector<float> out = floats(129, 10.0f * r.rank + round);
      const std::vector<float> self = floats(7, -5.0f * r.rank - round);
      float *send = nullptr, *recv = nullptr, *sself = nullptr, *rself = nullptr;
      RANK_TRY(upload(&send, out, r.stream));
      RANK_TRY(upload(&sself, self, r.stream));
      RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 129 * sizeof(float)));
      RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&rself), 7 * sizeof(float)));
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclRecv(recv, 129, ncclFloat32, prev, r.comm, r.stream));
      RANK_NCCL(ncclRecv(rself, 7, ncclFloat32, r.rank, r.comm, r.stream));
      RANK_NCCL(ncclSend(send, 129, ncclFloat32, next, r.comm, r.stream));
      RANK_NCCL(ncclSend(sself, 7, ncclFloat32, r.rank, r.comm, r.stream));
      RANK_NCCL(ncclGroupEnd());
      std::vector<float> got;
      RANK_TRY(download(&got, recv, 129, r.stream));
      RANK_TRY(same(got, floats(129, 10.0f * prev + round), "from prev"));
      RANK_TRY(download(&got, rself, 7, r.stream));
      RANK_TRY(same(got, self, "from self"));
      for (float* p : {send, recv, sself, rself}) RANK_CUDA(cudaFree(p));
    }
    return "";
  });
}

// Only the outermost ncclGroupEnd enqueues the group, and it only enqueues: nothing is queued
// after the inner one, the send and then the receive after the outer one, and the message is
// written when the stream is synchronized, not before.
TEST_F(FakeNccl, NestedGroupsRunAtTheOutermostEnd) {
  run(2, [](Rank& r) -> std::string {
    const std::vector<int32_t> out = {r.rank, 7, 8, 9};
    int32_t *send = nullptr, *recv = nullptr;
    RANK_TRY(upload(&send, out, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 4 * sizeof(int32_t)));
    if (r.rank == 0) {
      const std::uint64_t before = pending_ops();
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(send, 4, ncclInt32, 1, r.comm, r.stream));
      RANK_NCCL(ncclGroupEnd());
      RANK_CHECK(pending_ops() == before);
      RANK_NCCL(ncclGroupEnd());
      RANK_CHECK_MSG(pending_ops() == before + 1, std::to_string(pending_ops() - before));
      RANK_CHECK(!exists(r.dir + "/p0-1-0"));
      RANK_NCCL(ncclRecv(recv, 4, ncclInt32, 1, r.comm, r.stream));
      RANK_CHECK_MSG(pending_ops() == before + 2, std::to_string(pending_ops() - before));
    } else {
      RANK_NCCL(ncclRecv(recv, 4, ncclInt32, 0, r.comm, r.stream));
      RANK_NCCL(ncclSend(send, 4, ncclInt32, 0, r.comm, r.stream));
    }
    std::vector<int32_t> got;
    RANK_TRY(download(&got, recv, 4, r.stream));
    RANK_TRY(same(got, std::vector<int32_t>{1 - r.rank, 7, 8, 9}, "nested"));
    RANK_NCCL_FAILS(ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart");
    RANK_CUDA(cudaFree(send));
    RANK_CUDA(cudaFree(recv));
    return "";
  });
}

// Two comms A and B over the same two processes, each with its own stream: process 0 issues
// A's send/recv group and then B's, process 1 B's and then A's (as two jobs spanning the same two
// orrery proxies do), then each synchronizes its streams in the order it issued them and checks
// the data. Were a group run on the host at its ncclGroupEnd, process 0 would wait in A's for
// process 1, which waits in B's for process 0. With `threaded`, each comm's group and
// synchronization is a thread of its own, the second starting 200 ms after the first (so that
// the first is waiting in the synchronization by then): a synchronization that kept the fake's
// lock while it waits for a message would keep the other thread from even enqueueing the group
// that sends it.
std::string two_comms(const ncclUniqueId (&ids)[2], int rank, bool threaded) {
  fake_cuda_set_eager(0);
  if (std::getenv("FAKE_NCCL_TIMEOUT_S") == nullptr) ::setenv("FAKE_NCCL_TIMEOUT_S", "20", 1);
  RANK_CUDA(cudaSetDevice(0));
  const int peer = 1 - rank;
  auto count = [](int c) { return static_cast<std::size_t>(100 + 27 * c); };
  auto data = [&count](int from, int c) { return floats(count(c), 1000.0f * from + 100.0f * c); };
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  std::vector<float> host[2];
  float* send[2] = {nullptr, nullptr};
  float* recv[2] = {nullptr, nullptr};
  for (int c = 0; c < 2; ++c) {
    RANK_CUDA(cudaStreamCreateWithFlags(&streams[c], cudaStreamNonBlocking));
    RANK_NCCL(ncclCommInitRank(&comms[c], 2, ids[c], rank));
    host[c] = data(rank, c);
    RANK_TRY(upload(&send[c], host[c], streams[c]));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv[c]), count(c) * sizeof(float)));
  }
  auto exchange = [&](int c) -> std::string {
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(send[c], count(c), ncclFloat32, peer, comms[c], streams[c]));
    RANK_NCCL(ncclRecv(recv[c], count(c), ncclFloat32, peer, comms[c], streams[c]));
    RANK_NCCL(ncclGroupEnd());
    if (threaded) RANK_CUDA(cudaStreamSynchronize(streams[c]));
    return "";
  };
  const int order[2] = {rank, peer};  // process 0: A then B; process 1: B then A
  std::string reports[2];
  if (threaded) {
    std::thread first([&] { reports[0] = exchange(order[0]); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::thread second([&] { reports[1] = exchange(order[1]); });
    first.join();
    second.join();
  } else {
    for (int i = 0; i < 2; ++i) reports[i] = exchange(order[i]);
  }
  for (int i = 0; i < 2; ++i) {
    if (!reports[i].empty()) return (i == 0 ? "first comm: " : "second comm: ") + reports[i];
  }
  for (int c : order) {
    std::vector<float> got;
    RANK_TRY(download(&got, recv[c], count(c), streams[c]));
    RANK_TRY(same(got, data(peer, c), c == 0 ? "comm A" : "comm B"));
  }
  for (int c = 0; c < 2; ++c) {
    ncclResult_t async = ncclInternalError;
    RANK_NCCL(ncclCommGetAsyncError(comms[c], &async));
    RANK_CHECK(async == ncclSuccess);
    RANK_NCCL(ncclCommDestroy(comms[c]));
    RANK_CUDA(cudaFree(send[c]));
    RANK_CUDA(cudaFree(recv[c]));
    RANK_CUDA(cudaStreamDestroy(streams[c]));
  }
  return "";
}

TEST_F(FakeNccl, TwoCommsIssuedInOppositeOrders) {
  for (const bool threaded : {false, true}) {
    SCOPED_TRACE(threaded ? "a thread per comm" : "one thread");
    const ncclUniqueId ids[2] = {new_id(), new_id()};
    expect_clean(spawn(2, [&](int rank) { return two_comms(ids, rank, threaded); }));
    for (const ncclUniqueId& id : ids) {
      EXPECT_FALSE(exists(id.internal)) << id.internal << " was not removed";
    }
    expect_nothing_left();
  }
}

// ---- collectives --------------------------------------------------------------------------------

// In place (sendbuff == recvbuff + rank * count) with an odd count of floats, then out of place
// with 13 bytes a rank, then one of 0 elements.
TEST_F(FakeNccl, AllGatherInPlaceUneven) {
  run(3, [](Rank& r) -> std::string {
    constexpr std::size_t kCount = 1001;
    const std::vector<float> mine = floats(kCount, 10000.0f * r.rank + 0.5f);
    float* all = nullptr;
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&all), 3 * kCount * sizeof(float)));
    RANK_CUDA(cudaMemcpyAsync(all + r.rank * kCount, mine.data(), kCount * sizeof(float),
                              cudaMemcpyHostToDevice, r.stream));
    RANK_NCCL(ncclAllGather(all + r.rank * kCount, all, kCount, ncclFloat32, r.comm, r.stream));
    std::vector<float> got, want;
    for (int p = 0; p < 3; ++p) {
      for (float v : floats(kCount, 10000.0f * p + 0.5f)) want.push_back(v);
    }
    RANK_TRY(download(&got, all, 3 * kCount, r.stream));
    RANK_TRY(same(got, want, "in place"));

    std::vector<std::uint8_t> bytes(13);
    for (int i = 0; i < 13; ++i) bytes[i] = static_cast<std::uint8_t>(r.rank * 50 + i);
    std::uint8_t *send = nullptr, *recv = nullptr;
    RANK_TRY(upload(&send, bytes, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 39));
    RANK_NCCL(ncclAllGather(send, recv, 13, ncclUint8, r.comm, r.stream));
    std::vector<std::uint8_t> gotb, wantb;
    for (int p = 0; p < 3; ++p) {
      for (int i = 0; i < 13; ++i) wantb.push_back(static_cast<std::uint8_t>(p * 50 + i));
    }
    RANK_TRY(download(&gotb, recv, 39, r.stream));
    RANK_TRY(same(gotb, wantb, "uint8"));
    RANK_NCCL(ncclAllGather(send, recv, 0, ncclUint8, r.comm, r.stream));
    RANK_CUDA(cudaFree(all));
    RANK_CUDA(cudaFree(send));
    RANK_CUDA(cudaFree(recv));
    return "";
  });
}

// The sum in rank order, bitwise: element 0 is 1 + 1e8 - 1e8 across ranks 0, 1, 2, which is 0 in
// rank order ((1 + 1e8) rounds to 1e8) and 1 in the reverse order. Then int32 in place, and the
// refused reductions and types.
TEST_F(FakeNccl, AllReduceSumInRankOrder) {
  run(3, [](Rank& r) -> std::string {
    constexpr std::size_t kCount = 1000;
    auto input = [](int rank) {
      std::vector<float> v = floats(kCount, 0.1f * static_cast<float>(rank + 1));
      for (std::size_t i = 1; i < kCount; ++i) v[i] *= (rank == 1 ? 1e6f : 1.0f / (rank + 1));
      v[0] = rank == 0 ? 1.0f : rank == 1 ? 1e8f : -1e8f;
      return v;
    };
    const std::vector<float> mine = input(r.rank);
    std::vector<float> want = input(0);
    for (int p = 1; p < 3; ++p) {
      const std::vector<float> in = input(p);
      for (std::size_t i = 0; i < kCount; ++i) want[i] = want[i] + in[i];
    }
    RANK_CHECK(want[0] == 0.0f);
    float *send = nullptr, *recv = nullptr;
    RANK_TRY(upload(&send, mine, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), kCount * sizeof(float)));
    RANK_NCCL(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, r.comm, r.stream));
    std::vector<float> got;
    RANK_TRY(download(&got, recv, kCount, r.stream));
    RANK_TRY(same(got, want, "float sum"));

    std::vector<int32_t> ints(50);
    for (int i = 0; i < 50; ++i) ints[i] = (r.rank + 1) * i - 7;
    int32_t* inplace = nullptr;
    RANK_TRY(upload(&inplace, ints, r.stream));
    RANK_NCCL(ncclAllReduce(inplace, inplace, 50, ncclInt32, ncclSum, r.comm, r.stream));
    std::vector<int32_t> goti, wanti(50);
    for (int i = 0; i < 50; ++i) wanti[i] = 6 * i - 21;
    RANK_TRY(download(&goti, inplace, 50, r.stream));
    RANK_TRY(same(goti, wanti, "int32 in place"));

    RANK_NCCL_FAILS(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclMax, r.comm, r.stream),
                    ncclInvalidArgument, "ncclSum only");
    RANK_NCCL_FAILS(ncclAllReduce(send, recv, 10, ncclFloat16, ncclSum, r.comm, r.stream),
                    ncclInvalidArgument, "not supported");
    RANK_CUDA(cudaFree(send));
    RANK_CUDA(cudaFree(recv));
    RANK_CUDA(cudaFree(inplace));
    return "";
  });
}

TEST_F(FakeNccl, BroadcastFromRoot) {
  run(3, [](Rank& r) -> std::string {
    std::vector<int32_t> data(17);
    for (int i = 0; i < 17; ++i) data[i] = r.rank == 1 ? 3 * i + 1 : -1;
    int32_t *send = nullptr, *recv = nullptr;
    RANK_TRY(upload(&send, data, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 17 * sizeof(int32_t)));
    RANK_NCCL(ncclBroadcast(send, recv, 17, ncclInt32, 1, r.comm, r.stream));
    std::vector<int32_t> got, want(17);
    for (int i = 0; i < 17; ++i) want[i] = 3 * i + 1;
    RANK_TRY(download(&got, recv, 17, r.stream));
    RANK_TRY(same(got, want, "broadcast"));
    RANK_NCCL_FAILS(ncclBroadcast(send, recv, 17, ncclInt32, 3, r.comm, r.stream),
                    ncclInvalidArgument, "root 3 out of range");
    RANK_CUDA(cudaFree(send));
    RANK_CUDA(cudaFree(recv));
    return "";
  });
}

// ---- a single rank ------------------------------------------------------------------------------

TEST_F(FakeNccl, SingleRankInitAll) {
  const std::vector<Outcome> out = spawn(1, [](int) -> std::string {
    fake_cuda_set_eager(0);
    ::setenv("FAKE_NCCL_TIMEOUT_S", "20", 1);
    int version = 0;
    RANK_NCCL(ncclGetVersion(&version));
    RANK_CHECK(version == NCCL_VERSION_CODE);
    ncclComm_t comms[2] = {nullptr, nullptr};
    RANK_NCCL_FAILS(ncclCommInitAll(comms, 2, nullptr), ncclInvalidUsage, "ndev == 1 only");
    const int dev = 0;
    RANK_NCCL(ncclCommInitAll(comms, 1, &dev));
    int count = -1, rank = -1, device = -1;
    RANK_NCCL(ncclCommCount(comms[0], &count));
    RANK_NCCL(ncclCommUserRank(comms[0], &rank));
    RANK_NCCL(ncclCommCuDevice(comms[0], &device));
    RANK_CHECK(count == 1 && rank == 0 && device == 0);
    cudaStream_t s;
    RANK_CUDA(cudaStreamCreate(&s));
    const std::vector<float> in = floats(40, 2.0f);
    float *send = nullptr, *recv = nullptr;
    RANK_TRY(upload(&send, in, s));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 40 * sizeof(float)));
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(send, 40, ncclFloat32, 0, comms[0], s));
    RANK_NCCL(ncclRecv(recv, 40, ncclFloat32, 0, comms[0], s));
    RANK_NCCL(ncclGroupEnd());
    std::vector<float> got;
    RANK_TRY(download(&got, recv, 40, s));
    RANK_TRY(same(got, in, "self send"));
    RANK_CUDA(cudaMemsetAsync(recv, 0, 40 * sizeof(float), s));
    RANK_NCCL(ncclAllReduce(send, recv, 40, ncclFloat32, ncclSum, comms[0], s));
    RANK_TRY(download(&got, recv, 40, s));
    RANK_TRY(same(got, in, "allreduce of one"));
    RANK_NCCL(ncclCommDestroy(comms[0]));
    RANK_NCCL_FAILS(ncclCommCount(comms[0], &count), ncclInvalidArgument, "invalid argument");
    RANK_CUDA(cudaFree(send));
    RANK_CUDA(cudaFree(recv));
    RANK_CUDA(cudaStreamDestroy(s));
    return "";
  });
  expect_clean(out);
  expect_nothing_left();
}

// ---- errors -------------------------------------------------------------------------------------

// Rank 1 receives 12 floats where rank 0 sent 10, rank 2 receives 8 where rank 1 sent 12. The
// calls succeed (they only enqueue); the receives fail when they run: after the synchronization
// ncclCommGetAsyncError reports ncclInvalidUsage, ncclGetLastError says why, the receive buffers
// are as they were, and every later call on those comms fails; rank 0's comm is fine.
TEST_F(FakeNccl, ReceiveSizeMismatch) {
  run(3, [](Rank& r) -> std::string {
    float* buf = nullptr;
    const std::vector<float> data = floats(12, 1.0f);
    RANK_TRY(upload(&buf, data, r.stream));
    ncclResult_t async = ncclInternalError;
    if (r.rank == 0) {
      RANK_NCCL(ncclSend(buf, 10, ncclFloat32, 1, r.comm, r.stream));
      RANK_CUDA(cudaStreamSynchronize(r.stream));
      RANK_NCCL(ncclCommGetAsyncError(r.comm, &async));
      RANK_CHECK(async == ncclSuccess);
      RANK_CUDA(cudaFree(buf));
      return "";
    }
    const std::vector<float> before = floats(12, -7.0f);
    float* recv = nullptr;
    RANK_TRY(upload(&recv, before, r.stream));
    std::string why;
    if (r.rank == 1) {
      RANK_NCCL(ncclSend(buf, 12, ncclFloat32, 2, r.comm, r.stream));
      RANK_NCCL(ncclRecv(recv, 12, ncclFloat32, 0, r.comm, r.stream));
      why = "message p0-1-0 from rank 0 holds 40 bytes, the receive expects 48";
    } else {
      RANK_NCCL(ncclRecv(recv, 8, ncclFloat32, 1, r.comm, r.stream));
      why = "message p1-2-0 from rank 1 holds 48 bytes, the receive expects 32";
    }
    RANK_NCCL(ncclCommGetAsyncError(r.comm, &async));
    RANK_CHECK(async == ncclSuccess);  // not run yet
    RANK_CUDA(cudaStreamSynchronize(r.stream));
    RANK_NCCL(ncclCommGetAsyncError(r.comm, &async));
    RANK_CHECK(async == ncclInvalidUsage);
    const std::string last = ncclGetLastError(nullptr);
    RANK_CHECK_MSG(last.find(why) != std::string::npos, last);
    std::vector<float> got;
    RANK_TRY(download(&got, recv, 12, r.stream));
    RANK_TRY(same(got, before, "the receive buffer after the failed receive"));
    RANK_NCCL_FAILS(ncclSend(buf, 1, ncclFloat32, 0, r.comm, r.stream), ncclInvalidUsage,
                    "size mismatch");
    // Broken on purpose: aborted here (as after a real asynchronous error), not by rank_main.
    RANK_NCCL(ncclCommAbort(r.comm));
    r.comm = nullptr;
    RANK_CUDA(cudaFree(buf));
    RANK_CUDA(cudaFree(recv));
    return "";
  });
}

// A peer out of range is refused at the call; in a group, ncclGroupEnd then refuses the whole
// group (the valid send in it is not delivered: the next exchange gets the later message). So is
// a group whose ops are on two streams (the fake runs a group on one).
TEST_F(FakeNccl, BadPeer) {
  run(2, [](Rank& r) -> std::string {
    const int peer = 1 - r.rank;
    const std::vector<int32_t> dropped(5, -1), kept = {r.rank, 2, 3};
    int32_t *d = nullptr, *k = nullptr, *recv = nullptr;
    RANK_TRY(upload(&d, dropped, r.stream));
    RANK_TRY(upload(&k, kept, r.stream));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&recv), 3 * sizeof(int32_t)));
    RANK_NCCL_FAILS(ncclSend(k, 3, ncclInt32, 2, r.comm, r.stream), ncclInvalidArgument,
                    "peer 2 out of range");
    RANK_NCCL_FAILS(ncclRecv(recv, 3, ncclInt32, -1, r.comm, r.stream), ncclInvalidArgument,
                    "peer -1 out of range");
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(d, 5, ncclInt32, peer, r.comm, r.stream));
    RANK_NCCL_FAILS(ncclSend(k, 3, ncclInt32, 7, r.comm, r.stream), ncclInvalidArgument,
                    "peer 7 out of range");
    RANK_NCCL_FAILS(ncclGroupEnd(), ncclInvalidArgument, "peer 7 out of range");
    // A group over two streams is refused at its end, and dropped too.
    cudaStream_t other = nullptr;
    RANK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    const std::uint64_t before = pending_ops();
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(d, 5, ncclInt32, peer, r.comm, r.stream));
    RANK_NCCL(ncclRecv(recv, 3, ncclInt32, peer, r.comm, other));
    RANK_NCCL_FAILS(ncclGroupEnd(), ncclInvalidUsage, "one stream");
    RANK_CHECK(pending_ops() == before);
    RANK_CUDA(cudaStreamDestroy(other));
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(k, 3, ncclInt32, peer, r.comm, r.stream));
    RANK_NCCL(ncclRecv(recv, 3, ncclInt32, peer, r.comm, r.stream));
    RANK_NCCL(ncclGroupEnd());
    std::vector<int32_t> got;
    RANK_TRY(download(&got, recv, 3, r.stream));
    RANK_TRY(same(got, std::vector<int32_t>{peer, 2, 3}, "after the refused group"));
    for (int32_t* p : {d, k, recv}) RANK_CUDA(cudaFree(p));
    return "";
  });
}

// Host memory, a freed device buffer, a range past its allocation, null: ncclInvalidArgument,
// and the comm still works afterwards.
TEST_F(FakeNccl, InaccessiblePointers) {
  run(2, [](Rank& r) -> std::string {
    const int peer = 1 - r.rank;
    std::vector<float> host(16, 1.0f);
    float *freed = nullptr, *small = nullptr, *ok = nullptr;
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&freed), 64));
    RANK_CUDA(cudaMalloc(reinterpret_cast<void**>(&small), 16 * sizeof(float)));
    RANK_CUDA(cudaFree(freed));  // after: `small` cannot reuse its address
    RANK_NCCL_FAILS(ncclSend(host.data(), 16, ncclFloat32, peer, r.comm, r.stream),
                    ncclInvalidArgument, "not accessible device memory");
    RANK_NCCL_FAILS(ncclRecv(freed, 16, ncclFloat32, peer, r.comm, r.stream),
                    ncclInvalidArgument, "recvbuff");
    RANK_NCCL_FAILS(ncclRecv(small, 17, ncclFloat32, peer, r.comm, r.stream),
                    ncclInvalidArgument, "(68 bytes) is not accessible");
    RANK_NCCL_FAILS(ncclSend(nullptr, 1, ncclFloat32, peer, r.comm, r.stream),
                    ncclInvalidArgument, "sendbuff");
    // AllGather's recvbuff holds nranks * count: 16 floats is too small for 2 x 16.
    RANK_NCCL_FAILS(ncclAllGather(small, small, 16, ncclFloat32, r.comm, r.stream),
                    ncclInvalidArgument, "recvbuff");
    RANK_NCCL_FAILS(ncclAllReduce(small, host.data(), 16, ncclFloat32, ncclSum, r.comm, r.stream),
                    ncclInvalidArgument, "recvbuff");
    const std::vector<float> data = floats(16, 3.0f * r.rank);
    RANK_TRY(upload(&ok, data, r.stream));
    RANK_NCCL(ncclAllReduce(ok, small, 16, ncclFloat32, ncclSum, r.comm, r.stream));
    std::vector<float> got, want = floats(16, 0.0f);
    const std::vector<float> one = floats(16, 3.0f);
    for (int i = 0; i < 16; ++i) want[i] = want[i] + one[i];
    RANK_TRY(download(&got, small, 16, r.stream));
    RANK_TRY(same(got, want, "after the refusals"));
    RANK_CUDA(cudaFree(small));
    RANK_CUDA(cudaFree(ok));
    return "";
  });
}

// A receive whose message never comes: the call returns at once, the stream's synchronization
// after FAKE_NCCL_TIMEOUT_S, and then the comm is broken with ncclSystemError and the receive
// buffer is as it was.
TEST_F(FakeNccl, ReceiveTimeout) {
  run(2, [](Rank& r) -> std::string {
    if (r.rank == 0) return "";
    ::setenv("FAKE_NCCL_TIMEOUT_S", "1", 1);
    const std::vector<float> before = floats(4, 9.0f);
    float* buf = nullptr;
    RANK_TRY(upload(&buf, before, r.stream));
    const auto t0 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclRecv(buf, 4, ncclFloat32, 0, r.comm, r.stream));
    const double call = seconds_since(t0);
    RANK_CHECK_MSG(call < 0.5, std::to_string(call) + " s");
    RANK_CUDA(cudaStreamSynchronize(r.stream));
    const double s = seconds_since(t0);
    RANK_CHECK_MSG(s >= 0.9 && s < 10, std::to_string(s) + " s");
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(r.comm, &async));
    RANK_CHECK(async == ncclSystemError);
    const std::string last = ncclGetLastError(nullptr);
    RANK_CHECK_MSG(last.find("timed out after 1 s waiting for message p0-1-0 from rank 0") !=
                       std::string::npos,
                   last);
    std::vector<float> got;
    RANK_TRY(download(&got, buf, 4, r.stream));
    RANK_TRY(same(got, before, "the receive buffer after the timeout"));
    RANK_NCCL_FAILS(ncclRecv(buf, 4, ncclFloat32, 0, r.comm, r.stream), ncclSystemError,
                    "timed out");
    RANK_NCCL(ncclCommDestroy(r.comm));
    r.comm = nullptr;
    RANK_CUDA(cudaFree(buf));
    return "";
  });
}

// An abort with a receive still queued (its message never comes: FAKE_NCCL_TIMEOUT_S is 20 s):
// the queued op does nothing and does not wait, so the stream's synchronization returns at once,
// the buffer is as it was and the later ops on the stream run.
TEST_F(FakeNccl, AbortDropsQueuedOps) {
  run(2, [](Rank& r) -> std::string {
    if (r.rank == 0) return "";
    const std::vector<float> before = floats(8, 4.0f);
    float* buf = nullptr;
    RANK_TRY(upload(&buf, before, r.stream));
    RANK_NCCL(ncclRecv(buf, 8, ncclFloat32, 0, r.comm, r.stream));
    RANK_NCCL(ncclCommAbort(r.comm));
    r.comm = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> got;
    RANK_TRY(download(&got, buf, 8, r.stream));
    const double s = seconds_since(t0);
    RANK_CHECK_MSG(s < 5, std::to_string(s) + " s");
    RANK_TRY(same(got, before, "the receive buffer after the abort"));
    RANK_CUDA(cudaFree(buf));
    return "";
  });
}

// Two ranks of three join: each times out after FAKE_NCCL_TIMEOUT_S=1 with ncclSystemError
// naming the missing rank, and they leave nothing behind.
TEST_F(FakeNccl, InitRankTimesOutWithARankMissing) {
  const ncclUniqueId id = new_id();
  ::setenv("FAKE_NCCL_TIMEOUT_S", "1", 1);
  const std::vector<Outcome> out = spawn(2, [&](int rank) -> std::string {
    ncclComm_t comm = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    // Rank 2 is missing; the other rank may have given up first and be missing too.
    RANK_NCCL_FAILS(ncclCommInitRank(&comm, 3, id, rank), ncclSystemError,
                    "timed out after 1 s waiting for rank(s) ");
    const std::string msg = ncclGetLastError(nullptr);
    RANK_CHECK_MSG(msg.find("2 to join " + std::string(id.internal)) != std::string::npos, msg);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_CHECK_MSG(s >= 0.9 && s < 10, std::to_string(s) + " s");
    RANK_CHECK(comm == nullptr);
    return "";
  });
  expect_clean(out);
  EXPECT_FALSE(exists(id.internal)) << id.internal << " was not removed";
  expect_nothing_left();
}

TEST_F(FakeNccl, UniqueIdThatDoesNotFit) {
  const std::string deep = base_ + "/" + std::string(120, 'd');
  ASSERT_EQ(::mkdir(deep.c_str(), 0700), 0);
  ::setenv("FAKE_NCCL_DIR", deep.c_str(), 1);
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("does not fit"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(join(entries(deep)), "");
  // A usable one: a fresh directory, its path NUL-terminated in the id.
  ::setenv("FAKE_NCCL_DIR", base_.c_str(), 1);
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_NE(std::memchr(id.internal, '\0', sizeof id.internal), nullptr);
  EXPECT_EQ(std::string(id.internal).rfind(base_ + "/", 0), 0u) << id.internal;
  EXPECT_TRUE(exists(id.internal));
}

}  // namespace
