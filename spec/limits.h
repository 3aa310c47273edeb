// Every limit of the system, defined once: the spec's bounds, the job-spec limits and the smaller
// practical limits of the runtime. Every layer (spec guards, core, service, RPC, CLI, node agent,
// proxy, workloads, simulator) uses these names; docs/runtime.md "Limits" lists them with who
// enforces each. Plain constexpr, no dependencies, so anything may include it.
//
// The rule: a job spec that the service accepts (core/service/job_spec_check.h, the one
// validation every entry point runs) must be runnable, so it is checked against the runtime's
// limits where those are smaller than the spec's (kMaxRunWorld), not just against the spec's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace orrery::spec {

// --- The spec's bounds --------------------------------------------------------------------------
// Bounds on the values that enter arithmetic, so that no spec formula overflows 64-bit integers
// on concrete values (the solver's integers are unbounded: without these bounds the proof and the
// running code could disagree). Guards enforce them; INV-WORLD and INV-TIER keep them.
inline constexpr std::int64_t kMaxWorld = std::int64_t{1} << 20;          // workers per job
inline constexpr std::int64_t kMaxMemMib = std::int64_t{1} << 40;         // MiB per worker/device
inline constexpr std::int64_t kMaxAttained = std::int64_t{1} << 62;       // GPU-ms per job
inline constexpr std::int64_t kMaxNodeDevices = 4096;                     // devices per node
inline constexpr std::int64_t kMaxFleetDevices = std::int64_t{1} << 20;  // devices per fleet
// Host memory of a node, for the state of spliced-out workers: a device running s workers of m MiB
// each needs (s - 1) * m of it (spec/model.h swap_per_device), up to (kSpliceLimit - 1) *
// kMaxMemMib, so a node of one device can hold any job's gang (vocabulary.h checks this against
// kSpliceLimit). Sums over a node's devices stay below 2^55.
inline constexpr std::int64_t kMaxHostMemMib = std::int64_t{1} << 43;

// --- Names --------------------------------------------------------------------------------------
// Every name (job, tenant, node, device type, region, cluster, workload): 1 to kMaxNameLength
// characters of A-Z a-z 0-9 . _ -, starting with a letter or digit (a workload name: no '.').
// Names are words of logs, tables, journal records and file names, hence short and plain.
inline constexpr std::size_t kMaxNameLength = 64;

constexpr bool valid_name(std::string_view n, bool allow_dot = true) {
  if (n.empty() || n.size() > kMaxNameLength) return false;
  if (n[0] == '.' || n[0] == '_' || n[0] == '-') return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || (allow_dot && c == '.');
    if (!ok) return false;
  }
  return true;
}
// The rule in words, for errors ("node name \"a b\": must be " + kNameRule).
inline constexpr std::string_view kNameRule =
    "1 to 64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit";
static_assert(kMaxNameLength == 64, "kNameRule spells the length out");

// --- Job specs ----------------------------------------------------------------------------------
// Training steps of a job (and the checkpoint period): the workload counts steps in 64 bits; the
// bound keeps step arithmetic (step + period) far from overflow, and every layer that tags by step
// takes it whole (the proxies' collective packs step + 1 beside a 30-bit count in 64 bits).
inline constexpr std::int64_t kMaxSteps = std::int64_t{1} << 33;
// Workload arguments: each becomes one argv entry of every worker process (exec's limits).
inline constexpr std::size_t kMaxArgs = 256;
inline constexpr std::size_t kMaxArgLength = 4096;
// Device types one job spec may name ("A|B|...", in order of preference).
inline constexpr std::size_t kMaxJobDeviceTypes = 16;
// The names of a job spec's device type list, "A100-80G" or "A100-80G|H100-80G" (empty names
// included: callers refuse them).
inline std::vector<std::string_view> device_type_names(std::string_view types) {
  std::vector<std::string_view> names;
  for (std::size_t at = 0;;) {
    const std::size_t bar = types.find('|', at);
    names.push_back(types.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
    if (bar == std::string_view::npos) return names;
    at = bar + 1;
  }
}
// A user's program (TOML `command`, `env`, `workdir`): argv entries as above; environment
// variables (names of A-Z a-z 0-9 _ not starting with a digit, values like arguments); a working
// directory path.
inline constexpr std::size_t kMaxCommand = kMaxArgs + 2;  // the program, arguments, a built-in's --steps
inline constexpr std::size_t kMaxEnv = 256;
inline constexpr std::size_t kMaxEnvNameLength = 128;
inline constexpr std::size_t kMaxPathLength = 4096;
// signal mode's grace period between SIGTERM and SIGKILL, and a job's protection from eviction
// right after it starts (min_runtime_s): at most a day, in milliseconds.
inline constexpr std::int64_t kMaxGraceMs = 24LL * 3600 * 1000;
inline constexpr std::int64_t kDefaultGraceMs = 30'000;
inline constexpr std::int64_t kMaxMinRuntimeMs = 24LL * 3600 * 1000;

// --- The runtime's practical limits (smaller than the spec's) -----------------------------------
// Workers of one job that the runtime can run. Each rank is a process spawned by its node agent
// and a participant of the job's collective: the shared-memory collective maps (2W + 2) buffers
// of the allreduce's size on every node of the job, and the TCP collective is a star through rank
// 0's proxy with one connection per proxy. 4096 keeps both within reason; the job-spec validation
// refuses a larger world, so a job accepted at submit can be launched.
inline constexpr std::int64_t kMaxRunWorld = 4096;
static_assert(kMaxRunWorld <= kMaxWorld);
// Devices one node agent runs: one orrery-proxy process per device, each mapping a segment of
// 32 worker slots of 1 MiB (runtime/proxy/ring.h), so 64 devices are ~2 GiB of shared memory
// already. Fleets (and the simulator) may describe larger nodes, up to kMaxNodeDevices; no agent
// can register one.
inline constexpr std::int64_t kMaxAgentDevices = 64;
static_assert(kMaxAgentDevices <= kMaxNodeDevices);

}  // namespace orrery::spec
