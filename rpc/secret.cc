#include "rpc/secret.h"

#include <fstream>
#include <sstream>

#include "base/quote.h"

namespace orrery::rpc {

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::PermissionDenied("cannot read secret file " + clip_input(path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  if (s.empty()) return Status::PermissionDenied("secret file " + clip_input(path) + " is empty");
  return s;
}

bool secret_matches(const std::string& expected, const std::string& given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % (expected.empty() ? 1 : expected.size())]);
  return diff == 0 && !expected.empty();
}

}  // namespace orrery::rpc
