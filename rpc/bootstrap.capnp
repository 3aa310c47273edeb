# The bootstrap capability of `orrery-core serve`: all a fresh connection gets. Authentication is a
# shared secret (the contents of the file given to --secret on every process, trailing newline
# stripped). login with a wrong secret fails with "authentication failed: wrong secret" and hands
# out nothing, so an unauthenticated peer can call nothing else. The secret travels in clear text:
# run on a trusted network (or behind a TLS tunnel).
@0x8f2c1e7b9d4a6053;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("orrery::rpc::wire");

using Client = import "client.capnp";
using Node = import "node.capnp";

interface Bootstrap {
  loginClient @0 (secret :Text) -> (api :Client.ClientApi);
  loginNode @1 (secret :Text) -> (api :Node.NodeApi);
}
