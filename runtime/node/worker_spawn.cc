#include "runtime/node/worker_spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace orrery::runtime {

namespace {

// Node-wide settings children inherit; every other ORRERY_* variable of ours is dropped.
bool inherited(const char* var) {
  return std::strncmp(var, "ORRERY_", 7) != 0 ||
         std::strncmp(var, "ORRERY_CUDA_DEVICES=", 20) == 0;  // orrery-proxy --help
}

bool executable_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

Result<pid_t> spawn_process(const SpawnSpec& s) {
  if (s.argv.empty()) return Status::InvalidArgument("no program to start");
  std::vector<char*> argv;
  for (const auto& a : s.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Later entries win: the node's, then the caller's (a name set twice keeps the last value).
  std::vector<std::string> env_store;
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; *e != nullptr; ++e)
    if (inherited(*e)) env_store.emplace_back(*e);
  for (const auto& e : s.env) {
    const std::string n = name_of(e);
    for (auto& old : env_store)
      if (!old.empty() && name_of(old) == n) old.clear();
    env_store.push_back(e);
  }
  std::vector<char*> envp;
  for (auto& e : env_store)
    if (!e.empty()) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, s.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  if (!s.workdir.empty()) posix_spawn_file_actions_addchdir_np(&fa, s.workdir.c_str());
  pid_t pid = -1;
  int rc = posix_spawn(&pid, s.argv[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Status::FailedPrecondition("cannot start " + s.argv[0] + ": " + std::strerror(rc));
  return pid;
}

Result<std::string> resolve_program(const std::string& program, const std::string& workdir,
                                    const std::string& bin_dir, const std::string& path) {
  if (program.empty()) return Status::InvalidArgument("command: the program is empty");
  if (program.find('/') != std::string::npos) {
    std::string p = program[0] == '/' || workdir.empty() ? program : workdir + "/" + program;
    if (::access(p.c_str(), F_OK) != 0)
      return Status::NotFound("command: program " + p + " not found: " + std::strerror(errno));
    if (!executable_file(p)) return Status::FailedPrecondition("command: " + p + " is not an executable file");
    return p;
  }
  std::vector<std::string> dirs;
  if (!bin_dir.empty()) dirs.push_back(bin_dir);
  std::stringstream ss(path);
  for (std::string d; std::getline(ss, d, ':');)
    if (!d.empty()) dirs.push_back(d);
  for (const auto& d : dirs)
    if (executable_file(d + "/" + program)) return d + "/" + program;
  return Status::NotFound("command: program \"" + program + "\" not found in orrery's bin folder or PATH (" +
                          path + ")");
}

Status check_directory(const std::string& dir, const char* what) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0)
    return Status::NotFound(std::string(what) + " " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(std::string(what) + " " + dir + ": not a directory");
  if (::access(dir.c_str(), X_OK) != 0)
    return Status::PermissionDenied(std::string(what) + " " + dir + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string exit_text(int status) {
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

std::string last_lines(const std::string& path, int max_lines, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(from);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  std::stringstream ss(tail);
  bool first = from > 0;  // a line cut by the window is dropped
  for (std::string l; std::getline(ss, l);) {
    if (first) {
      first = false;
      continue;
    }
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    if (!l.empty()) lines.push_back(l);
  }
  std::string out;
  const std::size_t start = lines.size() > static_cast<std::size_t>(max_lines) ? lines.size() - max_lines : 0;
  for (std::size_t i = start; i < lines.size(); ++i) out += (out.empty() ? "" : " | ") + lines[i];
  return out;
}

}  // namespace orrery::runtime
