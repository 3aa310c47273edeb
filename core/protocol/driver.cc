#include "core/protocol/driver.h"

namespace orrery::protocol {

Result<core::Committed> Driver::commit(const core::Decision& d, std::int64_t now_ms) {
  auto c = core_.commit(d);
  if (!c) {
    protocol_.refused(d, c.status(), now_ms);
    listener_.refused(d, c.status());
    return c;
  }
  protocol_.committed(*c, d, now_ms);
  listener_.committed(*c, d);
  return c;
}

void Driver::settle(std::int64_t now_ms) {
  // Each commit may lead to more proposals (a stored cut: Progress, then CheckpointDone; a refused
  // move: Checkpoint, then Abort); each decision changes a job's state, so this ends.
  for (auto batch = protocol_.take_proposals(); !batch.empty(); batch = protocol_.take_proposals())
    for (const auto& d : batch) (void)commit(d, now_ms);
}

}  // namespace orrery::protocol
