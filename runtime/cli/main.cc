// `orrery`: the user's command line (runtime/cli/commands.h; docs/runtime.md, "The orrery CLI").
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "rpc/client_connection.h"
#include "rpc/secret.h"
#include "runtime/cli/commands.h"

int main(int argc, char** argv) {
  orrery::cli::CliContext ctx;
  ctx.connect = [](const std::string& address, const std::string& secret_file, std::int64_t timeout_ms)
      -> orrery::Result<std::unique_ptr<orrery::service::ClientApi>> {
    auto secret = orrery::rpc::read_secret_file(secret_file);
    if (!secret.ok()) return secret.status();
    return orrery::rpc::connect_client(address, *secret, timeout_ms);
  };
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  ctx.self_path = ec ? std::string(argv[0]) : self.string();
#ifdef ORRERY_BUILD_CORE_BIN
  ctx.build_core_bin = ORRERY_BUILD_CORE_BIN;
#endif
#ifdef ORRERY_BUILD_NODE_BIN
  ctx.build_node_bin = ORRERY_BUILD_NODE_BIN;
#endif
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  ctx.out_is_tty = ::isatty(1) != 0;
  return orrery::cli::run_cli(argc, argv, ctx);
}
