// Fault injection and statistics. The same text commands come from the config's "faults" (run
// at cuInit) and from softcuda_control() in the process (include/softcuda/control.h):
//
//   fail NAME NTH [ERROR]       the NTH call of entry point NAME from now returns ERROR, once
//   fail NAME every N [ERROR]   every Nth call of NAME from now returns ERROR
//   clear [NAME]                disarms NAME (or every call fault)
//   fail_copy NTH [ERROR] [sticky]  the NTH copy executed from now fails (at the next sync);
//                               sticky: its context fails every later call
//   fail_record NTH [ERROR]     the NTH event record executed from now fails
//   stall MS                    the next op enqueued takes MS milliseconds first when it runs
//   hang                        the next op enqueued waits until "release" when it runs
//   release                     lets every held op go (and disarms "hang")
//   oom BYTES | oom off         allocations fail with OUT_OF_MEMORY after BYTES more bytes
//   stats                       JSON: calls, synchronizations, live memory (and live IPC
//                               imports: handles opened here, not yet closed), pending work
//   reset_stats                 zeroes the call counters
//
// NAME is the base name cuGetProcAddress knows (cuMemAlloc covers cuMemAlloc_v2). ERROR is a
// CUresult name (CUDA_ERROR_LAUNCH_FAILED) or number; the default is CUDA_ERROR_UNKNOWN.
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "internal.h"

namespace softcuda {
namespace {

// A "fail" armed before the entry point's first call: its call sites are function-local
// statics, made at that call, which arm themselves from here.
struct PendingFault {
  std::int64_t nth = 0;
  std::int64_t every = 0;
  int error = 0;
};

struct SiteTable {
  std::mutex mu;
  std::vector<CallSite*> sites;
  std::map<std::string, PendingFault> pending;  // by base name
};
SiteTable& sites() {
  static SiteTable* t = new SiteTable;  // never destroyed: call sites are statics
  return *t;
}

std::string base_name(const std::string& symbol) {
  std::string s = symbol;
  for (const char* suffix : {"_ptds", "_ptsz"}) {
    const std::size_t n = std::strlen(suffix);
    if (s.size() > n && s.compare(s.size() - n, n, suffix) == 0) s.resize(s.size() - n);
  }
  const std::size_t v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      s.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    s.resize(v);
  }
  return s;
}

struct ErrorName {
  const char* name;
  int value;
};
const ErrorName kErrors[] = {
#define SC_ERROR(name, value) {#name, value},
#include "errors.inc"
#undef SC_ERROR
};

}  // namespace

static bool exported(const std::string& base) {
  static const std::set<std::string> names = {
#define SC_SYMBOL(name, version, variant, symbol) #name,
#include "exports.inc"
#undef SC_SYMBOL
  };
  return names.count(base) != 0;
}

CallSite::CallSite(const char* n) : name(n) {
  std::lock_guard<std::mutex> g(sites().mu);
  sites().sites.push_back(this);
  auto it = sites().pending.find(base_name(n));
  if (it != sites().pending.end()) {
    fail_error.store(it->second.error);
    fail_nth.store(it->second.nth);
    fail_every.store(it->second.every);
  }
}

CUresult CallSite::hit() {
  calls.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t nth = fail_nth.load(std::memory_order_relaxed);
  const std::int64_t every = fail_every.load(std::memory_order_relaxed);
  if (nth == 0 && every == 0) return CUDA_SUCCESS;
  const std::int64_t n = seen.fetch_add(1) + 1;
  if (nth != 0 && n == nth) {
    fail_nth.store(0);
    return static_cast<CUresult>(fail_error.load());
  }
  if (every != 0 && n % every == 0) return static_cast<CUresult>(fail_error.load());
  return CUDA_SUCCESS;
}

const char* error_name(CUresult r) {
  for (const ErrorName& e : kErrors) {
    if (e.value == static_cast<int>(r)) return e.name;
  }
  return nullptr;
}

CUresult error_from_name(const std::string& s, bool* ok) {
  *ok = true;
  for (const ErrorName& e : kErrors) {
    if (s == e.name) return static_cast<CUresult>(e.value);
  }
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 6) {
    const int v = std::atoi(s.c_str());
    if (error_name(static_cast<CUresult>(v)) != nullptr) return static_cast<CUresult>(v);
  }
  *ok = false;
  return CUDA_ERROR_UNKNOWN;
}

namespace {

bool parse_count(const std::string& s, std::int64_t* v) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *v = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

std::string stats_json() {
  std::ostringstream o;
  o << "{\"calls\":{";
  {
    std::lock_guard<std::mutex> g(sites().mu);
    bool first = true;
    std::map<std::string, std::uint64_t> by_name;
    for (CallSite* s : sites().sites) by_name[s->name] += s->calls.load();
    for (const auto& [name, n] : by_name) {
      if (n == 0) continue;
      o << (first ? "" : ",") << "\"" << name << "\":" << n;
      first = false;
    }
  }
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  o << "},\"event_syncs\":{";
  bool first = true;
  for (const auto& [ptr, ev] : st.events) {
    if (ev->syncs == 0) continue;
    o << (first ? "" : ",") << "\"" << ev->id << "\":" << ev->syncs;
    first = false;
  }
  std::uint64_t live = 0, device_live = 0, ipc_imports = 0;
  for (const auto& [base, a] : st.allocations) {
    ++live;
    if (a->kind == MemKind::Device || a->kind == MemKind::Vmm) ++device_live;
    if (a->kind == MemKind::IpcImport) ++ipc_imports;
  }
  o << "},\"event_synchronize_calls\":" << st.event_syncs
    << ",\"stream_synchronize_calls\":" << st.stream_syncs
    << ",\"ctx_synchronize_calls\":" << st.ctx_syncs << ",\"live_allocations\":" << live
    << ",\"live_device_allocations\":" << device_live << ",\"live_ipc_imports\":" << ipc_imports
    << ",\"live_device_bytes\":" << st.live_bytes << ",\"pending_ops\":" << st.pending_ops
    << ",\"copies\":" << st.copies << ",\"copy_bytes\":" << st.copy_bytes
    << ",\"streams\":" << st.streams.size() << ",\"events\":" << st.events.size()
    << ",\"held\":" << st.faults.held << "}";
  return o.str();
}

std::string arm_call_fault(const std::vector<std::string>& a) {
  // fail NAME NTH [ERROR] | fail NAME every N [ERROR]
  if (a.size() < 3) return "error: usage: fail NAME NTH|every N [ERROR]";
  const bool every = a[2] == "every";
  std::int64_t n = 0;
  const std::size_t count_at = every ? 3 : 2;
  if (a.size() <= count_at || !parse_count(a[count_at], &n) || n == 0) {
    return "error: fail: count '" + (a.size() > count_at ? a[count_at] : "") +
           "' is not a positive number";
  }
  CUresult err = CUDA_ERROR_UNKNOWN;
  if (a.size() > count_at + 1) {
    bool ok = false;
    err = error_from_name(a[count_at + 1], &ok);
    if (!ok) return "error: fail: '" + a[count_at + 1] + "' is not a CUresult";
  }
  if (!exported(a[1])) return "error: fail: the driver exports no entry point named '" + a[1] + "'";
  std::lock_guard<std::mutex> g(sites().mu);
  for (CallSite* s : sites().sites) {
    if (base_name(s->name) != a[1]) continue;
    s->seen.store(0);
    s->fail_error.store(static_cast<int>(err));
    s->fail_nth.store(every ? 0 : n);
    s->fail_every.store(every ? n : 0);
  }
  // Call sites not made yet (no call so far) arm themselves at their first call.
  sites().pending[a[1]] = PendingFault{every ? 0 : n, every ? n : 0, static_cast<int>(err)};
  return "ok";
}

std::string exec_fault(const std::vector<std::string>& a) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  ExecFaults& f = st.faults;
  const std::string& verb = a[0];
  if (verb == "fail_copy" || verb == "fail_record") {
    std::int64_t n = 0;
    if (a.size() < 2 || !parse_count(a[1], &n) || n == 0) {
      return "error: " + verb + ": NTH must be a positive number";
    }
    CUresult err = CUDA_ERROR_UNKNOWN;
    bool sticky = false;
    for (std::size_t i = 2; i < a.size(); ++i) {
      if (a[i] == "sticky" && verb == "fail_copy") {
        sticky = true;
        continue;
      }
      bool ok = false;
      err = error_from_name(a[i], &ok);
      if (!ok) return "error: " + verb + ": '" + a[i] + "' is not a CUresult";
    }
    if (verb == "fail_copy") {
      f.copy_nth = n;
      f.copies_seen = 0;
      f.copy_error = err;
      f.copy_sticky = sticky;
    } else {
      f.record_nth = n;
      f.records_seen = 0;
      f.record_error = err;
    }
    return "ok";
  }
  if (verb == "stall") {
    std::int64_t ms = 0;
    if (a.size() != 2 || !parse_count(a[1], &ms)) return "error: stall: MS must be a number";
    f.stall_ms = ms;
    return "ok";
  }
  if (verb == "hang") {
    f.hang = true;
    return "ok";
  }
  if (verb == "release") {
    f.hang = false;
    f.releases++;
    st.cv.notify_all();
    return "ok";
  }
  if (verb == "oom") {
    if (a.size() == 2 && a[1] == "off") {
      f.oom = false;
      return "ok";
    }
    std::int64_t bytes = 0;
    if (a.size() != 2 || !parse_count(a[1], &bytes)) return "error: oom: BYTES|off";
    f.oom = true;
    f.oom_budget = static_cast<std::uint64_t>(bytes);
    return "ok";
  }
  return "error: unknown command '" + verb + "'";
}

}  // namespace

std::string run_control(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> a;
  for (std::string w; in >> w;) a.push_back(w);
  if (a.empty()) return "error: empty command";
  if (a[0] == "fail") return arm_call_fault(a);
  if (a[0] == "clear") {
    std::lock_guard<std::mutex> g(sites().mu);
    if (a.size() > 1) {
      sites().pending.erase(a[1]);
    } else {
      sites().pending.clear();
    }
    for (CallSite* s : sites().sites) {
      if (a.size() > 1 && base_name(s->name) != a[1]) continue;
      s->fail_nth.store(0);
      s->fail_every.store(0);
    }
    return "ok";
  }
  if (a[0] == "stats") return "ok " + stats_json();
  if (a[0] == "reset_stats") {
    std::lock_guard<std::mutex> g(sites().mu);
    for (CallSite* s : sites().sites) s->calls.store(0);
    return "ok";
  }
  return exec_fault(a);
}

}  // namespace softcuda

// Runs one control command; 0 and "ok..." in reply, or EINVAL and "error: ...".
SC_API int softcuda_control(const char* command, char* reply, size_t reply_size) {
  const std::string r = softcuda::run_control(command != nullptr ? command : "");
  if (reply != nullptr && reply_size > 0) {
    std::snprintf(reply, reply_size, "%s", r.c_str());
  }
  return r.rfind("ok", 0) == 0 ? 0 : 22;
}
