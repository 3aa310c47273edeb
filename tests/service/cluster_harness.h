// Real processes on loopback for the service tests: orrery-core serve and orrery-node started as
// child processes (each in its own process group, so killing a "machine" kills its proxies and
// workers too), their output in files under a temporary directory.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace orrery::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process in its own process group.
class Proc {
 public:
  Proc() = default;
  Proc(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    std::fflush(nullptr);  // or the child's copy of unflushed output is written out twice
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      FILE* f = std::freopen(log.c_str(), "a", stdout);
      (void)f;
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
    ::setpgid(pid_, pid_);
  }
  Proc(const Proc&) = delete;
  Proc& operator=(Proc&& o) noexcept {
    kill_group(SIGKILL);
    pid_ = o.pid_;
    log_ = o.log_;
    o.pid_ = -1;
    return *this;
  }
  ~Proc() { kill_group(SIGKILL); }

  // Signals the whole group (the process and everything it started) and reaps the process.
  int kill_group(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(-pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    if (sig != SIGKILL) ::kill(-pid_, SIGKILL);  // stragglers of a clean stop
    pid_ = -1;
    return status;
  }
  // SIGTERM to the group, up to `grace_ms` for the process to exit cleanly, then SIGKILL to what is
  // left of the group. True if it exited within the grace period.
  bool terminate(int grace_ms) {
    if (pid_ <= 0) return true;
    const int pgid = pid_;
    ::kill(-pgid, SIGTERM);
    wait_exit(grace_ms);
    bool clean = pid_ < 0;
    if (pid_ > 0) kill_group(SIGKILL);
    ::kill(-pgid, SIGKILL);  // stragglers
    return clean;
  }
  // Waits for the process to exit on its own (up to `ms`); its exit code, or -1.
  int wait_exit(int ms) {
    if (pid_ <= 0) return -1;
    for (int waited = 0;; waited += 10) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (waited >= ms) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  // Started and not exited yet (reaps it if it has).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  std::string output() const { return read_file(log_); }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  std::string log_;
};

// Polls `pred` every 20 ms for up to `ms`.
inline bool eventually(int ms, const std::function<bool()>& pred) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// GET http://127.0.0.1:port/path; the whole response ("" when unreachable).
inline std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  // Reads the headers, then Content-Length bytes of body (the server may keep the connection).
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    auto end = out.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    auto cl = out.find("Content-Length: ");
    if (cl == std::string::npos || cl > end) continue;
    auto len = std::strtoul(out.c_str() + cl + 16, nullptr, 10);
    if (out.size() >= end + 4 + len) break;
  }
  ::close(fd);
  return out;
}

// The number after "PREFIX" in the first line of `text` containing it, or -1.
inline int port_after(const std::string& text, const std::string& prefix) {
  auto p = text.find(prefix);
  if (p == std::string::npos) return -1;
  p = text.find(':', p + prefix.size());
  if (p == std::string::npos) return -1;
  return std::atoi(text.c_str() + p + 1);
}

}  // namespace orrery::testing
