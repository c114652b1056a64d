// Child processes for integration tests: output captured through pipes, every wait bounded, the
// child killed if a bound passes, so that a hung program fails its test instead of hanging ctest.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

extern char** environ;  // not every libc declares it

namespace orbite::testing {

using SteadyClock = std::chrono::steady_clock;

// The current environment with `overrides` applied (an empty value removes the variable).
inline std::vector<std::string> environment_with(
    const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (overrides.count(entry.substr(0, entry.find('='))) == 0) out.push_back(entry);
  }
  for (const auto& [name, value] : overrides) {
    if (!value.empty()) out.push_back(name + "=" + value);
  }
  return out;
}

class Child {
 public:
  explicit Child(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env_overrides = {}) {
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigset_t defaults;
    sigemptyset(&none);
    sigfillset(&defaults);
    sigdelset(&defaults, SIGKILL);
    sigdelset(&defaults, SIGSTOP);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings = environment_with(env_overrides);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    int rc = ::posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
      pid_ = -1;
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& out() const { return text_[0]; }
  [[nodiscard]] const std::string& err() const { return text_[1]; }

  // Collects output until `done()` holds or the bound passes; returns whether `done()` held.
  bool read_until(const std::function<bool()>& done, std::chrono::milliseconds bound) {
    auto deadline = SteadyClock::now() + bound;
    while (!done()) {
      if (SteadyClock::now() >= deadline || !pump(50)) return done();
    }
    return true;
  }

  // Waits for the exit; returns the exit status (128+signal when killed), or -1 when the bound
  // passed (the child is then killed).
  int wait(std::chrono::milliseconds bound) {
    auto deadline = SteadyClock::now() + bound;
    int status = 0;
    while (true) {
      pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) break;
      if (got < 0 || SteadyClock::now() >= deadline) {
        ADD_FAILURE() << "pid " << pid_ << " did not exit within " << bound.count() << " ms";
        ::kill(pid_, SIGTERM);  // a launcher forwards it to its ranks
        read_until([] { return false; }, std::chrono::seconds(3));
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        exited_ = true;
        return -1;
      }
      pump(50);
    }
    exited_ = true;
    // Grandchildren that outlive the child would keep the pipes open: bound the final drain.
    read_until([] { return false; }, std::chrono::seconds(5));
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
  }

 private:
  // One poll round; false once both pipes are at EOF.
  bool pump(int timeout_ms) {
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      p[n] = {fds_[i], POLLIN, 0};
      which[n++] = i;
    }
    if (n == 0) return false;
    if (::poll(p, n, timeout_ms) <= 0) return true;
    for (nfds_t k = 0; k < n; ++k) {
      if (p[k].revents == 0) continue;
      char buf[4096];
      ssize_t got = ::read(p[k].fd, buf, sizeof buf);
      if (got > 0) {
        text_[which[k]].append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds_[which[k]]);
        fds_[which[k]] = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  int fds_[2] = {-1, -1};
  std::string text_[2];
};

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

// Runs a program to completion (bounded) and returns its status and output.
inline Outcome run_program(const std::vector<std::string>& argv,
                           std::chrono::milliseconds bound = std::chrono::seconds(60),
                           const std::map<std::string, std::string>& env_overrides = {}) {
  auto start = SteadyClock::now();
  Child child(argv, env_overrides);
  Outcome o;
  o.status = child.wait(bound);
  o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
  o.out = child.out();
  o.err = child.err();
  return o;
}

inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "orbite-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace orbite::testing
