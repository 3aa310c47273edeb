#include "runtime/proxy/cuda/cuda_collective.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/proxy/cuda/cuda_driver.h"
#include "runtime/proxy/cuda/cuda_kernels.h"
#if defined(ORRERY_HAVE_NCCL)
#include "runtime/proxy/cuda/nccl_allreduce.h"
#include "runtime/proxy/cuda/nccl_api.h"
#endif

namespace orrery::runtime::cuda {
namespace {

void* dp(std::uint64_t a) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)); }

#if defined(ORRERY_HAVE_NCCL)
// The communicator, formed on a thread of its own: ncclCommInitRank blocks until every proxy of
// the job joins, and NCCL connects send/recv peers at their first use, blocking the calling
// thread until the peer does the same. Both happen here, then, with a warm-up allreduce of a few
// floats on the thread's own stream, never on the proxy's thread (which serves other jobs, whose
// NCCL kernels may wait for it). Shared with the thread: when the collective is gone first, the
// thread tears down what it made.
struct CommInit {
  std::mutex mu;
  bool done = false, abandoned = false;
  std::string why;
  // Handed over once done (and taken by the collective, or torn down by the thread).
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<RankOrderedAllreduce> ar;

  // What the thread formed, to its taker (once; under mu, after done without an error).
  void hand_over(ncclComm_t* c, cudaStream_t* s, std::unique_ptr<RankOrderedAllreduce>* a) {
    *c = comm;
    *s = stream;
    *a = std::move(ar);
    comm = nullptr;
  }

  static void teardown(const NcclApi* api, ncclComm_t comm,
                       std::unique_ptr<RankOrderedAllreduce> ar, cudaStream_t stream) {
    if (comm != nullptr) api->ncclCommAbort(comm);  // first: nothing may wait for a peer
    ar.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  static std::shared_ptr<CommInit> start(const NcclApi* api, int device,
                                         const DeviceCollectiveSetup& setup) {
    auto st = std::make_shared<CommInit>();
    ncclUniqueId uid;
    static_assert(sizeof uid.internal == sizeof(CollectiveId));
    std::memcpy(uid.internal, setup.id.data(), sizeof uid.internal);
    std::thread([st, api, device, setup, uid] {
      ncclComm_t comm = nullptr;
      cudaStream_t stream = nullptr;
      std::unique_ptr<RankOrderedAllreduce> ar;
      std::string why = form(api, device, setup, uid, &comm, &stream, &ar);
      std::lock_guard<std::mutex> l(st->mu);
      st->done = true;
      st->why = why;
      if (st->abandoned || !why.empty()) {
        teardown(api, comm, std::move(ar), stream);
      } else {
        st->comm = comm;
        st->stream = stream;
        st->ar = std::move(ar);
      }
    }).detach();
    return st;
  }

  // Empty on success.
  static std::string form(const NcclApi* api, int device, const DeviceCollectiveSetup& setup,
                          const ncclUniqueId& uid, ncclComm_t* comm, cudaStream_t* stream,
                          std::unique_ptr<RankOrderedAllreduce>* ar) {
    const int devices = static_cast<int>(setup.ranks_by_device.size());
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
      return runtime_error("cudaSetDevice (NCCL communicator thread)", e);
    }
    if (cudaError_t e = cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
        e != cudaSuccess) {
      *stream = nullptr;
      return runtime_error("cudaStreamCreate (NCCL communicator thread)", e);
    }
    if (ncclResult_t r = api->ncclCommInitRank(comm, devices, uid, setup.device_rank);
        r != ncclSuccess) {
      *comm = nullptr;
      return std::string("ncclCommInitRank: ") + api->ncclGetErrorString(r);
    }
    auto made = RankOrderedAllreduce::create(*comm, setup.device_rank, setup.ranks_by_device,
                                             setup.count, *stream);
    if (!made) return made.reason();
    *ar = std::make_unique<RankOrderedAllreduce>(std::move(made.value()));
    // Warm-up: one float per device (fewer if the job's count is smaller), from zeros.
    const std::uint64_t n = std::min<std::uint64_t>(setup.count, devices);
    const std::size_t wd = setup.ranks_by_device[setup.device_rank].size();
    float* tmp = nullptr;
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&tmp),
                                        (wd + 1) * n * sizeof(float), *stream);
        e != cudaSuccess) {
      return runtime_error("cudaMallocAsync (NCCL warm-up)", e);
    }
    std::vector<const float*> rows(wd);
    for (std::size_t i = 0; i < wd; ++i) rows[i] = tmp + i * n;
    Status st = runtime_status(cudaMemsetAsync(tmp, 0, (wd + 1) * n * sizeof(float), *stream),
                               "cudaMemsetAsync (NCCL warm-up)");
    if (st) st = (*ar)->allreduce(rows, tmp + wd * n, n);
    cudaFreeAsync(tmp, *stream);
    if (st) st = runtime_status(cudaStreamSynchronize(*stream), "NCCL warm-up");
    return st ? std::string() : "warm-up allreduce: " + st.reason();
  }
};

long init_timeout_s() {
  const char* e = std::getenv("ORRERY_NCCL_INIT_TIMEOUT_S");
  const long v = e != nullptr ? std::atol(e) : 0;
  return v > 0 ? v : 300;
}
#endif

class CudaCollective final : public DeviceCollective {
 public:
  CudaCollective(const DeviceCollectiveSetup& setup, CudaCollectiveEnv env)
      : setup_(setup), env_(std::move(env)) {}
  ~CudaCollective() override;

  Status init();
  Status contribute(int rank, std::int64_t step, std::uint64_t addr,
                    std::uint64_t count) override;
  Result<bool> ready(std::int64_t step) override;
  Status deliver(int rank, std::int64_t step, std::uint64_t addr, std::uint64_t count) override;

 private:
  // Starts the sum of the step whose contributions are all in, once it can (the communicator).
  Status try_launch();
  // The stream the sum runs on: the collective's own (one device) or the communicator's.
  cudaStream_t run_stream() const;
  Status check(const std::string& what, int rank, std::uint64_t count) const;
  float* slot(std::size_t i) const { return slots_ + i * setup_.count; }

  DeviceCollectiveSetup setup_;
  CudaCollectiveEnv env_;
  const std::vector<int>* local_ = nullptr;  // this device's ranks, ascending
  int devices_ = 1;
  float* slots_ = nullptr;
  float* result_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> contributed_;
  cudaEvent_t done_ = nullptr;
  std::int64_t got_step_ = -1, pending_step_ = -1, launched_step_ = -1;
  std::vector<bool> got_;
  std::size_t got_count_ = 0;
  std::string failed_;
#if defined(ORRERY_HAVE_NCCL)
  const NcclApi* api_ = nullptr;
  std::shared_ptr<CommInit> init_;
  std::chrono::steady_clock::time_point init_start_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t nccl_stream_ = nullptr;
  std::unique_ptr<RankOrderedAllreduce> ar_;
#endif
};

Status CudaCollective::init() {
  const auto& byd = setup_.ranks_by_device;
  devices_ = static_cast<int>(byd.size());
  if (devices_ < 1 || setup_.device_rank < 0 || setup_.device_rank >= devices_) {
    return Status::Error("device collective: device rank " + std::to_string(setup_.device_rank) +
                         " of " + std::to_string(devices_));
  }
  local_ = &byd[static_cast<std::size_t>(setup_.device_rank)];
  if (local_->empty() || setup_.count == 0) {
    return Status::Error("device collective: no rank or no data on this device");
  }
  if (!std::is_sorted(local_->begin(), local_->end())) {
    return Status::Error("device collective: this device's ranks are not ascending");
  }
  const std::size_t wd = local_->size();
  got_.assign(wd, false);
  const std::uint64_t bytes = setup_.count * sizeof(float);
  if (auto s = env_.rt(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       "cudaStreamCreate (allreduce)");
      !s) {
    stream_ = nullptr;
    return s;
  }
  // Stream-ordered, so that freeing them never waits for the whole device (where another
  // communicator's kernels may wait for a peer); usable from every stream once allocated.
  if (auto s = env_.rt(cudaMallocAsync(reinterpret_cast<void**>(&slots_), wd * bytes, stream_),
                       "cudaMallocAsync (allreduce contribution slots)");
      !s) {
    slots_ = nullptr;
    return s;
  }
  if (auto s = env_.rt(cudaMallocAsync(reinterpret_cast<void**>(&result_), bytes, stream_),
                       "cudaMallocAsync (allreduce result)");
      !s) {
    result_ = nullptr;
    return s;
  }
  if (auto s = env_.rt(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (allreduce)"); !s) {
    return s;
  }
  contributed_.assign(wd, nullptr);
  for (auto& ev : contributed_) {
    if (auto s = env_.rt(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
        !s) {
      ev = nullptr;
      return s;
    }
  }
  if (auto s = env_.rt(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
      !s) {
    done_ = nullptr;
    return s;
  }
  if (devices_ == 1) return Status::Ok();
#if defined(ORRERY_HAVE_NCCL)
  std::string why;
  api_ = nccl_api(&why);
  if (api_ == nullptr) return Status::Error(why);
  init_ = CommInit::start(api_, env_.device, setup_);
  init_start_ = std::chrono::steady_clock::now();
  return Status::Ok();
#else
  return Status::Error("this orrery-proxy was built without NCCL (nccl.h not found)");
#endif
}

CudaCollective::~CudaCollective() {
#if defined(ORRERY_HAVE_NCCL)
  if (init_) {
    std::lock_guard<std::mutex> l(init_->mu);
    if (!init_->done) {
      init_->abandoned = true;  // the thread tears down what it makes
    } else if (comm_ == nullptr && init_->comm != nullptr) {
      init_->hand_over(&comm_, &nccl_stream_, &ar_);  // formed but never used
    }
  }
  // Abort first: a proxy of the job may be gone, and an NCCL kernel waiting for it would never
  // end (at a normal end nothing is in flight). The slots are freed after what the
  // communicator's stream still has queued.
  if (comm_ != nullptr) api_->ncclCommAbort(comm_);
  if (nccl_stream_ != nullptr && stream_ != nullptr && done_ != nullptr) {
    cudaEventRecord(done_, nccl_stream_);
    cudaStreamWaitEvent(stream_, done_, 0);
  }
  CommInit::teardown(api_, nullptr, std::move(ar_), nccl_stream_);
#endif
  // The proxy has released the job's ranks (their streams synchronized) before it drops this.
  if (stream_ != nullptr) {
    if (slots_ != nullptr) cudaFreeAsync(slots_, stream_);
    if (result_ != nullptr) cudaFreeAsync(result_, stream_);
    cudaStreamDestroy(stream_);
  }
  for (cudaEvent_t ev : contributed_) {
    if (ev != nullptr) cudaEventDestroy(ev);
  }
  if (done_ != nullptr) cudaEventDestroy(done_);
}

Status CudaCollective::check(const std::string& what, int rank, std::uint64_t count) const {
  if (!failed_.empty()) return Status::Error(failed_);
  if (count != setup_.count) {
    return Status::Error(what + ": " + std::to_string(count) + " floats, but this job's "
                         "allreduce on the device has " + std::to_string(setup_.count));
  }
  if (!std::binary_search(local_->begin(), local_->end(), rank)) {
    return Status::Error(what + ": rank " + std::to_string(rank) + " is not on this device");
  }
  return Status::Ok();
}

Status CudaCollective::contribute(int rank, std::int64_t step, std::uint64_t addr,
                                  std::uint64_t count) {
  if (auto s = check("allreduce", rank, count); !s) return s;
  if (step != got_step_) {
    if (got_count_ != 0) {
      return Status::Error("allreduce: rank " + std::to_string(rank) + " contributes step " +
                           std::to_string(step) + " while step " + std::to_string(got_step_) +
                           " still waits for this device's other ranks");
    }
    got_step_ = step;
  }
  const std::size_t i = static_cast<std::size_t>(
      std::lower_bound(local_->begin(), local_->end(), rank) - local_->begin());
  if (got_[i]) {
    return Status::Error("allreduce: rank " + std::to_string(rank) + " contributed twice");
  }
  cudaStream_t ws = env_.worker_stream();
  if (auto s = env_.rt(cudaMemcpyAsync(slot(i), dp(addr), count * sizeof(float),
                                       cudaMemcpyDeviceToDevice, ws),
                       "cudaMemcpyAsync (allreduce contribution)");
      !s) {
    return s;
  }
  if (auto s = env_.rt(cudaEventRecord(contributed_[i], ws), "cudaEventRecord"); !s) return s;
  got_[i] = true;
  if (++got_count_ < got_.size()) return Status::Ok();
  got_.assign(got_.size(), false);
  got_count_ = 0;
  // Started by ready(), which the proxy asks once the step's flags are in from every proxy: by
  // then every device has its contributions queued, and the NCCL kernels do not sit on the GPU
  // waiting for peers still computing.
  pending_step_ = step;
  return Status::Ok();
}

cudaStream_t CudaCollective::run_stream() const {
#if defined(ORRERY_HAVE_NCCL)
  if (devices_ > 1) return nccl_stream_;
#endif
  return stream_;
}

Status CudaCollective::try_launch() {
  if (pending_step_ < 0) return Status::Ok();
#if defined(ORRERY_HAVE_NCCL)
  if (devices_ > 1 && !ar_) {
    std::lock_guard<std::mutex> l(init_->mu);
    if (!init_->done) {
      const auto waited = std::chrono::steady_clock::now() - init_start_;
      if (waited < std::chrono::seconds(init_timeout_s())) return Status::Ok();  // later
      failed_ = "the NCCL communicator of " + std::to_string(devices_) +
                " proxies was not formed within " + std::to_string(init_timeout_s()) +
                " s (ORRERY_NCCL_INIT_TIMEOUT_S): a proxy of the job did not join";
      return Status::Error(failed_);
    }
    if (!init_->why.empty() || init_->comm == nullptr) {
      failed_ = "the NCCL communicator: " + init_->why;
      return Status::Error(failed_);
    }
    init_->hand_over(&comm_, &nccl_stream_, &ar_);
  }
#endif
  cudaStream_t run = run_stream();
  for (cudaEvent_t ev : contributed_) {
    if (auto s = env_.rt(cudaStreamWaitEvent(run, ev, 0), "cudaStreamWaitEvent"); !s) return s;
  }
  std::vector<const float*> rows(local_->size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = slot(i);
  Status st;
  if (devices_ == 1) {
    st = launch_sum_in_rank_order(rows.data(), static_cast<int>(rows.size()), setup_.count,
                                  result_, run);
  } else {
#if defined(ORRERY_HAVE_NCCL)
    st = ar_->allreduce(rows, result_, setup_.count);
#endif
  }
  if (!st) {
    failed_ = st.reason();
    return st;
  }
  if (auto s = env_.rt(cudaEventRecord(done_, run), "cudaEventRecord"); !s) return s;
  launched_step_ = pending_step_;
  pending_step_ = -1;
  return Status::Ok();
}

Result<bool> CudaCollective::ready(std::int64_t step) {
  if (!failed_.empty()) return Status::Error(failed_);
  if (pending_step_ == step) {
    if (auto s = try_launch(); !s) return s;
  }
  if (launched_step_ != step) return false;
  const cudaError_t e = cudaEventQuery(done_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
#if defined(ORRERY_HAVE_NCCL)
    // A peer gone or a transport failure: NCCL reports it here, and its kernels may never end.
    ncclResult_t async = ncclSuccess;
    if (comm_ != nullptr && api_->ncclCommGetAsyncError(comm_, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress) {
      failed_ = std::string("NCCL: ") + api_->ncclGetErrorString(async);
      if (const char* last = api_->ncclGetLastError(comm_); last != nullptr && *last) {
        failed_ += std::string(" (") + last + ")";
      }
      return Status::Error(failed_);
    }
#endif
    return false;
  }
  if (auto s = env_.rt(e, "cudaEventQuery (allreduce)"); !s) return s;
  return true;
}

Status CudaCollective::deliver(int rank, std::int64_t step, std::uint64_t addr,
                               std::uint64_t count) {
  if (auto s = check("allreduce result", rank, count); !s) return s;
  if (launched_step_ != step) {
    return Status::Error("allreduce result: step " + std::to_string(step) + " was not summed");
  }
  cudaStream_t ws = env_.worker_stream();
  if (auto s = env_.rt(cudaStreamWaitEvent(ws, done_, 0), "cudaStreamWaitEvent"); !s) return s;
  return env_.rt(cudaMemcpyAsync(dp(addr), result_, count * sizeof(float),
                                 cudaMemcpyDeviceToDevice, ws),
                 "cudaMemcpyAsync (allreduce result)");
}

}  // namespace

bool can_reduce_across_devices(std::string* why) {
#if defined(ORRERY_HAVE_NCCL)
  return nccl_api(why) != nullptr;
#else
  if (why != nullptr) *why = "built without NCCL (nccl.h not found)";
  return false;
#endif
}

Result<CollectiveId> new_nccl_id() {
#if defined(ORRERY_HAVE_NCCL)
  std::string why;
  const NcclApi* api = nccl_api(&why);
  if (api == nullptr) return Status::Error(why);
  ncclUniqueId uid;
  if (ncclResult_t r = api->ncclGetUniqueId(&uid); r != ncclSuccess) {
    return Status::Error(std::string("ncclGetUniqueId: ") + api->ncclGetErrorString(r));
  }
  CollectiveId id;
  std::memcpy(id.data(), uid.internal, id.size());
  return id;
#else
  return Status::Error("built without NCCL (nccl.h not found)");
#endif
}

Result<std::unique_ptr<DeviceCollective>> open_cuda_collective(const DeviceCollectiveSetup& setup,
                                                               CudaCollectiveEnv env) {
  auto c = std::make_unique<CudaCollective>(setup, std::move(env));
  if (auto s = c->init(); !s) return s;
  return std::unique_ptr<DeviceCollective>(std::move(c));
}

}  // namespace orrery::runtime::cuda
