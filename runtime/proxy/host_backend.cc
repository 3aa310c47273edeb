#include "runtime/proxy/host_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "runtime/proxy/kernels.h"

namespace orrery::runtime {
namespace {

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
void* vp(std::uint64_t a) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)); }

constexpr std::uint64_t kStreamChunk = 8u << 20;

class HostParked final : public ParkedMemory {
 public:
  HostParked(void* p, std::uint64_t n) : p_(p), n_(n) {}
  ~HostParked() override {
    if (p_ != nullptr) ::munmap(p_, n_);
  }
  std::uint64_t size() const override { return n_; }
  Status read(void* dst) const override {
    std::memcpy(dst, p_, n_);
    return Status::Ok();
  }
  void* pages() const { return p_; }
  void* release() {
    void* p = p_;
    p_ = nullptr;
    return p;
  }

 private:
  void* p_;
  std::uint64_t n_;
};

class HostBackend final : public DeviceBackend {
 public:
  HostBackend(int device, std::uint64_t mem) : device_(device), total_(mem) {}

  std::string name() const override { return "host"; }
  MemInfo mem_info() const override { return {total_, used_}; }

  Status allocate(std::uint64_t addr, std::uint64_t bytes) override {
    if (used_ + bytes > total_) {
      return Status::Error("device " + std::to_string(device_) + " out of memory: " +
                           std::to_string(bytes) + " bytes asked, " +
                           std::to_string(total_ - used_) + " free");
    }
    void* p = ::mmap(vp(addr), bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return Status::Error("cannot map " + std::to_string(bytes) + " bytes at " + hex(addr) +
                           ": " + std::strerror(errno));
    }
    if (p != vp(addr)) {  // a kernel without MAP_FIXED_NOREPLACE treats it as a hint
      ::munmap(p, bytes);
      return Status::Error("address " + hex(addr) + " is taken");
    }
    used_ += bytes;
    return Status::Ok();
  }

  Status free(std::uint64_t addr, std::uint64_t bytes) override {
    if (::munmap(vp(addr), bytes) != 0) return Status::Error("munmap " + hex(addr) + " failed");
    used_ -= bytes;
    return Status::Ok();
  }

  Status copy_h2d(std::uint64_t dst, const void* src, std::uint64_t n) override {
    std::memcpy(vp(dst), src, n);
    return Status::Ok();
  }
  Status copy_d2h(void* dst, std::uint64_t src, std::uint64_t n) override {
    std::memcpy(dst, vp(src), n);
    return Status::Ok();
  }
  Status copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t n) override {
    std::memmove(vp(dst), vp(src), n);
    return Status::Ok();
  }

  Status launch(std::string_view kernel, const std::uint64_t* args, int nargs) override {
    const KernelDef* k = find_kernel(kernel);
    if (k == nullptr) return Status::Error("no kernel named " + std::string(kernel));
    if (nargs != k->nargs) return Status::Error("kernel " + std::string(kernel) + " takes " +
                                                std::to_string(k->nargs) + " arguments");
    k->run_host(args);
    return Status::Ok();
  }
  Status synchronize() override { return Status::Ok(); }

  // The memory is host memory: the stream hands it out in place, a chunk at a time.
  Status stream_out(std::uint64_t addr, std::uint64_t n, const ChunkSink& sink) override {
    for (std::uint64_t off = 0; off < n; off += kStreamChunk) {
      if (auto st = sink(vp(addr + off), std::min(kStreamChunk, n - off)); !st) return st;
    }
    return Status::Ok();
  }
  Status stream_in(std::uint64_t addr, std::uint64_t n, const ChunkSource& source) override {
    for (std::uint64_t off = 0; off < n; off += kStreamChunk) {
      if (auto st = source(vp(addr + off), std::min(kStreamChunk, n - off)); !st) return st;
    }
    return Status::Ok();
  }
  const void* host_view(std::uint64_t addr, std::uint64_t) const override { return vp(addr); }

  Result<std::unique_ptr<ParkedMemory>> park(std::uint64_t addr, std::uint64_t bytes) override {
    void* spot = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (spot == MAP_FAILED) return Status::Error("no host address space to park " + hex(addr));
    void* p = ::mremap(vp(addr), bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, spot);
    if (p == MAP_FAILED) {
      ::munmap(spot, bytes);
      return Status::Error("cannot park " + hex(addr) + ": " + std::strerror(errno));
    }
    used_ -= bytes;
    return std::unique_ptr<ParkedMemory>(new HostParked(p, bytes));
  }

  Status unpark(std::uint64_t addr, std::unique_ptr<ParkedMemory> parked) override {
    auto* hp = static_cast<HostParked*>(parked.get());
    const std::uint64_t bytes = hp->size();
    if (used_ + bytes > total_) return Status::Error("device out of memory unparking " + hex(addr));
    // The proxy only unparks into a range it has unmapped; MREMAP_FIXED would replace a mapping.
    void* p = ::mremap(hp->pages(), bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED,
                       vp(addr));
    if (p == MAP_FAILED) return Status::Error("cannot unpark " + hex(addr) + ": " + std::strerror(errno));
    hp->release();
    used_ += bytes;
    return Status::Ok();
  }

 private:
  int device_;
  std::uint64_t total_;
  std::uint64_t used_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_host_backend(int device, std::uint64_t mem_bytes) {
  return std::make_unique<HostBackend>(device, mem_bytes);
}

}  // namespace orrery::runtime
