// core_memory: the scheduler core's resident memory per device and per job record, measured two
// ways:
//   1. growth of the process's resident set (/proc/self/statm) and of the heap in use (glibc
//      mallinfo2) while the fleet is built and while the registry is filled with finished jobs
//      through the real commit path (Submit, Admit, Place, Start, Progress, Complete);
//   2. an account per structure: sizeof and capacity of every vector the core's state keeps, and
//      the heap blocks its strings and device sets own.
// Usage: core_memory [--devices N] [--jobs N] [--name-bytes N]
//   defaults: 100000 devices (nodes of 8 x H100-80G), 1000000 jobs, 12-byte job names (short
//   enough for std::string's in-object buffer; longer names cost a heap block each).
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "bench/bench_util.h"
#include "core/clock.h"
#include "core/scheduler_core.h"

namespace {

using namespace orrery;

struct Mem {
  std::int64_t rss = 0;   // resident bytes
  std::int64_t heap = 0;  // bytes malloc has handed out (arena + mmapped blocks)
};

Mem now() {
  Mem m;
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  m.rss = resident * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
  struct mallinfo2 mi = ::mallinfo2();
  m.heap = static_cast<std::int64_t>(mi.uordblks + mi.hblkhd);
  return m;
}

// The heap block glibc malloc uses for a request of n bytes (n > 0): n + 8 rounded up to 16,
// at least 32.
std::int64_t malloc_block(std::size_t n) {
  if (n == 0) return 0;
  std::size_t b = (n + 8 + 15) & ~std::size_t{15};
  return static_cast<std::int64_t>(b < 32 ? 32 : b);
}

// Heap bytes a std::string owns (0 while it fits the in-object buffer).
std::int64_t string_heap(const std::string& s) {
  return s.capacity() > 15 ? malloc_block(s.capacity() + 1) : 0;
}

template <class V>
std::int64_t vec_bytes(const V& v) {
  return static_cast<std::int64_t>(v.capacity() * sizeof(typename V::value_type));
}

double per(std::int64_t bytes, std::int64_t n) { return n ? static_cast<double>(bytes) / n : 0; }

}  // namespace

int main(int argc, char** argv) {
  int devices = 100000;
  int jobs = 1000000;
  int name_bytes = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--devices")) devices = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--name-bytes")) name_bytes = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: core_memory [--devices N] [--jobs N] [--name-bytes N]\n");
      return 1;
    }
  }
  if (devices < 8 || jobs < 0 || name_bytes < 1) {
    std::fprintf(stderr, "core_memory: need --devices >= 8, --jobs >= 0, --name-bytes >= 1\n");
    return 1;
  }

  const Mem m0 = now();
  core::ManualClock clock;
  auto core = bench::up_core(bench::fleet_of_devices(devices), clock, nullptr);
  const Mem m1 = now();

  std::printf("core_memory: %d devices (%d nodes of 8 x H100-80G), %d finished jobs, %d-byte "
              "names\n\n",
              devices, core->cluster().nodes, jobs, name_bytes);
  std::printf("1. growth while filling (RSS from /proc/self/statm, heap in use from mallinfo2)\n");
  std::printf("   %-28s %14s %14s\n", "", "RSS (MiB)", "heap (MiB)");
  auto row = [](const char* what, const Mem& m) {
    std::printf("   %-28s %14.1f %14.1f\n", what, m.rss / 1048576.0, m.heap / 1048576.0);
  };
  row("start", m0);
  row("fleet built, no job", m1);
  const int step = jobs >= 4 ? jobs / 4 : jobs;
  int done = 0;
  while (done < jobs) {
    const int n = std::min(step, jobs - done);
    bench::fill_finished(*core, n, [&](int i) {
      std::string s = "j" + std::to_string(done + i) + "-";
      s.resize(static_cast<std::size_t>(name_bytes), 'x');
      return s;
    });
    done += n;
    const std::string label = std::to_string(done) + " jobs";
    row(label.c_str(), now());
  }
  const Mem m2 = now();
  std::printf("   per device (fleet built - start): RSS %.1f B, heap %.1f B\n",
              per(m1.rss - m0.rss, devices), per(m1.heap - m0.heap, devices));
  std::printf("   per job (filled - fleet built):   RSS %.1f B, heap %.1f B\n\n",
              per(m2.rss - m1.rss, jobs), per(m2.heap - m1.heap, jobs));

  // 2. The account.
  const auto& c = core->cluster();
  const auto& f = core->fleet();
  std::int64_t per_device = vec_bytes(c.owner) + vec_bytes(c.owner_epoch) + vec_bytes(c.resv_for) +
                            vec_bytes(c.resv_gen);
  std::int64_t groups = vec_bytes(c.group_first) + vec_bytes(c.group_node) +
                        vec_bytes(c.group_type) + vec_bytes(c.group_mem) + vec_bytes(f.groups);
  std::int64_t nodes = vec_bytes(c.node_devs) + vec_bytes(c.host_mem) + vec_bytes(c.node_held) +
                       vec_bytes(c.node_swap) + vec_bytes(f.nodes);
  for (const auto& n : f.nodes)
    nodes += string_heap(n.name) + string_heap(n.cluster) + string_heap(n.region);
  std::int64_t job_vars = vec_bytes(c.jobs);
  std::int64_t held = 0;
  std::int64_t names = 0;
  for (int j = 0; j < c.num_jobs(); ++j) {
    held += malloc_block(c.jobs[j].held.capacity() * sizeof(std::int32_t));
    names += string_heap(core->job_info(j).name);
  }
  // info_ grows by push_back in step with cluster().jobs: same capacity.
  std::int64_t infos = static_cast<std::int64_t>(c.jobs.capacity() * sizeof(core::JobInfo));
  const std::int64_t nj = c.num_jobs();
  std::printf("2. account per structure\n");
  std::printf("   per device: owner, owner_epoch, resv_for, resv_gen     %10.1f B  (4 x %zu B)\n",
              per(per_device, devices), sizeof(std::int64_t));
  std::printf("   per device: device groups (spec shape + core::Fleet)    %10.1f B  (%d groups)\n",
              per(groups, devices), c.num_groups());
  std::printf("   per device: nodes (4 counters + core::Node and names)   %10.1f B  (%d nodes, "
              "sizeof(Node) %zu B)\n",
              per(nodes, devices), c.nodes, sizeof(core::Node));
  std::printf("   per device, all of the above                            %10.1f B\n",
              per(per_device + groups + nodes, devices));
  std::printf("   per job: JobVars<Concrete>                              %10.1f B  (sizeof %zu B, "
              "vector capacity %zu)\n",
              per(job_vars, nj), sizeof(spec::JobVars<spec::Concrete>), c.jobs.capacity());
  std::printf("   per job: held device sets' heap blocks                  %10.1f B\n", per(held, nj));
  std::printf("   per job: JobInfo (same capacity)                        %10.1f B  (sizeof %zu B)\n",
              per(infos, nj), sizeof(core::JobInfo));
  std::printf("   per job: name heap blocks                               %10.1f B\n", per(names, nj));
  std::printf("   per job, all of the above                               %10.1f B\n",
              per(job_vars + held + infos + names, nj));
  std::printf("\n   budget: <= 256 B per job record, <= 32 B per device\n");
  return 0;
}
