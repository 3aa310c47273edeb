// The TCP addresses `orrery up` has the core listen on (--listen, --metrics), checked before
// anything starts: a second `orrery up` on a busy port must fail with the port's name and, where it
// can tell, what holds it (another orrery), not print a banner and then lose its core. Port 0 is
// turned into a free port here, once, so that a restarted core comes back on the same one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "base/result.h"

namespace orrery::cli {

struct ListenAddress {
  std::string host;  // as given: "127.0.0.1", "localhost", "::1", "*" (every interface)
  int port = 0;
  // "host:port", "[v6]:port": what orrery-core serve --listen and orrery-node --core take.
  std::string text() const;
};

// "HOST:PORT", "[V6]:PORT" or "*:PORT" with PORT in 0..65535; invalid argument otherwise.
Result<ListenAddress> parse_listen_address(const std::string& text);

// What listens on a TCP port of this machine, as far as /proc shows (another user's process
// shows no pid).
struct PortHolder {
  pid_t pid = 0;             // 0: unknown
  bool orrery = false;       // an orrery-core
  std::string description;   // "orrery-core serve (pid 12, data /d/core), started by orrery up (pid 9)"
};
std::optional<PortHolder> port_holder(int port);

// Ok when `address` could be listened on now (a socket with SO_REUSEADDR, as the core's, is bound
// and listens, then closed). Unavailable when the port is in use, the reason naming the address and
// its holder ("127.0.0.1:7070 is in use by another orrery: orrery-core serve (pid 12, ...)");
// invalid argument for a host that does not resolve or is not this machine's; permission denied
// for a privileged port.
Status check_can_listen(const ListenAddress& address);

// `address` itself, or for port 0 the same host with a port the kernel says is free now.
Result<ListenAddress> with_free_port(const ListenAddress& address);

// Whether a TCP connection to `address` is accepted now (a wildcard host is tried on loopback).
bool accepts_connections(const ListenAddress& address);

// Whether process `pid` has a socket listening on TCP `port`: that a port accepts connections
// does not say that the core just started is the one that took it.
bool process_listens_on(pid_t pid, int port);

}  // namespace orrery::cli
