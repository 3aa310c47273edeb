// libFuzzer target for the RPC message handlers' input side: arbitrary bytes decoded as a Cap'n
// Proto message (as the RPC layer would receive a request's parameters) and run through rpc/'s
// checked conversions (rpc/convert.h), which are what every server and agent method applies to a
// peer's request before acting on it. The first byte picks the struct.
//
// Properties: no crash, leak or undefined behaviour on any input (malformed messages make Cap'n
// Proto throw, which the RPC layer turns into an error answer; the conversions themselves must
// not throw nor assert); an accepted job spec passes validate_job_spec and survives a round trip
// through the wire unchanged; an accepted launch has every rank in [0, world) and devices in range.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "core/service/job_spec_check.h"
#include "rpc/convert.h"

using namespace orrery;

namespace {

template <class T, class F>
void with_root(kj::ArrayPtr<const capnp::word> words, F&& f) {
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = 1 << 16;
  opts.nestingLimit = 16;
  // Decoding may throw on a malformed message (as in the RPC layer); conversions must not.
  typename T::Reader root;
  bool decoded = false;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    capnp::FlatArrayMessageReader reader(words, opts);
    root = reader.getRoot<T>();
    decoded = true;
    f(root);
  })) {
    // A malformed message: capnp's readers throw a KJ exception (type FAILED) where they find it,
    // lazily, so inside f too. A standard or unknown exception (KJ wraps those as FAILED with these
    // prefixes) came from a conversion: a bug.
    kj::StringPtr d = e->getDescription();
    if (e->getType() != kj::Exception::Type::FAILED || d.startsWith("std::exception") ||
        d.startsWith("unknown non-KJ exception")) {
      std::fprintf(stderr, "rpc_fuzz: unexpected exception (decoded: %d): %s\n", decoded ? 1 : 0, d.cStr());
      std::abort();
    }
  }
}

bool same(const service::JobSpec& a, const service::JobSpec& b) {
  return a.name == b.name && a.tier == b.tier && a.device_type == b.device_type && a.world == b.world &&
         a.min_devices == b.min_devices && a.max_devices == b.max_devices && a.mem_mib == b.mem_mib &&
         a.command == b.command && a.env == b.env && a.workdir == b.workdir &&
         a.preemption == b.preemption && a.grace_ms == b.grace_ms &&
         a.min_runtime_ms == b.min_runtime_ms && a.steps == b.steps &&
         a.checkpoint_every == b.checkpoint_every && a.tenant == b.tenant;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::uint8_t which = data[0] % 8;
  std::vector<capnp::word> words((size - 1) / sizeof(capnp::word));
  if (words.empty()) return 0;
  std::memcpy(words.data(), data + 1, words.size() * sizeof(capnp::word));
  auto arr = kj::arrayPtr(const_cast<const capnp::word*>(words.data()), words.size());
  switch (which) {
    case 0:
      with_root<rpc::wire::JobSpec>(arr, [](auto r) {
        auto s = rpc::job_spec_from_wire(r);
        if (!s) return;
        if (!service::validate_job_spec(*s)) __builtin_trap();
        capnp::MallocMessageBuilder mb;
        auto b = mb.initRoot<rpc::wire::JobSpec>();
        rpc::job_spec_to_wire(*s, b);
        auto again = rpc::job_spec_from_wire(b.asReader());
        if (!again || !same(*s, *again)) __builtin_trap();
      });
      break;
    case 1:
      with_root<rpc::wire::JobReport>(arr, [](auto r) {
        auto rep = rpc::report_from_wire(r);
        if (rep && (rep->step < 0 || rep->gpu_ms < 0)) __builtin_trap();
      });
      break;
    case 2:
      with_root<rpc::wire::Launch>(arr, [](auto r) {
        auto l = rpc::launch_from_wire(r);
        if (!l) return;
        for (auto& share : l->local) {
          if (share.device < 0 || share.device >= spec::kMaxNodeDevices) __builtin_trap();
          for (int rank : share.ranks)
            if (rank < 0 || rank >= l->world) __builtin_trap();
        }
        capnp::MallocMessageBuilder mb;
        rpc::launch_to_wire(*l, mb.initRoot<rpc::wire::Launch>());
      });
      break;
    case 3:
      with_root<rpc::wire::Inventory>(arr, [](auto r) {
        auto inv = rpc::inventory_from_wire(r);
        if (inv && (inv->devices < 0 || inv->devices > spec::kMaxNodeDevices)) __builtin_trap();
      });
      break;
    case 4:
      with_root<rpc::wire::JobStatus>(arr, [](auto r) { (void)rpc::job_status_from_wire(r); });
      break;
    case 5:
      with_root<rpc::wire::NodeStatus>(arr, [](auto r) { (void)rpc::node_status_from_wire(r); });
      break;
    case 6:
      with_root<rpc::wire::ClusterEvent>(arr, [](auto r) { (void)rpc::event_from_wire(r); });
      break;
    case 7:
      with_root<rpc::wire::NodeApi::RegisterParams>(arr, [](auto r) {
        (void)rpc::text_from_wire(r.getName(), "name");
        (void)rpc::inventory_from_wire(r.getInventory());
        (void)rpc::running_from_wire(r.getRunning());
      });
      break;
  }
  return 0;
}
