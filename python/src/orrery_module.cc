// _orrery: the worker library (runtime/worker/worker.h) as a Python extension. Thin on purpose:
// every Pythonic convenience lives in python/orrery/__init__.py; this file only crosses the
// language boundary.
//
// Contract of the crossing:
//   - Device pointers are Python ints (stable addresses, as in C++).
//   - Host memory is named either by a raw address and a length (torch's data_ptr(): no copy,
//     no buffer protocol on tensors) or by a Python buffer (bytes, bytearray, numpy array).
//   - Every call that waits on the proxy (copies, allreduce, step_boundary, synchronize ...)
//     releases the GIL, so other Python threads (data loaders) run meanwhile.
//   - A failed call raises orrery.Error (a RuntimeError) with the Status reason.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/worker/worker.h"

namespace py = pybind11;
using orrery::Status;
using orrery::runtime::DevPtr;
using orrery::runtime::Worker;
using orrery::runtime::WorkerEnv;

namespace {

struct OrreryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(const Status& s) {
  if (!s.ok()) throw OrreryError(s.reason());
}

template <typename T>
T take(orrery::Result<T> r) {
  if (!r.ok()) throw OrreryError(r.reason());
  return std::move(r.value());
}

void* addr(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

// A Worker owned by Python. close() says goodbye to the proxy (the proxy frees this rank's
// memory); so does garbage collection. Registered host-state buffers are kept alive here, since
// the worker library writes into and reads from them until the end.
class PyWorker {
 public:
  explicit PyWorker(std::unique_ptr<Worker> w) : w_(std::move(w)) {}

  Worker& w() {
    if (!w_) throw OrreryError("this orrery worker is closed");
    return *w_;
  }
  void close() {
    py::gil_scoped_release nogil;
    w_.reset();
  }
  bool closed() const { return !w_; }

  void register_host_state(py::buffer b) {
    py::buffer_info info = b.request(true);  // writable: a restore fills it
    const auto n = static_cast<std::uint64_t>(info.size * info.itemsize);
    check(w().register_host_state(info.ptr, n));
    keep_.push_back(std::move(b));
  }

 private:
  std::unique_ptr<Worker> w_;
  std::vector<py::object> keep_;
};

py::dict env_dict(const WorkerEnv& e) {
  py::dict d;
  d["proxy"] = e.proxy;
  d["collective"] = e.collective;
  d["job"] = e.job;
  d["epoch"] = e.epoch;
  d["rank"] = e.rank;
  d["world"] = e.world;
  d["restore_step"] = e.restore_step;
  d["splice"] = e.splice;
  return d;
}

WorkerEnv env_from_dict(const py::dict& d) {
  WorkerEnv e;
  e.proxy = d["proxy"].cast<std::string>();
  e.collective = d["collective"].cast<std::string>();
  e.job = d["job"].cast<int>();
  e.epoch = d["epoch"].cast<std::int64_t>();
  e.rank = d["rank"].cast<int>();
  e.world = d["world"].cast<int>();
  if (d.contains("restore_step")) e.restore_step = d["restore_step"].cast<std::int64_t>();
  if (d.contains("splice")) e.splice = d["splice"].cast<std::vector<int>>();
  return e;
}

}  // namespace

PYBIND11_MODULE(_orrery, m) {
  m.doc() = "orrery's worker library (runtime/worker/worker.h); use the `orrery` package";
  static py::exception<OrreryError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OrreryError& e) {
      error(e.what());
    }
  });

  m.attr("FLAG_CHECKPOINT") = orrery::runtime::kFlagCheckpoint;
  m.attr("FLAG_STOP") = orrery::runtime::kFlagStop;
  m.attr("EXIT_STOPPED") = orrery::runtime::kExitStopped;
  m.attr("DATA_BYTES") = orrery::runtime::kDataBytes;

  m.def("env_from_environment",
        [] { return env_dict(take(orrery::runtime::worker_env_from_environment())); },
        "The worker environment (ORRERY_PROXY, ORRERY_RANK ...) as a dict; raises if incomplete.");

  py::class_<orrery::runtime::StepBoundary>(m, "StepBoundary")
      .def_readonly("checkpointed", &orrery::runtime::StepBoundary::checkpointed)
      .def_readonly("stop", &orrery::runtime::StepBoundary::stop)
      .def("__repr__", [](const orrery::runtime::StepBoundary& b) {
        return std::string("StepBoundary(checkpointed=") + (b.checkpointed ? "True" : "False") +
               ", stop=" + (b.stop ? "True" : "False") + ")";
      });

  py::class_<PyWorker>(m, "Worker")
      .def_static("connect_from_env", [] {
        std::unique_ptr<Worker> w;
        {
          py::gil_scoped_release nogil;  // a restore reads the shard before hello answers
          w = take(Worker::connect_from_env());
        }
        return std::make_unique<PyWorker>(std::move(w));
      })
      .def_static("connect", [](const py::dict& d) {
        const WorkerEnv e = env_from_dict(d);
        std::unique_ptr<Worker> w;
        {
          py::gil_scoped_release nogil;
          w = take(Worker::connect(e));
        }
        return std::make_unique<PyWorker>(std::move(w));
      })
      .def("close", &PyWorker::close)
      .def_property_readonly("closed", &PyWorker::closed)
      .def_property_readonly("env", [](PyWorker& p) { return env_dict(p.w().env()); })
      .def_property_readonly("rank", [](PyWorker& p) { return p.w().rank(); })
      .def_property_readonly("world", [](PyWorker& p) { return p.w().world(); })
      .def_property_readonly("job", [](PyWorker& p) { return p.w().env().job; })
      .def_property_readonly("epoch", [](PyWorker& p) { return p.w().env().epoch; })
      .def_property_readonly("splice", [](PyWorker& p) { return p.w().env().splice; })
      .def_property_readonly("restored", [](PyWorker& p) { return p.w().restored(); })
      .def_property_readonly("restored_step", [](PyWorker& p) { return p.w().restored_step(); })
      .def("alloc", [](PyWorker& p, std::uint64_t bytes) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        return take(w.alloc(bytes));
      }, py::arg("nbytes"))
      .def("free", [](PyWorker& p, DevPtr d) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.free(d));
      })
      // Raw host addresses: the caller keeps that memory alive for the call (a tensor's
      // data_ptr() while it holds the tensor).
      .def("copy_h2d", [](PyWorker& p, DevPtr dst, std::uintptr_t src, std::uint64_t n) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.copy_h2d(dst, addr(src), n));
      }, py::arg("dst"), py::arg("src_addr"), py::arg("nbytes"))
      .def("copy_d2h", [](PyWorker& p, std::uintptr_t dst, DevPtr src, std::uint64_t n) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.copy_d2h(addr(dst), src, n));
      }, py::arg("dst_addr"), py::arg("src"), py::arg("nbytes"))
      .def("copy_d2d", [](PyWorker& p, DevPtr dst, DevPtr src, std::uint64_t n) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.copy_d2d(dst, src, n));
      })
      // Python buffers: bytes in, bytes out (small things: headers, metadata).
      .def("write", [](PyWorker& p, DevPtr dst, py::buffer b) {
        Worker& w = p.w();
        py::buffer_info info = b.request();
        const auto n = static_cast<std::uint64_t>(info.size * info.itemsize);
        py::gil_scoped_release nogil;
        check(w.copy_h2d(dst, info.ptr, n));
      }, py::arg("dst"), py::arg("data"))
      .def("read", [](PyWorker& p, DevPtr src, std::uint64_t n) {
        Worker& w = p.w();
        std::string out(n, '\0');
        {
          py::gil_scoped_release nogil;
          check(w.copy_d2h(out.data(), src, n));
        }
        return py::bytes(out);
      }, py::arg("src"), py::arg("nbytes"))
      .def("launch", [](PyWorker& p, const std::string& kernel, const std::vector<std::uint64_t>& a) {
        // The C++ API takes an initializer_list; kernels take at most kRingArgs - 1 arguments.
        Worker& w = p.w();
        if (a.size() + 1 > static_cast<std::size_t>(orrery::runtime::kRingArgs)) {
          throw OrreryError("too many kernel arguments");
        }
        std::uint64_t v[orrery::runtime::kRingArgs] = {};
        for (std::size_t i = 0; i < a.size(); ++i) v[i] = a[i];
        py::gil_scoped_release nogil;
        Status s;
        switch (a.size()) {
          case 0: s = w.launch(kernel, {}); break;
          case 1: s = w.launch(kernel, {v[0]}); break;
          case 2: s = w.launch(kernel, {v[0], v[1]}); break;
          case 3: s = w.launch(kernel, {v[0], v[1], v[2]}); break;
          case 4: s = w.launch(kernel, {v[0], v[1], v[2], v[3]}); break;
          case 5: s = w.launch(kernel, {v[0], v[1], v[2], v[3], v[4]}); break;
          case 6: s = w.launch(kernel, {v[0], v[1], v[2], v[3], v[4], v[5]}); break;
          case 7: s = w.launch(kernel, {v[0], v[1], v[2], v[3], v[4], v[5], v[6]}); break;
          case 8: s = w.launch(kernel, {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}); break;
          default:
            s = Status::Error("launch from Python takes at most 8 arguments");
        }
        check(s);
      })
      .def("synchronize", [](PyWorker& p) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.synchronize());
      })
      .def("allreduce", [](PyWorker& p, DevPtr buf, std::uint64_t count, std::int64_t step) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        return take(w.allreduce(buf, count, step));
      }, py::arg("buf"), py::arg("count"), py::arg("step"),
         "Rank-ordered float32 sum in place across the job; the step's safe point. Returns the "
         "agreed flags (FLAG_CHECKPOINT, FLAG_STOP).")
      // Worker::allreduce_host: host floats summed in place across the job (within a machine
      // straight through a shm segment the job's workers share; the safe point is a one-float
      // allreduce through the proxy). The worker allocates a small device buffer at its first
      // call: see orrery.torch's notes on allocation order (docs/pytorch.md).
      .def("allreduce_host", [](PyWorker& p, std::uintptr_t host, std::uint64_t count,
                                std::int64_t step) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        return take(w.allreduce_host(static_cast<float*>(addr(host)), count, step));
      }, py::arg("host_addr"), py::arg("count"), py::arg("step"))
      // A host buffer reduced through a device buffer, in one crossing: `count` floats at host
      // address `host` go to device buffer `dev`, are summed across the job, and come back.
      .def("allreduce_staged", [](PyWorker& p, std::uintptr_t host, DevPtr dev, std::uint64_t count,
                                std::int64_t step) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        const std::uint64_t n = count * sizeof(float);
        check(w.copy_h2d(dev, addr(host), n));
        const std::uint64_t flags = take(w.allreduce(dev, count, step));
        check(w.copy_d2h(addr(host), dev, n));
        return flags;
      }, py::arg("host_addr"), py::arg("dev"), py::arg("count"), py::arg("step"))
      .def("register_host_state", &PyWorker::register_host_state, py::arg("buffer"),
           "Registers a writable buffer (kept alive) as host state; after a restore it is filled.")
      .def("step_boundary", [](PyWorker& p, std::int64_t steps_done) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        return take(w.step_boundary(steps_done));
      }, py::arg("steps_done"))
      .def("report", [](PyWorker& p, const std::string& text) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.report(text));
      })
      .def("nop", [](PyWorker& p) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        check(w.nop());
      })
      .def("mem_info", [](PyWorker& p) {
        Worker& w = p.w();
        py::gil_scoped_release nogil;
        return take(w.mem_info());
      });
}
