// The control API: text commands that change a device while it runs, for tests that need a
// port to go down, a GID to change, a WR to fail, a connection to drop, completions to be late
// or a provider feature to be missing. The same commands come from three places: the config's
// "faults" (run at first use), softverbs_control() in the process (include/softverbs/control.h),
// and a UNIX socket named by SOFTVERBS_CONTROL_SOCKET ("%p" = the pid) for other processes
// (softverbs-ctl). Commands, DEV being soft_N or N:
//   port DEV up|down          show         DEV
//   gid DEV INDEX GID|delete  rate         DEV GBPS
//   delay DEV MICROSECONDS    fail_wr      DEV QPN|* NTH [STATUS]
//   fail_post DEV QPN|* NTH ERRNO [at=K|null]
//   fail_destroy DEV QPN|* NTH ERRNO
//   fail_dereg DEV NTH ERRNO  (the NTH ibv_dereg_mr on DEV fails, the MR stays registered)
//   fail_poll DEV NTH [COUNT] (the NTH ibv_poll_cq on a CQ of DEV that exists now, and
//                              COUNT-1 after it, return -1; CQs created later poll normally)
//   drop DEV QPN              disable|enable DEV mw|send_inv
//   mw_strict DEV on|off      mw_index_limit DEV N (0: none)
//   hold_flush DEV on|off     (send WRs flushed by a QP's move to ERR never complete)
//   fatal DEV                 (IBV_EVENT_DEVICE_FATAL on every open context; nothing else)
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "internal.h"

namespace softverbs {

DeviceState* find_state(const std::string& name);  // port.cpp

namespace {

const char* const kStatusNames[] = {
    "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
    "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
    "RESP_TIMEOUT_ERR", "GENERAL_ERR"};
constexpr int kStatusCount = sizeof(kStatusNames) / sizeof(kStatusNames[0]);

struct Command {
  std::string verb;
  DeviceState* st = nullptr;
  std::vector<std::string> args;  // after the device
};

bool parse_u64(const std::string& s, uint64_t* v) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) {
    return false;
  }
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

bool parse_qpn(const std::string& s, uint32_t* qpn) {
  if (s == "*") {
    *qpn = 0;
    return true;
  }
  char* end = nullptr;
  const unsigned long v = std::strtoul(s.c_str(), &end, 0);
  if (s.empty() || *end != '\0' || v == 0 || v > 0xffffff) return false;
  *qpn = static_cast<uint32_t>(v);
  return true;
}

// An errno name (ENOMEM, EINVAL, EIO, EAGAIN, EFAULT) or a positive number; 0 when neither.
int parse_errno(const std::string& s) {
  static const std::pair<const char*, int> names[] = {{"ENOMEM", ENOMEM}, {"EINVAL", EINVAL},
                                                      {"EIO", EIO},       {"EAGAIN", EAGAIN},
                                                      {"EFAULT", EFAULT}, {"EBUSY", EBUSY}};
  for (const auto& [name, value] : names) {
    if (s == name) return value;
  }
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && v > 0 && v < 4096 ? static_cast<int>(v) : 0;
}

// "at=K" (K >= 0) or "null" (-1); -2 when neither.
int parse_at(const std::string& s) {
  if (s == "null" || s == "at=null") return -1;
  if (s.rfind("at=", 0) != 0) return -2;
  char* end = nullptr;
  const long v = std::strtol(s.c_str() + 3, &end, 10);
  return s.size() > 3 && *end == '\0' && v >= 0 && v < 65536 ? static_cast<int>(v) : -2;
}

int parse_status(const std::string& s) {
  std::string n = s.rfind("IBV_WC_", 0) == 0 ? s.substr(7) : s;
  for (int i = 1; i < kStatusCount; ++i) {
    if (n == kStatusNames[i]) return i;
  }
  return -1;
}

// Parses and checks everything but what only exists at run time (a QP number's QP). Without
// resolve (the config's faults, checked while the device list is being built) the device is
// not looked up.
std::string parse(const std::string& text, Command* c, bool resolve = true) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return "empty command";
  c->verb = words[0];
  static const char* const verbs[] = {
      "port",         "gid",        "rate",           "delay",      "fail_wr", "fail_post",
      "fail_destroy", "fail_dereg", "fail_poll",      "drop",       "show",    "disable",
      "enable",       "mw_strict",  "mw_index_limit", "hold_flush", "fatal"};
  bool known = false;
  for (const char* v : verbs) known = known || c->verb == v;
  if (!known) {
    return "unknown command '" + c->verb +
           "' (port, gid, rate, delay, fail_wr, fail_post, fail_destroy, fail_dereg, fail_poll, "
           "drop, show, "
           "disable, enable, "
           "mw_strict, mw_index_limit, hold_flush, fatal)";
  }
  if (words.size() < 2) return c->verb + ": missing device";
  if (resolve) {
    c->st = find_state(words[1]);
    if (c->st == nullptr) return c->verb + ": no device '" + words[1] + "'";
  }
  c->args.assign(words.begin() + 2, words.end());
  const auto& a = c->args;
  auto want = [&](size_t lo, size_t hi, const char* usage) -> std::string {
    if (a.size() < lo || a.size() > hi) return c->verb + ": usage: " + c->verb + " DEV " + usage;
    return "";
  };
  uint64_t u = 0;
  if (c->verb == "port") {
    if (auto e = want(1, 1, "up|down"); !e.empty()) return e;
    if (a[0] != "up" && a[0] != "down") return "port: state '" + a[0] + "' is not up or down";
  } else if (c->verb == "gid") {
    if (auto e = want(2, 2, "INDEX GID|delete"); !e.empty()) return e;
    if (!parse_u64(a[0], &u) || u == 0 || u > 255) {
      return "gid: index '" + a[0] + "' must be 1..255 (0 is the bind address)";
    }
    ibv_gid g{};
    if (a[1] != "delete" && inet_pton(AF_INET6, a[1].c_str(), g.raw) != 1) {
      return "gid: '" + a[1] + "' is not an IPv6 address";
    }
  } else if (c->verb == "rate") {
    if (auto e = want(1, 1, "GBPS"); !e.empty()) return e;
    char* end = nullptr;
    const double r = std::strtod(a[0].c_str(), &end);
    if (*end != '\0' || !(r > 0) || r > 1e6) return "rate: '" + a[0] + "' is not a rate in Gb/s";
  } else if (c->verb == "delay") {
    if (auto e = want(1, 1, "MICROSECONDS"); !e.empty()) return e;
    if (!parse_u64(a[0], &u) || u > 60000000) {
      return "delay: '" + a[0] + "' is not 0..60000000 microseconds";
    }
  } else if (c->verb == "fail_wr") {
    if (auto e = want(2, 3, "QPN|* NTH [STATUS]"); !e.empty()) return e;
    uint32_t qpn = 0;
    if (!parse_qpn(a[0], &qpn)) return "fail_wr: QP number '" + a[0] + "' is not valid";
    if (!parse_u64(a[1], &u) || u == 0) return "fail_wr: NTH '" + a[1] + "' must be >= 1";
    if (a.size() == 3 && parse_status(a[2]) < 0) {
      return "fail_wr: status '" + a[2] + "' is not an ibv_wc_status error name";
    }
  } else if (c->verb == "fail_post") {
    if (auto e = want(3, 4, "QPN|* NTH ERRNO [at=K|null]"); !e.empty()) return e;
    uint32_t qpn = 0;
    if (!parse_qpn(a[0], &qpn)) return "fail_post: QP number '" + a[0] + "' is not valid";
    if (!parse_u64(a[1], &u) || u == 0) return "fail_post: NTH '" + a[1] + "' must be >= 1";
    if (parse_errno(a[2]) == 0) return "fail_post: '" + a[2] + "' is not an errno value";
    if (a.size() == 4 && parse_at(a[3]) == -2) {
      return "fail_post: '" + a[3] + "' is not at=K or null";
    }
  } else if (c->verb == "fail_destroy") {
    if (auto e = want(3, 3, "QPN|* NTH ERRNO"); !e.empty()) return e;
    uint32_t qpn = 0;
    if (!parse_qpn(a[0], &qpn)) return "fail_destroy: QP number '" + a[0] + "' is not valid";
    if (!parse_u64(a[1], &u) || u == 0) return "fail_destroy: NTH '" + a[1] + "' must be >= 1";
    if (parse_errno(a[2]) == 0) return "fail_destroy: '" + a[2] + "' is not an errno value";
  } else if (c->verb == "fail_dereg") {
    if (auto e = want(2, 2, "NTH ERRNO"); !e.empty()) return e;
    if (!parse_u64(a[0], &u) || u == 0) return "fail_dereg: NTH '" + a[0] + "' must be >= 1";
    if (parse_errno(a[1]) == 0) return "fail_dereg: '" + a[1] + "' is not an errno value";
  } else if (c->verb == "fail_poll") {
    if (auto e = want(1, 2, "NTH [COUNT]"); !e.empty()) return e;
    if (!parse_u64(a[0], &u) || u == 0) return "fail_poll: NTH '" + a[0] + "' must be >= 1";
    if (a.size() == 2 && (!parse_u64(a[1], &u) || u == 0 || u > 1000000000)) {
      return "fail_poll: COUNT '" + a[1] + "' must be 1..1000000000";
    }
  } else if (c->verb == "drop") {
    if (auto e = want(1, 1, "QPN"); !e.empty()) return e;
    uint32_t qpn = 0;
    if (!parse_qpn(a[0], &qpn) || qpn == 0) return "drop: QP number '" + a[0] + "' is not valid";
  } else if (c->verb == "disable" || c->verb == "enable") {
    if (auto e = want(1, 1, "mw|send_inv"); !e.empty()) return e;
    if (a[0] != "mw" && a[0] != "send_inv") {
      return c->verb + ": feature '" + a[0] + "' is not mw or send_inv";
    }
  } else if (c->verb == "mw_strict") {
    if (auto e = want(1, 1, "on|off"); !e.empty()) return e;
    if (a[0] != "on" && a[0] != "off") return "mw_strict: '" + a[0] + "' is not on or off";
  } else if (c->verb == "hold_flush") {
    if (auto e = want(1, 1, "on|off"); !e.empty()) return e;
    if (a[0] != "on" && a[0] != "off") return "hold_flush: '" + a[0] + "' is not on or off";
  } else if (c->verb == "mw_index_limit") {
    if (auto e = want(1, 1, "N"); !e.empty()) return e;
    if (!parse_u64(a[0], &u) || u > kMwIndexCount) {
      return "mw_index_limit: '" + a[0] + "' is not 0.." + std::to_string(kMwIndexCount) +
             " (0: no limit)";
    }
  } else {  // show, fatal
    if (auto e = want(0, 0, ""); !e.empty()) return e;
  }
  return "";
}

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

std::string show(DeviceState& st) {
  std::ostringstream o;
  o << "ok " << st.cfg->name << " port "
    << (st.port_state() == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN");
  {
    std::lock_guard lock(st.mu);
    o << " link " << (st.link_up ? "up" : "down") << " rate " << st.rate_gbps;
  }
  o << " delay_us " << st.delay_ns / 1000 << (st.mw_disabled ? " mw off" : "")
    << (st.send_inv_disabled ? " send_inv off" : "") << (st.mw_strict ? "" : " mw_strict off");
  if (const uint32_t limit = st.mw_index_limit; limit != 0) o << " mw_index_limit " << limit;
  if (st.hold_flushes) o << " hold_flush on";
  if (const uint64_t held = st.flushes_held; held != 0) o << " flushes_held " << held;
  if (const uint64_t failed = st.polls_failed; failed != 0) o << " polls_failed " << failed;
  std::lock_guard lock(st.gid_mu);
  o << " gids";
  for (const ibv_gid& g : st.gids) o << " " << gid_text(g);
  return o.str();
}

void raise(DeviceState& st, ibv_event_type type) {
  std::lock_guard lock(st.mu);
  for (Device* dev : st.open) dev->async_event(type, nullptr, nullptr);
}

// Drops the requester connection of QP qpn on any open context of the device.
bool drop_qp(DeviceState& st, uint32_t qpn) {
  std::lock_guard lock(st.mu);
  for (Device* dev : st.open) {
    std::shared_ptr<Qp> qp = dev->find_qp(qpn);
    if (!qp) continue;
    std::shared_ptr<Conn> conn;
    {
      std::lock_guard ql(qp->mu);
      conn = qp->out;
    }
    if (conn) dev->nic->abort(conn);
    return true;
  }
  return false;
}

}  // namespace

std::string check_command(const std::string& command) {
  Command c;
  return parse(command, &c, false);
}

int execute_command(const std::string& command, std::string* reply) {
  Command c;
  if (std::string e = parse(command, &c); !e.empty()) {
    *reply = "error: " + e;
    return EINVAL;
  }
  DeviceState& st = *c.st;
  const auto& a = c.args;
  *reply = "ok";
  if (c.verb == "port") {
    set_admin_state(st, a[0] == "up" ? IBV_PORT_ACTIVE : IBV_PORT_DOWN);
  } else if (c.verb == "gid") {
    const auto index = static_cast<size_t>(std::stoul(a[0]));
    {
      std::lock_guard lock(st.gid_mu);
      if (index > st.gids.size()) {
        *reply = "error: gid: index " + a[0] + " leaves a hole (the table has " +
                 std::to_string(st.gids.size()) + " entries)";
        return EINVAL;
      }
      ibv_gid g{};
      if (a[1] != "delete") inet_pton(AF_INET6, a[1].c_str(), g.raw);
      if (index == st.gids.size()) {
        if (a[1] == "delete") {
          *reply = "error: gid: no entry " + a[0] + " to delete";
          return EINVAL;
        }
        st.gids.push_back(g);
      } else if (a[1] == "delete" && index + 1 == st.gids.size()) {
        st.gids.pop_back();
      } else {
        st.gids[index] = g;  // a deleted entry in the middle reads as the zero GID
      }
    }
    raise(st, IBV_EVENT_GID_CHANGE);
  } else if (c.verb == "rate") {
    const double r = std::strtod(a[0].c_str(), nullptr);
    {
      std::lock_guard lock(st.mu);
      st.rate_gbps = r;
      encode_rate(r, &st.active_speed, &st.active_width);
    }
    st.bucket.set_rate(r * 1e9 / 8, now_ns());
  } else if (c.verb == "delay") {
    st.delay_ns = std::stoull(a[0]) * 1000;
  } else if (c.verb == "fail_wr") {
    WrFault f;
    parse_qpn(a[0], &f.qpn);
    f.countdown = std::stoull(a[1]);
    if (a.size() == 3) f.status = static_cast<ibv_wc_status>(parse_status(a[2]));
    std::lock_guard lock(st.fault_mu);
    st.wr_faults.push_back(f);
    st.have_wr_faults = true;
  } else if (c.verb == "fail_post") {
    PostFault f;
    parse_qpn(a[0], &f.qpn);
    f.countdown = std::stoull(a[1]);
    f.err = parse_errno(a[2]);
    f.at = a.size() == 4 ? parse_at(a[3]) : -1;
    std::lock_guard lock(st.fault_mu);
    st.post_faults.push_back(f);
    st.have_post_faults = true;
  } else if (c.verb == "fail_destroy") {
    DestroyFault f;
    parse_qpn(a[0], &f.qpn);
    f.countdown = std::stoull(a[1]);
    f.err = parse_errno(a[2]);
    std::lock_guard lock(st.fault_mu);
    st.destroy_faults.push_back(f);
  } else if (c.verb == "fail_dereg") {
    DestroyFault f;
    f.countdown = std::stoull(a[0]);
    f.err = parse_errno(a[1]);
    std::lock_guard lock(st.fault_mu);
    st.dereg_faults.push_back(f);
  } else if (c.verb == "fail_poll") {
    PollFault f;
    f.countdown = std::stoull(a[0]);
    f.remaining = a.size() == 2 ? std::stoull(a[1]) : 1;
    f.cq_limit = st.next_cq_serial.load();
    std::lock_guard lock(st.fault_mu);
    st.poll_faults.push_back(f);
    st.have_poll_faults = true;
  } else if (c.verb == "drop") {
    uint32_t qpn = 0;
    parse_qpn(a[0], &qpn);
    if (!drop_qp(st, qpn)) {
      *reply = "error: drop: no QP " + a[0] + " on " + st.cfg->name;
      return ENOENT;
    }
  } else if (c.verb == "disable" || c.verb == "enable") {
    (a[0] == "mw" ? st.mw_disabled : st.send_inv_disabled) = c.verb == "disable";
  } else if (c.verb == "hold_flush") {
    st.hold_flushes = a[0] == "on";
  } else if (c.verb == "fatal") {
    raise(st, IBV_EVENT_DEVICE_FATAL);
  } else if (c.verb == "mw_strict") {
    st.mw_strict = a[0] == "on";
  } else if (c.verb == "mw_index_limit") {
    // Windows already allocated above a lowered limit stay; new ones must fit below it.
    st.mw_index_limit = static_cast<uint32_t>(std::stoul(a[0]));
  } else {
    *reply = show(st);
  }
  return 0;
}

int run_command(const std::string& command, std::string* reply) {
  if (!devices().empty()) device_state(0);  // applies the config's faults first
  return execute_command(command, reply);
}

// One command per connection: a line in, a line out.
void start_control_socket() {
  const char* env = std::getenv("SOFTVERBS_CONTROL_SOCKET");
  if (env == nullptr || *env == '\0') return;
  std::string path = env;
  if (size_t p = path.find("%p"); p != std::string::npos) {
    path.replace(p, 2, std::to_string(getpid()));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "softverbs: SOFTVERBS_CONTROL_SOCKET '%s' is too long\n", path.c_str());
    return;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unlink(path.c_str());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 16) != 0) {
    std::fprintf(stderr, "softverbs: control socket %s: %s\n", path.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  std::thread([fd] {
    for (;;) {
      const int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      std::string line;
      char ch;
      while (line.size() < 4096 && read(c, &ch, 1) == 1 && ch != '\n') line.push_back(ch);
      std::string reply;
      execute_command(line, &reply);
      reply.push_back('\n');
      if (write(c, reply.data(), reply.size()) < 0) {
        // The client left; nothing to tell.
      }
      close(c);
    }
  }).detach();
}

}  // namespace softverbs

extern "C" int softverbs_control(const char* command, char* reply, size_t reply_size) {
  std::string r;
  const int err = softverbs::run_command(command != nullptr ? command : "", &r);
  if (reply != nullptr && reply_size > 0) std::snprintf(reply, reply_size, "%s", r.c_str());
  return err;
}
