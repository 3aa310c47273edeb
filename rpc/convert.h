// Conversions between the generated Cap'n Proto types (rpc/*.capnp) and the plain C++ types of
// core/service. Readers are input from another process: every *_from_wire checks what it reads
// (enumerants it does not know, lengths, ranges) and returns an error naming the field
// (kInvalidArgument), never asserting. This is what rpc/fuzz/ exercises with arbitrary bytes.
#pragma once

#include "bootstrap.capnp.h"
#include "client.capnp.h"
#include "common.capnp.h"
#include "base/result.h"
#include "core/service/client_api.h"
#include "core/service/node_api.h"
#include "node.capnp.h"

namespace orrery::rpc {

// Cap'n Proto limits on what a peer may send: text fields, lists.
inline constexpr std::size_t kMaxText = 1 << 16;
inline constexpr std::size_t kMaxList = 1 << 16;

Result<service::JobSpec> job_spec_from_wire(wire::JobSpec::Reader r);  // also validate_job_spec
void job_spec_to_wire(const service::JobSpec& s, wire::JobSpec::Builder b);

Result<service::JobStatus> job_status_from_wire(wire::JobStatus::Reader r);
void job_status_to_wire(const service::JobStatus& s, wire::JobStatus::Builder b);

Result<service::NodeStatus> node_status_from_wire(wire::NodeStatus::Reader r);
void node_status_to_wire(const service::NodeStatus& s, wire::NodeStatus::Builder b);

Result<service::ClusterEvent> event_from_wire(wire::ClusterEvent::Reader r);
void event_to_wire(const service::ClusterEvent& e, wire::ClusterEvent::Builder b);

Result<service::NodeReport> report_from_wire(wire::JobReport::Reader r);
void report_to_wire(const service::NodeReport& r, wire::JobReport::Builder b);

Result<service::LaunchCommand> launch_from_wire(wire::Launch::Reader r);
void launch_to_wire(const service::LaunchCommand& c, wire::Launch::Builder b);

Result<service::NodeInventory> inventory_from_wire(wire::Inventory::Reader r);
Result<std::vector<service::Incarnation>> running_from_wire(capnp::List<wire::Incarnation>::Reader r);

// Text from a peer, checked for length (`what` names the field in the error).
Result<std::string> text_from_wire(capnp::Text::Reader t, const char* what);
// A list of texts of at most `max` entries, each checked as above.
Result<std::vector<std::string>> texts_from_wire(capnp::List<capnp::Text>::Reader r, std::size_t max,
                                                const char* what);
void texts_to_wire(const std::vector<std::string>& v, capnp::List<capnp::Text>::Builder b);

}  // namespace orrery::rpc
