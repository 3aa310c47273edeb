#include "runtime/node/node_main.h"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "rpc/node_connection.h"
#include "rpc/secret.h"
#include "runtime/node/agent.h"
#include "spec/limits.h"

namespace orrery::runtime {

namespace {
std::atomic<bool> g_stop{false};  // set by the signal handler only
void on_signal(int) { g_stop.store(true); }
}  // namespace

int node_main(int argc, char** argv, const RuntimeFactory& make_runtime) {
  CLI::App app{"orrery-node: the node agent (one per machine)"};
  std::string core = "127.0.0.1:7070", name, secret_file, data_dir, device_type = "host", bin_dir;
  int devices = 4;
  std::int64_t mem = 256;
  app.add_option("--core", core, "address of orrery-core serve (host:port)")->capture_default_str();
  app.add_option("--name", name, "this node's name in the fleet file")->required();
  app.add_option("--secret", secret_file, "file holding the cluster's shared secret")->required();
  app.add_option("--data", data_dir, "local directory for checkpoint shards and logs")->required();
  app.add_option("--devices", devices, "devices on this node (one orrery-proxy each)")
      ->check(CLI::Range(std::int64_t{1}, spec::kMaxAgentDevices))->capture_default_str();
  app.add_option("--device-mem-mib", mem, "memory per device, MiB")
      ->check(CLI::Range(std::int64_t{1}, spec::kMaxMemMib))->capture_default_str();
  app.add_option("--device-type", device_type, "device type, as in the fleet file")->capture_default_str();
  app.add_option("--bin-dir", bin_dir, "where orrery-proxy and the workloads are (default: beside orrery-node)");
  std::string advertise;
  app.add_option("--advertise", advertise,
                 "address other nodes reach this one at, for jobs spanning nodes (default: this "
                 "machine's address on its connection to the core)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto secret = rpc::read_secret_file(secret_file);
  if (!secret) {
    std::cerr << "orrery-node: " << secret.reason() << "\n";
    return 1;
  }
  if (bin_dir.empty()) {
    std::error_code ec;
    bin_dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
  }
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    std::cerr << "orrery-node: cannot create " << data_dir << ": " << ec.message() << "\n";
    return 1;
  }
  NodeRuntimeOptions ro;
  ro.node_name = name;
  ro.devices = devices;
  ro.device_mem_mib = mem;
  ro.backend = device_type == "host" ? "host" : "cuda";
  ro.data_dir = data_dir;
  ro.bin_dir = bin_dir;
  auto runtime = make_runtime(ro);
  if (!runtime) {
    std::cerr << "orrery-node: cannot start the node runtime: " << runtime.reason() << "\n";
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  Agent agent(**runtime);
  rpc::NodeConnectionOptions co;
  co.core_address = core;
  co.name = name;
  co.secret = *secret;
  co.inventory = {device_type, devices, mem};
  co.advertise = advertise;
  int rc = rpc::run_node_connection(co, agent, g_stop, std::cout, std::cerr);
  for (auto& [job, epoch] : (*runtime)->running()) (void)(*runtime)->stop(job, epoch);
  return rc;
}

}  // namespace orrery::runtime
