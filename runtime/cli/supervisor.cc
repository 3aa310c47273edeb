#include "runtime/cli/supervisor.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

namespace orrery::cli {

Millis RestartBackoff::after_exit(Millis ran) {
  if (ran >= policy_.stable) next_ = policy_.first;
  const Millis delay = next_;
  next_ = std::min(next_ * 2, policy_.max);
  return delay;
}

std::string describe_exit(int st) {
  if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "stopped";
}

Supervisor::Supervisor(BackoffPolicy policy, std::ostream& report) : report_(report), policy_(policy) {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGCHLD, SIG_DFL);  // ignored SIGCHLD would reap children before waitpid sees them
  sigemptyset(&mask_);
  sigaddset(&mask_, SIGINT);
  sigaddset(&mask_, SIGTERM);
  sigaddset(&mask_, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &mask_, &old_mask_);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

Supervisor::~Supervisor() {
  if (!stopped_) stop(Millis(2000));
  // A SIGINT or SIGTERM that came during the shutdown would kill this process, with the wrong exit
  // code, the moment it is unblocked: it has been answered already.
  timespec zero{0, 0};
  while (::sigtimedwait(&mask_, nullptr, &zero) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

Status Supervisor::spawn(Proc& p) {
  std::vector<char*> argv;
  for (const auto& a : p.spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable("cannot start " + p.spec.label + ": " + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    const int fd = ::open(p.spec.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::execv(argv[0], argv.data());
    ::dprintf(2, "orrery up: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also in the child: whichever runs first
  p.pid = pid;
  p.running = true;
  p.group_left = false;
  p.started = Clock::now();
  return Status::Ok();
}

Status Supervisor::start(ProcessSpec spec) {
  Proc p;
  p.spec = std::move(spec);
  p.backoff = RestartBackoff(policy_);
  if (auto st = spawn(p); !st.ok()) return st;
  procs_.push_back(std::move(p));
  return Status::Ok();
}

void Supervisor::reap() {
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(-1, &st, WNOHANG);
    if (r <= 0) return;  // none exited (0), or no child at all
    for (auto& p : procs_) {
      if (!p.running || p.pid != r) continue;  // else an adopted orphan: reaped, nothing more
      p.running = false;
      p.group_left = true;
      p.status = st;
      if (restarting_ && !stopped_) {
        const auto now = Clock::now();
        const Millis delay = p.backoff.after_exit(std::chrono::duration_cast<Millis>(now - p.started));
        ++p.restarts;
        p.restart_pending = true;
        p.restart_at = now + delay;
        // What the dead leader leaves in its group (a node agent's proxies and workers) cannot be
        // taken over by the next run: it goes now.
        ::kill(-p.pid, SIGKILL);
        std::ostringstream line;
        line << "orrery up: " << p.spec.label << " exited (" << describe_exit(st) << "); restarting in "
             << std::fixed << std::setprecision(1) << static_cast<double>(delay.count()) / 1000.0
             << " s (restart " << p.restarts << "); log " << p.spec.log << "\n";
        report_ << line.str() << std::flush;
      }
    }
  }
}

bool Supervisor::group_gone(Proc& p) {
  if (!p.group_left) return true;
  reap();
  if (::kill(-p.pid, 0) != 0 && errno == ESRCH) p.group_left = false;
  return !p.group_left;
}

void Supervisor::start_due() {
  const auto now = Clock::now();
  for (auto& p : procs_) {
    if (!p.restart_pending || stopped_ || now < p.restart_at) continue;
    if (!group_gone(p)) continue;  // tried again on the next turn of wait()
    {
      // Marks the restart in the daemon's own log, between the lines of its two runs.
      std::ofstream log(p.spec.log, std::ios::app);
      log << "orrery up: starting " << p.spec.label << " again after " << describe_exit(p.status)
          << " (restart " << p.restarts << ")\n";
    }
    p.restart_pending = false;
    if (auto st = spawn(p); !st.ok()) {
      const Millis delay = p.backoff.after_exit(Millis(0));
      p.restart_pending = true;
      p.restart_at = now + delay;
      report_ << "orrery up: " << st.reason() << "; trying again in " << delay.count() << " ms\n" << std::flush;
      continue;
    }
    report_ << "orrery up: " << p.spec.label << " started again (pid " << p.pid << ")\n" << std::flush;
  }
}

int Supervisor::wait(Millis limit) {
  const auto deadline = Clock::now() + limit;
  while (true) {
    reap();
    start_due();
    const auto now = Clock::now();
    if (now >= deadline) return 0;
    auto until = deadline;
    for (const auto& p : procs_) {
      // A restart that is due but waits for its old group to go is looked at again in 20 ms.
      if (p.restart_pending) until = std::min(until, std::max(p.restart_at, now + Millis(20)));
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int sig = ::sigtimedwait(&mask_, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) return sig;
    // SIGCHLD, the timeout, or EINTR: look again.
  }
}

std::optional<int> Supervisor::exit_status(const std::string& name) const {
  for (const auto& p : procs_)
    if (p.spec.name == name && !p.running) return p.status;
  return std::nullopt;
}

pid_t Supervisor::pid(const std::string& name) const {
  for (const auto& p : procs_)
    if (p.spec.name == name && p.running) return p.pid;
  return -1;
}

void Supervisor::stop(Millis grace) {
  stopped_ = true;
  for (auto& p : procs_) p.restart_pending = false;
  // A group is signalled even after its leader exited: a proxy or worker left in it goes too.
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it)
    if (it->running || it->group_left) ::kill(-it->pid, SIGTERM);
  auto left = [&](Proc& p) { return p.running || !group_gone(p); };
  auto wait_groups = [&](Millis limit) {
    const auto deadline = Clock::now() + limit;
    while (true) {
      reap();
      bool any = false;
      for (auto& p : procs_) any = left(p) || any;
      if (!any || Clock::now() >= deadline) return any;
      std::this_thread::sleep_for(Millis(20));
    }
  };
  if (!wait_groups(grace)) return;
  for (auto& p : procs_) {
    if (!left(p)) continue;
    report_ << "orrery up: " << p.spec.label << (p.running ? "" : "'s processes") << " did not stop in "
            << grace.count() << " ms: SIGKILL\n" << std::flush;
    ::kill(-p.pid, SIGKILL);
  }
  for (auto& p : procs_) {
    if (!p.running) continue;
    int st = 0;
    while (::waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
    }
    p.running = false;
    p.group_left = true;
    p.status = st;
  }
  // The rest of the groups are this process's children too (it is their subreaper): reaped as
  // they die, so that when this returns nothing that was started is left.
  wait_groups(Millis(2000));
}

}  // namespace orrery::cli
