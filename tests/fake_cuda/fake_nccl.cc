// A fake NCCL over the fake CUDA runtime (fake_cuda.cc), so that code calling NCCL runs in CI
// (which has no GPU) across real processes, one rank per process, each with its own fake device.
// Compiled against the real <nccl.h> (NCCL 2.28), so every definition below is checked against
// the real extern "C" declaration; linked instead of libnccl.
//
// What it emulates:
// - Rendezvous through a directory: ncclGetUniqueId makes a fresh one (mkdtemp under
//   $FAKE_NCCL_DIR, else /dev/shm, else /tmp) and writes its path into the id. ncclCommInitRank
//   creates join-<rank> there and waits until all nranks join files exist (FAKE_NCCL_TIMEOUT_S,
//   60 s; then ncclSystemError), blocking its thread (any thread: it does not hold the fake
//   CUDA's lock while it waits). The comm's device is the current one (cudaGetDevice).
//   ncclCommInitAll: ndev == 1 only.
// - Operations are stream-ordered and asynchronous, as in NCCL: a call (or the outermost
//   ncclGroupEnd for those issued in a group) checks its arguments, then only enqueues on the
//   stream, and returns; the host never waits for a peer. A group becomes two fake CUDA ops: the
//   first writes every message the group sends (its point-to-point sends, then its collectives'
//   contributions); the second (fake_cuda_enqueue_when) may run only once every message the group
//   receives is there, or FAKE_NCCL_TIMEOUT_S (60 s) after the scheduler first asked, and then
//   reads them: the receives, then the collectives in call order. Both run in stream order, so
//   they see the data of the ops before them and later ops see theirs, and the fake scheduler
//   runs them when a synchronization (or a query, or its eager progress) gets to them, keeping on
//   with other streams while a receive waits. Grouped send/recv pairs between processes thus
//   cannot deadlock, nor can two processes that each issue two comms' groups in opposite orders.
//   A group's ops must all be on one stream (ncclInvalidUsage otherwise: NCCL allows several).
//   A call refused inside a group makes its ncclGroupEnd drop the whole group and return that
//   error, as NCCL does.
// - Data through files in that directory, written under a temporary name then renamed. Messages
//   are numbered when they are enqueued: the k-th ncclSend from A to B is the k-th ncclRecv of B
//   from A (p<from>-<to>-<k>); collectives number their messages by a per-comm collective counter
//   (c<n>-<from>-<to>), so all ranks must call the same collectives in the same order, as NCCL
//   requires.
// - Failures found when an op runs cannot be returned by the call any more: a receive of another
//   byte size than was sent (ncclInvalidUsage) or one whose message did not come in time
//   (ncclSystemError) break the comm (ncclCommGetAsyncError reports it, later calls return it,
//   the message is said on stderr and is ncclGetLastError's on the thread that ran the op and
//   after either of those calls) and leave every receive buffer of that comm in the group
//   untouched. A broken comm's ops that are still queued do nothing (its sends are not made).
// - Collectives: AllGather (in place too), AllReduce (ncclSum only, summed in rank order
//   ((in0 + in1) + in2)..., for the float and integer types), Broadcast.
// - Every device pointer is checked with fake_cuda_device_accessible at the call
//   (ncclInvalidArgument otherwise, as is a peer or root out of range) and again when the op
//   runs, where a pointer no longer accessible faults as a GPU kernel does: the fake context is
//   poisoned with cudaErrorIllegalAddress.
// - ncclCommDestroy/ncclCommAbort create done-<rank>; the rank that finds all done files empties
//   the directory and removes it, so nothing is left once every rank destroyed its comm. The
//   comm's ops still queued then do nothing (the data they share with it outlives it) and never
//   wait, so a stream synchronized after an abort completes.
// - Errors: ncclGetLastError returns this thread's last message (also said on stderr).
//
// What it cannot show:
// - No real transport (NVLink, IB, sockets, proxies), no channels, no timing: a message exists
//   whole once its send op ran, and a receive takes it whole. A send is made only when the fake
//   scheduler of its process runs it, i.e. when that process synchronizes or queries something
//   (a GPU would send by itself): a peer waits as long as the sender's host never does.
// - Ops are atomic and a group's sends all go before its receives: overlap of the two within a
//   group, or of a collective with a kernel on another stream, is not exercised.
// - ncclCommDestroy does not wait for the comm's queued ops as NCCL's (finalize) does: they are
//   dropped as by ncclCommAbort. Synchronize the stream first.
// - Several ranks in one process (ncclCommInitAll with ndev > 1, grouped ncclCommInitRank),
//   a group over several streams, nonblocking comms (config->blocking = 0 completes at once),
//   split/shrink, registration, reductions other than sum, half/bfloat16/fp8 reductions, and
//   every API not defined below.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/fake_cuda/fake_cuda.h"

namespace fake_nccl_detail {

// What a comm shares with its queued ops, which may run after the comm is destroyed.
struct Shared {
  std::string dir;
  int nranks = 0, rank = 0;
  std::mutex mu;                      // guards what follows; an op holds it while it runs
  bool gone = false;                  // destroyed or aborted: its queued ops do nothing
  ncclResult_t failed = ncclSuccess;  // set for good by a failure found when an op ran
  std::string failure;
};

}  // namespace fake_nccl_detail

// The opaque handle type (declared, never defined, by nccl.h).
struct ncclComm {
  std::shared_ptr<fake_nccl_detail::Shared> sh;
  int nranks = 0, rank = 0, device = 0;
  std::vector<std::uint64_t> sent, received;  // point-to-point messages enqueued, per peer
  std::uint64_t collectives = 0;              // collectives enqueued so far
};

namespace fake_nccl_detail {
namespace {

using Clock = std::chrono::steady_clock;

thread_local std::string last_error;

// The comms not destroyed: a handle is checked before it is dereferenced.
std::mutex mu;
std::set<const ncclComm*>& live() {
  static auto* s = new std::set<const ncclComm*>();  // never destroyed, as fake_cuda's state
  return *s;
}

bool is_live(const ncclComm* c) {
  std::lock_guard<std::mutex> l(mu);
  return live().count(c) != 0;
}

ncclResult_t fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  last_error = std::string("fake_nccl: ") + buf;
  std::fprintf(stderr, "%s\n", last_error.c_str());
  return r;
}

// A failure found when an op ran (sh.mu held): the comm stays broken (ncclCommGetAsyncError,
// and every later call), with this thread's last message.
void broken(Shared& sh, ncclResult_t r) {
  if (sh.failed == ncclSuccess) {
    sh.failed = r;
    sh.failure = last_error;
  }
}

double timeout_s() {
  const char* v = std::getenv("FAKE_NCCL_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return 60;
  const double t = std::strtod(v, nullptr);
  return t > 0 ? t : 60;
}

// Polls with a short, growing sleep.
void nap(std::chrono::microseconds* d) {
  std::this_thread::sleep_for(*d);
  *d = std::min<std::chrono::microseconds>(*d * 2, std::chrono::milliseconds(2));
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The k-th point-to-point message from one rank to another, and collective k's.
std::string p2p_name(int from, int to, std::uint64_t k) {
  return "p" + std::to_string(from) + "-" + std::to_string(to) + "-" + std::to_string(k);
}
std::string coll_name(std::uint64_t k, int from, int to) {
  return "c" + std::to_string(k) + "-" + std::to_string(from) + "-" + std::to_string(to);
}

// Creates `path` empty; false (errno set) if it could not.
bool touch(const std::string& path, bool exclusive) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : 0),
                        0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Everything in `dir`, then `dir` itself; best effort (another rank may be doing the same).
void remove_dir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

std::size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// ---- messages ----------------------------------------------------------------------------------

ncclResult_t send_msg(const Shared& sh, const std::string& name, const void* p, std::size_t n) {
  const std::string tmp = sh.dir + "/.tmp-" + name, path = sh.dir + "/" + name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(ncclSystemError, "rank %d: cannot create %s: %s", sh.rank, tmp.c_str(),
                std::strerror(errno));
  }
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::write(fd, b + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(ncclSystemError, "rank %d: cannot write %s: %s", sh.rank, tmp.c_str(),
                  std::strerror(err));
    }
    done += static_cast<std::size_t>(w);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail(ncclSystemError, "rank %d: cannot rename %s: %s", sh.rank, tmp.c_str(),
                std::strerror(err));
  }
  return ncclSuccess;
}

// A message a group receives.
struct Incoming {
  std::string name;
  int from = 0;
  std::size_t bytes = 0;
  int fd = -1;  // open while its receive op runs
};

// Opens message `in` and checks that it holds the bytes expected. The message not there is a
// timeout: the receive op runs without it only once its wait expired.
ncclResult_t open_msg(const Shared& sh, Incoming* in, double limit) {
  const std::string path = sh.dir + "/" + in->name;
  int fd;
  while ((fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (fd < 0 && errno == ENOENT) {
    return fail(ncclSystemError,
                "rank %d: timed out after %g s waiting for message %s from rank %d", sh.rank,
                limit, in->name.c_str(), in->from);
  }
  if (fd < 0) {
    return fail(ncclSystemError, "rank %d: cannot open %s: %s", sh.rank, path.c_str(),
                std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(ncclSystemError, "rank %d: cannot stat %s: %s", sh.rank, path.c_str(),
                std::strerror(err));
  }
  if (static_cast<std::uint64_t>(st.st_size) != in->bytes) {
    ::close(fd);
    ::unlink(path.c_str());
    return fail(ncclInvalidUsage,
                "rank %d: receive size mismatch: message %s from rank %d holds %llu bytes, the "
                "receive expects %zu",
                sh.rank, in->name.c_str(), in->from, static_cast<unsigned long long>(st.st_size),
                in->bytes);
  }
  in->fd = fd;
  return ncclSuccess;
}

// Reads an opened message whole into p, closes and removes it.
ncclResult_t read_msg(const Shared& sh, Incoming* in, void* p) {
  auto* b = static_cast<unsigned char*>(p);
  ncclResult_t r = ncclSuccess;
  for (std::size_t done = 0; done < in->bytes;) {
    const ssize_t got = ::read(in->fd, b + done, in->bytes - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      r = fail(ncclSystemError, "rank %d: cannot read message %s: %s", sh.rank, in->name.c_str(),
               std::strerror(got < 0 ? errno : EIO));
      break;
    }
    done += static_cast<std::size_t>(got);
  }
  ::close(in->fd);
  in->fd = -1;
  ::unlink((sh.dir + "/" + in->name).c_str());
  return r;
}

void close_msg(Incoming* in) {
  if (in->fd >= 0) ::close(in->fd);
  in->fd = -1;
}

// ---- operations --------------------------------------------------------------------------------

enum class Kind { kSend, kRecv, kAllGather, kAllReduce, kBroadcast };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kSend:
      return "ncclSend";
    case Kind::kRecv:
      return "ncclRecv";
    case Kind::kAllGather:
      return "ncclAllGather";
    case Kind::kAllReduce:
      return "ncclAllReduce";
    case Kind::kBroadcast:
      return "ncclBroadcast";
  }
  return "?";
}

struct Op {
  Kind kind;
  ncclComm* comm = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int peer = 0;  // the peer of a send or receive, the root of a broadcast
  ncclRedOp_t red = ncclSum;
  cudaStream_t stream = nullptr;
};

// This thread's group (NCCL's group state is per thread too).
struct Group {
  int depth = 0;
  std::vector<Op> ops;
  ncclResult_t error = ncclSuccess;  // the first call refused in the group
};
thread_local Group group;

ncclResult_t check_comm(const ncclComm* c, const char* what) {
  if (c == nullptr || !is_live(c)) {
    return fail(ncclInvalidArgument, "%s: invalid communicator %p", what,
                static_cast<const void*>(c));
  }
  std::lock_guard<std::mutex> l(c->sh->mu);
  if (c->sh->failed != ncclSuccess) {
    last_error = c->sh->failure;
    return c->sh->failed;
  }
  return ncclSuccess;
}

ncclResult_t check_buf(const char* what, const char* arg, const void* p, std::size_t n) {
  if (n == 0 || (p != nullptr && fake_cuda_device_accessible(p, n))) return ncclSuccess;
  return fail(ncclInvalidArgument, "%s: %s %p (%zu bytes) is not accessible device memory", what,
              arg, p, n);
}

ncclResult_t check_bytes(const char* what, std::size_t count, std::size_t elem, std::size_t mul,
                         std::size_t* out) {
  if (__builtin_mul_overflow(count, elem, out) || __builtin_mul_overflow(*out, mul, out)) {
    return fail(ncclInvalidArgument, "%s: count %zu overflows", what, count);
  }
  return ncclSuccess;
}

// Everything that makes an op invalid, checked at the call and again at its ncclGroupEnd.
ncclResult_t check_op(const Op& op) {
  const char* what = kind_name(op.kind);
  if (ncclResult_t r = check_comm(op.comm, what); r != ncclSuccess) return r;
  const std::size_t elem = type_size(op.type);
  if (elem == 0) return fail(ncclInvalidArgument, "%s: invalid datatype %d", what, op.type);
  const int n = op.comm->nranks, rank = op.comm->rank;
  if (op.peer < 0 || op.peer >= n) {
    return fail(ncclInvalidArgument, "%s: %s %d out of range (nranks %d)", what,
                op.kind == Kind::kBroadcast ? "root" : "peer", op.peer, n);
  }
  std::size_t bytes = 0, all = 0;
  if (ncclResult_t r = check_bytes(what, op.count, elem, 1, &bytes); r != ncclSuccess) return r;
  if (ncclResult_t r = check_bytes(what, op.count, elem, static_cast<std::size_t>(n), &all);
      r != ncclSuccess) {
    return r;
  }
  switch (op.kind) {
    case Kind::kSend:
      return check_buf(what, "sendbuff", op.send, bytes);
    case Kind::kRecv:
      return check_buf(what, "recvbuff", op.recv, bytes);
    case Kind::kAllGather:
      if (ncclResult_t r = check_buf(what, "sendbuff", op.send, bytes); r != ncclSuccess) return r;
      return check_buf(what, "recvbuff", op.recv, all);
    case Kind::kAllReduce:
      if (op.red != ncclSum) {
        return fail(ncclInvalidArgument, "%s: reduction %d not supported (ncclSum only)", what,
                    op.red);
      }
      if (op.type == ncclFloat16 || op.type == ncclBfloat16 || op.type == ncclFloat8e4m3 ||
          op.type == ncclFloat8e5m2) {
        return fail(ncclInvalidArgument, "%s: datatype %d not supported", what, op.type);
      }
      if (ncclResult_t r = check_buf(what, "sendbuff", op.send, bytes); r != ncclSuccess) return r;
      return check_buf(what, "recvbuff", op.recv, bytes);
    case Kind::kBroadcast:
      if (op.peer == rank) {
        if (ncclResult_t r = check_buf(what, "sendbuff", op.send, bytes); r != ncclSuccess) {
          return r;
        }
      }
      return check_buf(what, "recvbuff", op.recv, bytes);
  }
  return ncclSuccess;
}

template <class T>
void add_into(unsigned char* acc, const unsigned char* x, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    T a, b;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b, x + i * sizeof(T), sizeof(T));
    a = static_cast<T>(a + b);
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

// acc += x, elementwise; integers wrap (summed unsigned), as on the GPU.
void add(ncclDataType_t t, unsigned char* acc, const unsigned char* x, std::size_t count) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return add_into<std::uint8_t>(acc, x, count);
    case ncclInt32:
    case ncclUint32:
      return add_into<std::uint32_t>(acc, x, count);
    case ncclInt64:
    case ncclUint64:
      return add_into<std::uint64_t>(acc, x, count);
    case ncclFloat32:
      return add_into<float>(acc, x, count);
    case ncclFloat64:
      return add_into<double>(acc, x, count);
    default:
      return;  // refused by check_op
  }
}

// ---- running a group on its stream -------------------------------------------------------------

// A message a group sends.
struct Outgoing {
  std::shared_ptr<Shared> sh;
  const char* what = nullptr;  // the call
  std::string name;
  const void* p = nullptr;
  std::size_t bytes = 0;
};

// A receive or a collective of a group: what its receive op does for it.
struct Part {
  Op op;  // as called; op.comm is not used once enqueued (it may be destroyed by then)
  std::shared_ptr<Shared> sh;
  std::uint64_t k = 0;            // a collective's number
  std::vector<Incoming> in = {};  // its messages; for AllGather and AllReduce in rank order
};

// A group's receive side, shared by its receive op and that op's readiness predicate.
struct Receives {
  std::vector<Part> parts;
  double limit = 60;              // FAKE_NCCL_TIMEOUT_S when the group was enqueued
  bool asked = false;             // the scheduler asked once: the wait started
  Clock::time_point deadline;
  std::size_t part = 0, msg = 0;  // the first message not seen there yet
};

// Neither destroyed nor broken: its ops still do something.
bool usable(Shared& sh) {
  std::lock_guard<std::mutex> l(sh.mu);
  return !sh.gone && sh.failed == ncclSuccess;
}

// The receive op's predicate: every message there (those of comms gone or broken meanwhile are
// not waited for), or the wait expired. Messages are only ever removed by the op that reads them.
bool all_there(Receives& rx) {
  if (!rx.asked) {
    rx.asked = true;
    rx.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(rx.limit));
  }
  for (; rx.part < rx.parts.size(); ++rx.part, rx.msg = 0) {
    Part& p = rx.parts[rx.part];
    if (!usable(*p.sh)) continue;
    for (; rx.msg < p.in.size(); ++rx.msg) {
      if (!exists(p.sh->dir + "/" + p.in[rx.msg].name)) return Clock::now() >= rx.deadline;
    }
  }
  return true;
}

// A pointer no longer accessible when the op runs: a GPU kernel would fault.
bool faults(const Shared& sh, const char* what, const char* arg, const void* p, std::size_t n) {
  if (n == 0 || fake_cuda_device_accessible(p, n)) return false;
  fail(ncclUnhandledCudaError,
       "rank %d: %s's %s %p (%zu bytes) is not accessible device memory when the op runs: the "
       "kernel faults (cudaErrorIllegalAddress)",
       sh.rank, what, arg, p, n);
  return true;
}

bool part_faults(const Part& pt) {
  const Op& op = pt.op;
  const Shared& sh = *pt.sh;
  const char* what = kind_name(op.kind);
  const std::size_t bytes = op.count * type_size(op.type);
  switch (op.kind) {
    case Kind::kRecv:
      return faults(sh, what, "recvbuff", op.recv, bytes);
    case Kind::kAllGather:
      return faults(sh, what, "sendbuff", op.send, bytes) ||
             faults(sh, what, "recvbuff", op.recv, bytes * static_cast<std::size_t>(sh.nranks));
    case Kind::kAllReduce:
      return faults(sh, what, "sendbuff", op.send, bytes) ||
             faults(sh, what, "recvbuff", op.recv, bytes);
    case Kind::kBroadcast:
      return (op.peer == sh.rank && faults(sh, what, "sendbuff", op.send, bytes)) ||
             faults(sh, what, "recvbuff", op.recv, bytes);
    default:
      return false;
  }
}

// A part's data, its messages all open: into its receive buffer.
ncclResult_t deliver(Part* pt) {
  const Op& op = pt->op;
  const Shared& sh = *pt->sh;
  const int rank = sh.rank;
  const std::size_t bytes = op.count * type_size(op.type);
  auto* recv = static_cast<unsigned char*>(op.recv);
  ncclResult_t r = ncclSuccess;
  auto keep = [&r](ncclResult_t x) {
    if (r == ncclSuccess) r = x;
  };
  switch (op.kind) {
    case Kind::kRecv:
      keep(read_msg(sh, &pt->in[0], recv));
      break;
    case Kind::kAllGather:
      // In place (sendbuff == recvbuff + rank * count): nothing to copy.
      if (bytes != 0 && recv + rank * bytes != op.send) {
        std::memmove(recv + rank * bytes, op.send, bytes);
      }
      for (Incoming& in : pt->in) keep(read_msg(sh, &in, recv + in.from * bytes));
      break;
    case Kind::kAllReduce: {
      std::vector<std::vector<unsigned char>> in(sh.nranks, std::vector<unsigned char>(bytes));
      if (bytes != 0) std::memcpy(in[rank].data(), op.send, bytes);
      for (Incoming& m : pt->in) keep(read_msg(sh, &m, in[m.from].data()));
      if (r != ncclSuccess) break;
      // Rank order: ((in0 + in1) + in2) + ...
      for (int p = 1; p < sh.nranks; ++p) add(op.type, in[0].data(), in[p].data(), op.count);
      if (bytes != 0) std::memcpy(recv, in[0].data(), bytes);
      break;
    }
    case Kind::kBroadcast:
      if (rank != op.peer) {
        keep(read_msg(sh, &pt->in[0], recv));
      } else if (recv != op.send && bytes != 0) {
        std::memmove(recv, op.send, bytes);
      }
      break;
    default:
      break;
  }
  return r;
}

// The group's first op: every message it sends.
cudaError_t send_all(const std::vector<Outgoing>& out) {
  for (const Outgoing& o : out) {
    Shared& sh = *o.sh;
    std::lock_guard<std::mutex> l(sh.mu);
    if (sh.gone || sh.failed != ncclSuccess) continue;
    if (faults(sh, o.what, "sendbuff", o.p, o.bytes)) return cudaErrorIllegalAddress;
    if (ncclResult_t r = send_msg(sh, o.name, o.p, o.bytes); r != ncclSuccess) broken(sh, r);
  }
  return cudaSuccess;
}

// The group's second op, once all_there: opens every message of every part; a comm with a
// message missing or of the wrong size is broken and none of its parts is delivered; then the
// parts of the comms still usable are, in order (receives first, then collectives in call order).
cudaError_t receive_all(Receives& rx) {
  std::vector<std::unique_lock<std::mutex>> held;  // every comm's lock, for the whole op
  std::vector<Shared*> locked;
  for (Part& pt : rx.parts) {
    if (std::find(locked.begin(), locked.end(), pt.sh.get()) != locked.end()) continue;
    locked.push_back(pt.sh.get());
    held.emplace_back(pt.sh->mu);
  }
  auto skip = [](const Shared& sh) { return sh.gone || sh.failed != ncclSuccess; };
  for (Part& pt : rx.parts) {
    if (!skip(*pt.sh) && part_faults(pt)) return cudaErrorIllegalAddress;
  }
  for (Part& pt : rx.parts) {
    for (Incoming& in : pt.in) {
      if (skip(*pt.sh)) break;
      if (ncclResult_t r = open_msg(*pt.sh, &in, rx.limit); r != ncclSuccess) broken(*pt.sh, r);
    }
  }
  for (Part& pt : rx.parts) {
    if (!skip(*pt.sh)) {
      if (ncclResult_t r = deliver(&pt); r != ncclSuccess) broken(*pt.sh, r);
    }
    for (Incoming& in : pt.in) close_msg(&in);
  }
  return cudaSuccess;
}

// Numbers a group's messages (in call order: sends, receives, collectives) and enqueues its two
// ops on its stream. The numbering is kept only once an op is queued.
ncclResult_t launch(const std::vector<Op>& ops) {
  if (ops.empty()) return ncclSuccess;
  for (const Op& op : ops) {
    if (ncclResult_t r = check_op(op); r != ncclSuccess) return r;
  }
  const cudaStream_t stream = ops[0].stream;
  for (const Op& op : ops) {
    if (op.stream != stream) {
      return fail(ncclInvalidUsage,
                  "ncclGroupEnd: the group's ops use streams %p and %p: the fake runs a group on "
                  "one stream",
                  static_cast<void*>(stream), static_cast<void*>(op.stream));
    }
  }
  struct Counters {
    ncclComm* c;
    std::vector<std::uint64_t> sent, received;
    std::uint64_t collectives;
  };
  std::vector<Counters> saved;
  for (const Op& op : ops) {
    ncclComm* c = op.comm;
    if (std::none_of(saved.begin(), saved.end(), [c](const Counters& s) { return s.c == c; })) {
      saved.push_back({c, c->sent, c->received, c->collectives});
    }
  }
  auto restore = [&saved] {
    for (Counters& s : saved) {
      s.c->sent = s.sent;
      s.c->received = s.received;
      s.c->collectives = s.collectives;
    }
  };
  std::vector<Outgoing> out;
  auto rx = std::make_shared<Receives>();
  rx->limit = timeout_s();
  for (const Op& op : ops) {
    if (op.kind != Kind::kSend) continue;
    ncclComm* c = op.comm;
    out.push_back({c->sh, kind_name(op.kind), p2p_name(c->rank, op.peer, c->sent[op.peer]++),
                   op.send, op.count * type_size(op.type)});
  }
  for (const Op& op : ops) {
    if (op.kind != Kind::kRecv) continue;
    ncclComm* c = op.comm;
    Part pt{op, c->sh};
    pt.in.push_back({p2p_name(op.peer, c->rank, c->received[op.peer]++), op.peer,
                     op.count * type_size(op.type)});
    rx->parts.push_back(std::move(pt));
  }
  for (const Op& op : ops) {
    if (op.kind == Kind::kSend || op.kind == Kind::kRecv) continue;
    ncclComm* c = op.comm;
    const std::size_t bytes = op.count * type_size(op.type);
    Part pt{op, c->sh, c->collectives++};
    const bool root = op.kind == Kind::kBroadcast;
    for (int p = 0; p < c->nranks; ++p) {
      if (p == c->rank) continue;
      if (!root || c->rank == op.peer) {
        out.push_back({c->sh, kind_name(op.kind), coll_name(pt.k, c->rank, p), op.send, bytes});
      }
      if (!root || p == op.peer) pt.in.push_back({coll_name(pt.k, p, c->rank), p, bytes});
    }
    rx->parts.push_back(std::move(pt));
  }
  bool queued = false;
  auto refused = [&](cudaError_t e) {
    if (!queued) restore();
    return fail(ncclUnhandledCudaError, "%s: enqueueing on stream %p: %s", kind_name(ops[0].kind),
                static_cast<void*>(stream), cudaGetErrorString(e));
  };
  if (!out.empty()) {
    if (cudaError_t e = fake_cuda_enqueue_checked(
            stream, [out = std::move(out)] { return send_all(out); });
        e != cudaSuccess) {
      return refused(e);
    }
    queued = true;
  }
  if (!rx->parts.empty()) {
    if (cudaError_t e = fake_cuda_enqueue_when(
            stream, [rx] { return all_there(*rx); }, [rx] { return receive_all(*rx); });
        e != cudaSuccess) {
      return refused(e);
    }
  }
  return ncclSuccess;
}

// Checks an op, then queues it in the group or enqueues it at once.
ncclResult_t submit(const Op& op) {
  if (ncclResult_t r = check_op(op); r != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess) group.error = r;
    return r;
  }
  if (group.depth > 0) {
    group.ops.push_back(op);
    return ncclSuccess;
  }
  return launch({op});
}

ncclResult_t comm_destroy(ncclComm_t comm, const char* what) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  {
    std::lock_guard<std::mutex> l(mu);
    if (live().erase(comm) == 0) {
      return fail(ncclInvalidArgument, "%s: invalid communicator %p", what,
                  static_cast<void*>(comm));
    }
  }
  // Ops of this thread's open group on this comm go with it; those queued on a stream do nothing
  // from now on (an op running on another thread finishes first: it holds the lock).
  std::erase_if(group.ops, [comm](const Op& op) { return op.comm == comm; });
  const std::shared_ptr<Shared> sh = comm->sh;
  {
    std::lock_guard<std::mutex> l(sh->mu);
    sh->gone = true;
  }
  // The rank that sees every rank done removes the directory: every rank is past its join wait
  // and no op of theirs touches it any more.
  touch(sh->dir + "/done-" + std::to_string(sh->rank), false);
  bool all = true;
  for (int i = 0; i < sh->nranks && all; ++i) {
    all = exists(sh->dir + "/done-" + std::to_string(i));
  }
  if (all) remove_dir(sh->dir);
  delete comm;
  return ncclSuccess;
}

}  // namespace
}  // namespace fake_nccl_detail

using namespace fake_nccl_detail;

// ---- versions, ids, errors ---------------------------------------------------------------------

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  std::string base;
  if (const char* v = std::getenv("FAKE_NCCL_DIR"); v != nullptr && *v != '\0') {
    base = v;
  } else {
    struct stat st;
    const bool shm = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
                     ::access("/dev/shm", W_OK | X_OK) == 0;
    base = shm ? "/dev/shm" : "/tmp";
  }
  std::string path = base + "/fake-nccl-XXXXXX";
  if (path.size() + 1 > sizeof uniqueId->internal) {
    return fail(ncclInternalError, "ncclGetUniqueId: %s does not fit in the %zu bytes of an id",
                path.c_str(), sizeof uniqueId->internal);
  }
  if (::mkdtemp(path.data()) == nullptr) {
    return fail(ncclSystemError, "ncclGetUniqueId: mkdtemp(%s): %s", path.c_str(),
                std::strerror(errno));
  }
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  std::memcpy(uniqueId->internal, path.c_str(), path.size() + 1);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

// This thread's last message (NCCL's is per process; the comm argument is unused there too). A
// failure found when an op ran is the message of the thread that ran it, and of a thread that
// then got it from ncclCommGetAsyncError or a call on the comm.
const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last_error.c_str();
}

// ---- communicators -----------------------------------------------------------------------------

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
  }
  if (std::memchr(commId.internal, '\0', sizeof commId.internal) == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommInitRank: not an id from ncclGetUniqueId");
  }
  const std::string dir = commId.internal;
  struct stat st;
  if (dir.empty() || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return fail(ncclInvalidArgument, "ncclCommInitRank: the id's directory '%s' does not exist",
                dir.c_str());
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "ncclCommInitRank: cudaGetDevice: %s",
                cudaGetErrorString(e));
  }
  const std::string join = dir + "/join-" + std::to_string(rank);
  if (!touch(join, true)) {
    if (errno == EEXIST) {
      return fail(ncclInvalidUsage, "ncclCommInitRank: rank %d already joined %s", rank,
                  dir.c_str());
    }
    return fail(ncclSystemError, "ncclCommInitRank: cannot create %s: %s", join.c_str(),
                std::strerror(errno));
  }
  const double limit = timeout_s();
  const auto deadline = Clock::now() + std::chrono::duration<double>(limit);
  std::chrono::microseconds d(50);
  for (;;) {
    std::string missing;
    for (int i = 0; i < nranks; ++i) {
      if (!exists(dir + "/join-" + std::to_string(i))) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      }
    }
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      ::unlink(join.c_str());
      ::rmdir(dir.c_str());  // best effort: the last rank out removes it
      return fail(ncclSystemError,
                  "ncclCommInitRank: rank %d of %d timed out after %g s waiting for rank(s) %s "
                  "to join %s",
                  rank, nranks, limit, missing.c_str(), dir.c_str());
    }
    nap(&d);
  }
  auto* c = new ncclComm;
  c->sh = std::make_shared<Shared>();
  c->sh->dir = dir;
  c->sh->nranks = nranks;
  c->sh->rank = rank;
  c->nranks = nranks;
  c->rank = rank;
  c->device = device;
  c->sent.assign(nranks, 0);
  c->received.assign(nranks, 0);
  {
    std::lock_guard<std::mutex> l(mu);
    live().insert(c);
  }
  *comm = c;
  return ncclSuccess;
}

// The config is read for its magic only: every comm is blocking (a nonblocking one just never
// returns ncclInProgress).
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  if (config != nullptr && config->magic != 0xcafebeef) {
    return fail(ncclInvalidArgument,
                "ncclCommInitRankConfig: config not set with NCCL_CONFIG_INITIALIZER");
  }
  return ncclCommInitRank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comm is null");
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev %d", ndev);
  if (ndev != 1) {
    return fail(ncclInvalidUsage, "ncclCommInitAll: the fake supports ndev == 1 only, not %d",
                ndev);
  }
  const int dev = devlist != nullptr ? devlist[0] : 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || dev < 0 || dev >= count) {
    return fail(ncclInvalidArgument, "ncclCommInitAll: invalid device %d", dev);
  }
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return r;
  if (ncclResult_t r = ncclCommInitRank(comm, 1, id, 0); r != ncclSuccess) {
    ::rmdir(id.internal);
    return r;
  }
  (*comm)->device = dev;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return comm_destroy(comm, "ncclCommDestroy"); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return comm_destroy(comm, "ncclCommAbort"); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || !is_live(comm) || asyncError == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: invalid argument");
  }
  std::lock_guard<std::mutex> l(comm->sh->mu);
  *asyncError = comm->sh->failed;
  if (comm->sh->failed != ncclSuccess) last_error = comm->sh->failure;  // for ncclGetLastError
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || !is_live(comm) || count == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommCount: invalid argument");
  }
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || !is_live(comm) || device == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommCuDevice: invalid argument");
  }
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || !is_live(comm) || rank == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommUserRank: invalid argument");
  }
  *rank = comm->rank;
  return ncclSuccess;
}

// ---- groups and operations ---------------------------------------------------------------------

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<Op> ops = std::move(group.ops);
  const ncclResult_t refused = group.error;
  group.ops.clear();
  group.error = ncclSuccess;
  if (refused != ncclSuccess) return refused;  // the group is dropped, as NCCL does
  return launch(ops);
}

// The calls themselves: one Op each (designated in Op's member order).
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return submit(Op{.kind = Kind::kSend, .comm = comm, .send = sendbuff, .count = count,
                   .type = datatype, .peer = peer, .stream = stream});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return submit(Op{.kind = Kind::kRecv, .comm = comm, .recv = recvbuff, .count = count,
                   .type = datatype, .peer = peer, .stream = stream});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(Op{.kind = Kind::kAllGather, .comm = comm, .send = sendbuff, .recv = recvbuff,
                   .count = sendcount, .type = datatype, .stream = stream});
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(Op{.kind = Kind::kAllReduce, .comm = comm, .send = sendbuff, .recv = recvbuff,
                   .count = count, .type = datatype, .red = op, .stream = stream});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(Op{.kind = Kind::kBroadcast, .comm = comm, .send = sendbuff, .recv = recvbuff,
                   .count = count, .type = datatype, .peer = root, .stream = stream});
}
