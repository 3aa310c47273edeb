#include "runtime/proxy/ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <thread>

namespace orrery::runtime {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, long timeout_ns) {
  timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected,
            timeout_ns > 0 ? &ts : nullptr, nullptr, 0);
}

void spin_pause(int n) {
  if (n % 64 == 0) {
    sched_yield();
  } else {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr,
            nullptr, 0);
}

ShmMapping& ShmMapping::operator=(ShmMapping&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) ::munmap(p_, n_);
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

ShmMapping::~ShmMapping() {
  if (p_ != nullptr) ::munmap(p_, n_);
}

Result<ShmMapping> ShmMapping::create(const std::string& name, std::size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Status::Error("shm_open(" + name + ", create): " + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return Status::Error("ftruncate(" + name + "): " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return Status::Error("mmap(" + name + "): " + std::strerror(errno));
  }
  ShmMapping m;
  m.p_ = p;
  m.n_ = bytes;
  return m;
}

Result<ShmMapping> ShmMapping::open(const std::string& name, std::size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Status::Error("shm_open(" + name + "): " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < bytes) {
    ::close(fd);
    return Status::Error("shm object " + name + " is smaller than " + std::to_string(bytes) +
                         " bytes (not initialised yet, or not what was expected)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Status::Error("mmap(" + name + "): " + std::strerror(errno));
  ShmMapping m;
  m.p_ = p;
  m.n_ = bytes;
  return m;
}

Response WorkerRing::call(const Request& r, long spin_ns) {
  submit(r);
  return wait(spin_ns);
}

void WorkerRing::submit(const Request& r) {
  const std::uint32_t head = s_->req_head.load(std::memory_order_relaxed);
  s_->req[head % kRingDepth] = r;
  s_->req_head.store(head + 1, std::memory_order_seq_cst);
  ProxyHeader& h = seg_->header;
  h.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (h.proxy_sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&h.doorbell);
}

Response WorkerRing::wait(long spin_ns) {
  ProxyHeader& h = seg_->header;
  const std::uint32_t tail = s_->resp_tail.load(std::memory_order_relaxed);
  auto start = std::chrono::steady_clock::now();
  int n = 0;
  while (s_->resp_head.load(std::memory_order_acquire) == tail) {
    spin_pause(++n);
    if (n % 64 == 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(spin_ns)) {
      s_->worker_sleeping.store(1, std::memory_order_seq_cst);
      const std::uint32_t seen = s_->resp_head.load(std::memory_order_seq_cst);
      if (seen == tail) futex_wait(&s_->resp_head, seen, 100'000'000);
      s_->worker_sleeping.store(0, std::memory_order_relaxed);
      // A proxy that died never answers: say so rather than wait forever.
      if (s_->resp_head.load(std::memory_order_acquire) == tail &&
          ::kill(h.pid, 0) != 0 && errno == ESRCH) {
        Response dead;
        dead.code = -1;
        std::snprintf(dead.error, sizeof dead.error, "the proxy (pid %d) is gone", h.pid);
        return dead;
      }
    }
  }
  Response out = s_->resp[tail % kRingDepth];
  s_->resp_tail.store(tail + 1, std::memory_order_release);
  return out;
}

void publish_response(WorkerSlot* s, const Response& r) {
  const std::uint32_t head = s->resp_head.load(std::memory_order_relaxed);
  s->resp[head % kRingDepth] = r;
  s->resp_head.store(head + 1, std::memory_order_seq_cst);
  if (s->worker_sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&s->resp_head);
}

}  // namespace orrery::runtime
