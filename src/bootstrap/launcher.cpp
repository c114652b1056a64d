#include "bootstrap/launcher.h"

#include <orbite/bootstrap.h>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <sstream>
#include <system_error>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): not every libc declares it

namespace orbite::launcher {
namespace {

// Seconds for messages ("1.5").
std::string seconds_text(Duration d) {
  std::ostringstream out;
  out << std::chrono::duration<double>(d).count();
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// Signals. The handler only counts and wakes the supervisor's poll() through a self-pipe: the
// store server's thread may be the one interrupted, and nothing else is async-signal-safe.

constexpr std::array<int, 6> kForwarded = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

std::atomic<int> g_wake_fd{-1};
std::array<std::atomic<int>, NSIG> g_pending{};

extern "C" void on_signal(int signo) {
  int saved_errno = errno;
  if (signo > 0 && signo < NSIG) g_pending[static_cast<size_t>(signo)].fetch_add(1);
  int fd = g_wake_fd.load();
  if (fd >= 0) {
    char byte = 0;
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);  // a full pipe already means "wake up"
  }
  errno = saved_errno;
}

bool is_terminating(int signo) {
  return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// Installs the handlers for one run() and restores the previous dispositions afterwards.
class SignalScope {
 public:
  SignalScope() = default;
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  ~SignalScope() {
    for (auto& [signo, old] : saved_) ::sigaction(signo, &old, nullptr);
    g_wake_fd.store(-1);
  }

  Status install() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      return Status::error(Errc::ResourceExhausted, "signal pipe: " + errno_text(errno));
    }
    read_end_.reset(fds[0]);
    write_end_.reset(fds[1]);
    for (auto& p : g_pending) p.store(0);
    g_wake_fd.store(write_end_.get());
    sigemptyset(&child_defaults_);
    for (int signo : kForwarded) {
      struct sigaction old {};
      ::sigaction(signo, nullptr, &old);
      if (old.sa_handler == SIG_IGN) continue;  // nohup & co: the caller wants it ignored
      catch_signal(signo, 0);
      forwarded_.push_back(signo);
    }
    catch_signal(SIGCHLD, SA_NOCLDSTOP);
    sigaddset(&child_defaults_, SIGCHLD);
    // A rank's pipe or our own stdout may close under us; write() errors are handled instead.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    struct sigaction old_pipe {};
    ::sigaction(SIGPIPE, &ignore, &old_pipe);
    saved_.emplace_back(SIGPIPE, old_pipe);
    if (old_pipe.sa_handler != SIG_IGN) sigaddset(&child_defaults_, SIGPIPE);
    return ok_status();
  }

  [[nodiscard]] int wake_fd() const { return read_end_.get(); }
  [[nodiscard]] const sigset_t& child_defaults() const { return child_defaults_; }
  [[nodiscard]] const std::vector<int>& forwarded() const { return forwarded_; }

  void drain_wake_pipe() const {
    char buf[256];
    while (::read(read_end_.get(), buf, sizeof buf) > 0) {
    }
  }
  static int take(int signo) { return g_pending[static_cast<size_t>(signo)].exchange(0); }

 private:
  void catch_signal(int signo, int flags) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART | flags;
    sigemptyset(&action.sa_mask);
    struct sigaction old {};
    ::sigaction(signo, &action, &old);
    saved_.emplace_back(signo, old);
    sigaddset(&child_defaults_, signo);
  }

  net::Fd read_end_;
  net::Fd write_end_;
  std::vector<std::pair<int, struct sigaction>> saved_;
  std::vector<int> forwarded_;
  sigset_t child_defaults_{};
};

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);  // glibc >= 2.32
  return abbrev ? std::string("SIG") + abbrev : "unknown signal";
}

// ---------------------------------------------------------------------------------------------
// Output

// Writes everything, or gives up on a destination that is gone or stalled for seconds: a broken
// stdout must not keep orbite-run from supervising (and stopping) the ranks.
void write_fully(int fd, std::string_view data) {
  int stalls = 0;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && stalls++ < 5) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else {
      return;
    }
  }
}

void say(const std::string& message) {
  write_fully(STDERR_FILENO, "orbite-run: " + message + "\n");
}

// One piped stream of one rank (--tag-output).
struct Stream {
  net::Fd fd;
  std::string partial;  // the current line, without its newline yet
  int dest = STDOUT_FILENO;
};

// A rank that prints without newlines would otherwise grow `partial` without bound.
constexpr size_t kMaxLine = 64 * 1024;

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;  // not exited yet
  bool reaped = false;   // until then its pid, and so its process group id, stay reserved
  Stream out;
  Stream err;
};

class Supervisor {
 public:
  Supervisor(const LaunchOptions& opts, const HostedStore& store, const SignalScope& signals)
      : opts_(opts), store_(store), signals_(signals), buf_(64 * 1024) {
    cpu_set_t mask;
    std::vector<int> allowed;
    if (::sched_getaffinity(0, sizeof(mask), &mask) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &mask)) allowed.push_back(c);
      }
    }
    const bool fits = static_cast<int>(allowed.size()) >= opts.num_ranks;
    if (opts.bind_to_core.value_or(fits)) cpus_ = std::move(allowed);
  }

  int run() {
    spawn_all();
    const auto started = Clock::now();
    while (any_running()) {
      auto now = Clock::now();
      auto next = now + std::chrono::milliseconds(200);  // reaping does not rely on SIGCHLD alone
      if (opts_.timeout && !stopping_) next = std::min(next, started + *opts_.timeout);
      if (kill_at_) next = std::min(next, *kill_at_);
      if (give_up_at_) next = std::min(next, *give_up_at_);
      poll_once(next);
      handle_signals();
      reap();
      now = Clock::now();
      if (opts_.timeout && !stopping_ && now >= started + *opts_.timeout && any_running()) {
        say("timeout after " + seconds_text(*opts_.timeout) + " s; stopping " +
            std::to_string(running_count()) + " ranks");
        timed_out_ = true;
        stop_all(SIGTERM);
      }
      if (kill_at_ && now >= *kill_at_) {
        kill_at_.reset();
        send_all(SIGKILL);
        give_up_at_ = now + std::chrono::seconds(10);
      }
      if (give_up_at_ && now >= *give_up_at_ && any_running()) {
        for (const Rank& r : ranks_) {
          if (r.running)
            say("rank " + std::to_string(r.index) + " (pid " + std::to_string(r.pid) +
                ") did not exit after SIGKILL; giving up on it");
        }
        break;
      }
    }
    for (Rank& r : ranks_) {
      for (int status = 0; r.pid > 0 && !r.reaped;) {
        pid_t got = ::waitpid(r.pid, &status, r.running ? WNOHANG : 0);
        r.reaped = got == r.pid || (got < 0 && errno != EINTR);
        if (got == 0) break;  // given up on after SIGKILL
      }
      // Grandchildren may still hold a pipe: take what is there, once.
      for (Stream* s : {&r.out, &r.err}) {
        pump(r, *s, kMaxLine * 16);
        s->fd.reset();
        pump(r, *s, 0);  // flushes the partial line
      }
    }
    return exit_status();
  }

 private:
  int exit_status() const {
    if (setup_failure_) return *setup_failure_;
    if (timed_out_) return kExitTimeout;
    if (first_failure_) return *first_failure_;
    if (term_signal_) return 128 + term_signal_;
    return any_running() ? kExitLauncherError : 0;
  }

  // -------------------------------------------------------------------------------------------
  // Spawning. posix_spawn runs nothing of ours between fork and exec, which matters because the
  // store server's thread may hold locks (malloc's included) at that moment.

  void spawn_all() {
    const std::string& program = opts_.command.front();
    std::vector<char*> argv;
    for (const std::string& a : opts_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    static constexpr std::string_view kOurs[] = {
        "ORBITE_STORE=",      "ORBITE_STORE_TOKEN=", "ORBITE_RANK=",
        "ORBITE_WORLD_SIZE=", "ORBITE_LOCAL_RANK=",  "ORBITE_LOCAL_SIZE="};
    std::vector<std::string> base_env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      bool ours = std::any_of(std::begin(kOurs), std::end(kOurs),
                              [&](std::string_view p) { return entry.starts_with(p); });
      if (!ours) base_env.emplace_back(entry);
    }
    const std::string n = std::to_string(opts_.num_ranks);

    if (opts_.tag_output) raise_fd_limit(static_cast<rlim_t>(opts_.num_ranks) * 2 + 64);

    ranks_.resize(static_cast<size_t>(opts_.num_ranks));
    for (int r = 0; r < opts_.num_ranks; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.index = r;
      std::vector<std::string> env = base_env;
      const std::string rs = std::to_string(r);
      env.push_back("ORBITE_STORE=" + store_.address);
      env.push_back("ORBITE_STORE_TOKEN=" + store_.token);
      env.push_back("ORBITE_RANK=" + rs);
      env.push_back("ORBITE_WORLD_SIZE=" + n);
      env.push_back("ORBITE_LOCAL_RANK=" + rs);
      env.push_back("ORBITE_LOCAL_SIZE=" + n);
      std::vector<char*> envp;
      for (std::string& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);

      if (auto failure = spawn_one(rank, program, argv.data(), envp.data())) {
        say(failure->second);
        setup_failure_ = failure->first;
        stop_all(SIGTERM);
        return;
      }
      ORBITE_LOG(Info, Bootstrap) << "orbite-run: rank " << r << " is pid " << rank.pid;
    }
  }

  // On failure: orbite-run's exit status and the message.
  std::optional<std::pair<int, std::string>> spawn_one(Rank& rank, const std::string& program,
                                                       char* const* argv, char* const* envp) {
    net::Fd out_read, out_write, err_read, err_write;
    for (auto [read_end, write_end] : {std::pair{&out_read, &out_write}, {&err_read, &err_write}}) {
      int fds[2];
      if (!opts_.tag_output) break;
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        return std::pair{kExitLauncherError, "cannot create output pipes for rank " +
                                                 std::to_string(rank.index) + ": " +
                                                 errno_text(errno)};
      }
      read_end->reset(fds[0]);
      write_end->reset(fds[1]);
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    if (opts_.tag_output) {
      posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
      posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
    }
    // A rank reading a terminal from its background process group would be stopped (SIGTTIN).
    if (rank.index != 0 || ::isatty(STDIN_FILENO) == 1) {
      posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    }
    // Own process group: a rank's whole tree can be signalled, and a terminal's Ctrl-C reaches
    // orbite-run alone, which forwards it once.
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &signals_.child_defaults());
    pid_t pid = -1;
    // posix_spawn has no affinity attribute: the child inherits this thread's mask, so set it
    // around the spawn and put it back.
    cpu_set_t saved;
    const bool bind = !cpus_.empty() && ::sched_getaffinity(0, sizeof(saved), &saved) == 0;
    if (bind) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus_[static_cast<std::size_t>(rank.index) % cpus_.size()], &one);
      ::sched_setaffinity(0, sizeof(one), &one);
    }
    int err = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv, envp);
    if (bind) ::sched_setaffinity(0, sizeof(saved), &saved);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
      return std::pair{kExitCannotExecute, "cannot execute '" + program + "': " + errno_text(err)};
    }
    rank.pid = pid;
    rank.running = true;
    if (opts_.tag_output) {
      net::set_nonblocking(out_read.get());
      net::set_nonblocking(err_read.get());
      rank.out.fd = std::move(out_read);
      rank.out.dest = STDOUT_FILENO;
      rank.err.fd = std::move(err_read);
      rank.err.dest = STDERR_FILENO;
    }
    return std::nullopt;
  }

  static void raise_fd_limit(rlim_t needed) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
    limit.rlim_cur = std::min(limit.rlim_max, needed);
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }

  // -------------------------------------------------------------------------------------------
  // Event loop

  void poll_once(Clock::time_point until) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, Stream*>> owners;
    fds.push_back({signals_.wake_fd(), POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (!s->fd.valid()) continue;
        fds.push_back({s->fd.get(), POLLIN, 0});
        owners.emplace_back(&r, s);
      }
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    int timeout_ms = static_cast<int>(std::clamp<std::int64_t>(wait, 0, 1000));
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready <= 0) return;  // timeout or EINTR (a signal: handled by the caller)
    if (fds[0].revents != 0) signals_.drain_wake_pipe();
    for (size_t i = 1; i < fds.size(); ++i) {
      // One read per stream and round keeps a chatty rank from starving the others.
      if (fds[i].revents != 0) pump(*owners[i].first, *owners[i].second, buf_.size());
    }
  }

  // Reads up to `budget` bytes that are available now and forwards the complete lines.
  void pump(const Rank& rank, Stream& s, size_t budget) {
    std::string lines;
    const std::string prefix = "[" + std::to_string(rank.index) + "] ";
    while (s.fd.valid() && budget > 0) {
      ssize_t n = ::read(s.fd.get(), buf_.data(), std::min(budget, buf_.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {  // EOF (or a broken pipe): the partial last line still gets its prefix
        s.fd.reset();
        break;
      }
      budget -= static_cast<size_t>(n);
      std::string_view data(buf_.data(), static_cast<size_t>(n));
      for (size_t nl; (nl = data.find('\n')) != std::string_view::npos;) {
        lines += prefix;
        lines += s.partial;
        lines.append(data.substr(0, nl + 1));
        s.partial.clear();
        data.remove_prefix(nl + 1);
      }
      s.partial.append(data);
      if (s.partial.size() >= kMaxLine) {
        lines += prefix + s.partial + "\n";
        s.partial.clear();
      }
    }
    if (!s.fd.valid() && !s.partial.empty()) {
      lines += prefix + s.partial + "\n";
      s.partial.clear();
    }
    // Whole lines per write, so ranks' lines interleave but never mix within a line.
    if (!lines.empty()) write_fully(s.dest, lines);
  }

  void handle_signals() {
    for (int signo : signals_.forwarded()) {
      int count = SignalScope::take(signo);
      if (count == 0) continue;
      if (!is_terminating(signo)) {
        send_all(signo);
        continue;
      }
      if (term_signal_ != 0 || count > 1) {  // asked twice: the user is not waiting any longer
        ORBITE_LOG(Info, Bootstrap)
            << "orbite-run: " << signal_name(signo) << " received again; sending SIGKILL";
        term_signal_ = term_signal_ != 0 ? term_signal_ : signo;
        stopping_ = true;
        if (!give_up_at_) kill_at_ = Clock::now();
        continue;
      }
      term_signal_ = signo;
      stop_all(signo);
    }
    SignalScope::take(SIGCHLD);
  }

  // Notes exits but leaves the ranks as zombies until run() ends: a zombie leader keeps its process
  // group id from being reused, so stopping the job can still reach what a rank left behind.
  void reap() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      siginfo_t info{};
      int got = ::waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      const int wait_errno = errno;
      if ((got == 0 && info.si_pid == 0) || (got < 0 && wait_errno == EINTR)) continue;
      r.running = false;
      r.reaped = got < 0;
      // Its last output comes before any message about how it ended.
      pump(r, r.out, kMaxLine * 16);
      pump(r, r.err, kMaxLine * 16);
      if (got < 0) {  // someone else reaped it (SIGCHLD ignored by a parent library?)
        on_failure(r, kExitLauncherError, "vanished (" + errno_text(wait_errno) + ")");
      } else if (info.si_code == CLD_EXITED && info.si_status != 0) {
        on_failure(r, info.si_status, "exited with status " + std::to_string(info.si_status));
      } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
        int sig = info.si_status;
        on_failure(r, 128 + sig,
                   "was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) +
                       (info.si_code == CLD_DUMPED ? ", core dumped" : "") + ")");
      }
    }
  }

  void on_failure(const Rank& r, int exit_code, const std::string& how) {
    std::string what =
        "rank " + std::to_string(r.index) + " (pid " + std::to_string(r.pid) + ") " + how;
    if (first_failure_ || stopping_) {
      // Most likely our own SIGTERM/SIGKILL; the cause was reported already.
      if (!first_failure_) first_failure_ = exit_code;
      ORBITE_LOG(Info, Bootstrap) << "orbite-run: " << what;
      return;
    }
    first_failure_ = exit_code;
    if (any_running()) {
      say(what + "; stopping the other ranks");
      stop_all(SIGTERM);
    } else {
      say(what);
    }
  }

  // Sends `signo` now and SIGKILL after the grace to whatever is left.
  void stop_all(int signo) {
    stopping_ = true;
    send_all(signo);
    send_all(SIGCONT);  // a stopped rank would otherwise hold the signal until SIGKILL
    if (!kill_at_ && !give_up_at_) kill_at_ = Clock::now() + opts_.kill_grace;
  }

  void send_all(int signo) {
    for (const Rank& r : ranks_) {
      // Exited ranks too (their leftovers); never a reaped one, whose id may be someone else's.
      if (r.pid > 0 && !r.reaped) ::kill(-r.pid, signo);
    }
  }

  [[nodiscard]] bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }
  [[nodiscard]] int running_count() const {
    return static_cast<int>(
        std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  const LaunchOptions& opts_;
  // CPUs ranks are bound to, round-robin; empty: no binding.
  std::vector<int> cpus_;
  const HostedStore& store_;
  const SignalScope& signals_;
  std::vector<char> buf_;
  std::vector<Rank> ranks_;
  bool stopping_ = false;
  bool timed_out_ = false;
  int term_signal_ = 0;
  std::optional<int> setup_failure_;  // a rank could not be started
  std::optional<int> first_failure_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> give_up_at_;
};

}  // namespace

int run(const LaunchOptions& options) {
  if (options.num_ranks < 1 || options.num_ranks > kMaxRanks || options.command.empty()) {
    say("invalid launch options (need -n 1.." + std::to_string(kMaxRanks) + " and a program)");
    return kExitUsage;
  }
  SignalScope signals;
  if (Status s = signals.install(); !s.ok()) {
    say(s.message());
    return kExitLauncherError;
  }
  auto hosted = host_job_store(BootstrapConfig{}, /*all_ranks_local=*/true, options.store);
  if (!hosted.ok()) {
    say("cannot start the store server: " + hosted.status().to_string());
    return kExitLauncherError;
  }
  ORBITE_LOG(Info, Bootstrap) << "orbite-run: store at " << hosted->address << ", "
                              << options.num_ranks << " ranks";
  // The server outlives the Supervisor: ranks may talk to the store until they exit.
  Supervisor supervisor(options, *hosted, signals);
  return supervisor.run();
}

}  // namespace orbite::launcher
