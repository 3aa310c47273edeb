// orrery-train-mlp: the deterministic data-parallel training job.
//   as a worker (environment from the node runtime, see runtime/worker/worker.h):
//     orrery-train-mlp [--steps=N] [--seed=S] [--batch=B] [--din=D] [--hidden=H] [--dout=O] [--lr=X]
//   the uninterrupted reference, in process:  orrery-train-mlp --reference --world=W [same flags]
// Prints one line "orrery-train-mlp: done rank=R world=W steps=N loss=L digest=HEX" (or
// "stopped ..." when stopped on request after a checkpoint; exit 3). Exit 1 on errors, 2 on bad
// arguments.
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/workloads/mlp_job.h"

namespace {
const char kUsage[] =
    "usage: orrery-train-mlp [--steps=N] [--seed=S] [--batch=B] [--din=D] [--hidden=H] [--dout=O]\n"
    "                        [--lr=X] [--step-delay-us=U]\n"
    "       orrery-train-mlp --reference --world=W [the same flags]\n"
    "A deterministic data-parallel MLP on synthetic data. As a worker it is started by orrery-node\n"
    "(its rank, world and proxy come from the environment, runtime/worker/worker.h); with\n"
    "--reference it runs all W ranks in this process, uninterrupted. Either way it prints\n"
    "  orrery-train-mlp: [reference] done rank=R world=W steps=N loss=L digest=HEX\n"
    "and the digest of the final weights is the same whatever happened to the job.\n"
    "Exit 0 done, 1 error, 2 bad arguments, 3 stopped on request after a checkpoint.\n";
}  // namespace

int main(int argc, char** argv) {
  using namespace orrery::runtime;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  auto cfg = parse_mlp_args(args);
  if (!cfg) {
    std::fprintf(stderr, "orrery-train-mlp: %s\n%s", cfg.reason().c_str(), kUsage);
    return 2;
  }
  if (cfg->reference) {
    MlpResult r = run_mlp_reference(*cfg);
    std::printf("orrery-train-mlp: reference %s\n", mlp_result_line(r, 0, cfg->world).c_str());
    return 0;
  }
  auto w = Worker::connect_from_env();
  if (!w) {
    std::fprintf(stderr, "orrery-train-mlp: %s\n", w.reason().c_str());
    return 1;
  }
  auto r = run_mlp_worker(**w, *cfg);
  if (!r) {
    std::fprintf(stderr, "orrery-train-mlp: rank %d: %s\n", (*w)->rank(), r.reason().c_str());
    return 1;
  }
  const std::string line = mlp_result_line(*r, (*w)->rank(), (*w)->world());
  (void)(*w)->report(line);
  std::printf("orrery-train-mlp: %s\n", line.c_str());
  std::fflush(stdout);
  return r->stopped ? kExitStopped : 0;
}
