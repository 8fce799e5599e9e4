#include "interrupt.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fp4sim/io/output_file.hpp"

namespace fp4sim::cli {

namespace {

// The signals that end a command, each by name. SIGHUP (the terminal closed), SIGQUIT and SIGPIPE (sent
// to the process; a write to a closed pipe fails with EPIPE instead, an error like any failed write)
// must leave no temporary behind either.
constexpr std::pair<int, const char*> kInterrupts[] = {
    {SIGINT, "SIGINT"}, {SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"}, {SIGQUIT, "SIGQUIT"}, {SIGPIPE, "SIGPIPE"}};

sigset_t interrupts() {
  sigset_t set;
  sigemptyset(&set);
  for (const auto& [sig, name] : kInterrupts) sigaddset(&set, sig);
  return set;
}

const char* signal_name(int sig) {
  for (const auto& [s, name] : kInterrupts) {
    if (s == sig) return name;
  }
  return "signal";
}

struct Children {
  std::mutex mutex;
  std::vector<pid_t> pids;
};

Children& children() {
  static Children* c = new Children;  // never destroyed: the interrupt thread may use it at exit
  return *c;
}

[[noreturn]] void end_interrupted(int sig) {
  Children& c = children();
  c.mutex.lock();  // kept: a command that reaps its child now waits here until the process ends
  for (const pid_t pid : c.pids) ::kill(pid, SIGTERM);
  for (const pid_t pid : c.pids) ::waitpid(pid, nullptr, 0);
  remove_temporaries();
  std::fprintf(stderr, "\nfp4sim: interrupted (%s): no partial output left\n", signal_name(sig));
  std::fflush(stderr);
  ::_exit(128 + sig);
}

}  // namespace

void handle_interrupts() {
  const sigset_t set = interrupts();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    end_interrupted(sig);
  }).detach();
}

void track_child(pid_t pid) {
  Children& c = children();
  std::lock_guard lock(c.mutex);
  c.pids.push_back(pid);
}

void untrack_child(pid_t pid) {
  Children& c = children();
  std::lock_guard lock(c.mutex);
  std::erase(c.pids, pid);
}

void prepare_child_signals() {
  const sigset_t set = interrupts();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
}

void end_if_interrupted(int status) {
  if (!WIFSIGNALED(status)) return;
  const sigset_t set = interrupts();
  if (sigismember(&set, WTERMSIG(status)) == 1) end_interrupted(WTERMSIG(status));
}

}  // namespace fp4sim::cli
