#include "harness/coll_driver.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "harness/coll_check.h"

namespace orbite::perf {
namespace {

struct CollName {
  Coll coll;
  std::string_view name;
};
constexpr CollName kColls[] = {
    {Coll::AllReduce, "all_reduce"},         {Coll::AllGather, "all_gather"},
    {Coll::Broadcast, "broadcast"},          {Coll::Reduce, "reduce"},
    {Coll::ReduceScatter, "reduce_scatter"}, {Coll::AllToAll, "alltoall"}};

struct TypeInfo {
  ElemType type;
  std::string_view name;
  std::size_t size;
};
constexpr TypeInfo kTypes[] = {
    {ElemType::Int8, "int8", 1},       {ElemType::Uint8, "uint8", 1},
    {ElemType::Int32, "int32", 4},     {ElemType::Uint32, "uint32", 4},
    {ElemType::Int64, "int64", 8},     {ElemType::Uint64, "uint64", 8},
    {ElemType::Float16, "float16", 2}, {ElemType::Bfloat16, "bfloat16", 2},
    {ElemType::Float32, "float32", 4}, {ElemType::Float64, "float64", 8},
};
// nccl-tests' and NCCL's spellings of the same types.
constexpr std::pair<std::string_view, ElemType> kTypeAliases[] = {
    {"char", ElemType::Int8},     {"int", ElemType::Int32},    {"uint", ElemType::Uint32},
    {"half", ElemType::Float16},  {"fp16", ElemType::Float16}, {"bf16", ElemType::Bfloat16},
    {"float", ElemType::Float32}, {"fp32", ElemType::Float32}, {"double", ElemType::Float64},
    {"fp64", ElemType::Float64},
};
constexpr std::pair<RedOp, std::string_view> kOps[] = {{RedOp::Sum, "sum"},
                                                       {RedOp::Prod, "prod"},
                                                       {RedOp::Min, "min"},
                                                       {RedOp::Max, "max"},
                                                       {RedOp::Avg, "avg"}};

constexpr std::uint64_t kPage = 4096;
std::uint64_t page_round(std::uint64_t bytes) {
  return (bytes + kPage - 1) / kPage * kPage;
}

std::string type_list() {
  std::string out;
  for (const TypeInfo& t : kTypes) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

// nccl-tests' size conventions, for --help and the table's notes.
std::string size_convention(Coll coll) {
  switch (coll) {
    case Coll::AllGather:
      return "size: the receive buffer (every rank's block); count: elements each rank sends, "
             "size/ranks rounded down to a multiple of 4";
    case Coll::ReduceScatter:
      return "size: the send buffer (every rank's block); count: elements each rank receives, "
             "size/ranks rounded down to a multiple of 4";
    case Coll::AllToAll:
      return "size: each rank's send (and receive) buffer; count: elements per peer, size/ranks "
             "rounded down to 16 bytes";
    default: return "size: each rank's buffer; count: its elements";
  }
}

std::string bus_formula(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "2(n-1)/n";
    case Coll::Broadcast:
    case Coll::Reduce: return "1";
    default: return "(n-1)/n";
  }
}

struct Measured {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::uint64_t wrong = 0;
  int iters = 0;
  // -p 1: the per-call time at the 50th, 90th and 99th percentile (each the slowest rank's).
  double p50_us = 0, p90_us = 0, p99_us = 0;
};

// The sample at percentile q (0..100) of sorted samples, nearest-rank; 0 when empty.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank =
      static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

class Sweep {
 public:
  Sweep(CollBackend& backend, const CollSetup& setup)
      : b_(backend),
        setup_(setup),
        o_(setup.options),
        c_(setup.coll_options),
        rank_(backend.rank()),
        ranks_(backend.size()),
        elem_(type_size(c_.type)),
        spec_{setup.coll, c_.type, c_.op, c_.root, backend.size()} {
    std::uint64_t arena = 0;
    for (std::uint64_t size : size_list(o_)) {
      const CollShape shape = coll_shape(setup_.coll, size, elem_, ranks_);
      arena = std::max(arena, slot_bytes(shape) * static_cast<std::uint64_t>(slots(shape)));
    }
    device_ = backend.make_arena(arena);
    if (device_) {
      base_ = device_->data();
    } else {
      host_ = Buffer(arena);
      base_ = host_.data();
    }
  }

  Measured measure(const CollShape& shape, bool in_place) {
    Measured m;
    const int in_flight = slots(shape);
    std::vector<CollCall> calls;
    for (int s = 0; s < in_flight; ++s) calls.push_back(make_call(shape, s, in_place));
    const int warm = scaled_iters(o_.warmup_iters, shape.size_bytes(), 1);
    m.iters = scaled_iters(o_.iters, shape.size_bytes(), kMinTimedIters);
    b_.barrier();
    loop(calls, warm);
    b_.barrier();
    const auto start = PerfClock::now();
    loop(calls, m.iters);
    const double mine = micros_since(start) / m.iters;
    // The slowest rank's time is the collective's, as a user waiting on all of them sees it.
    m.time_us = b_.max_over_ranks(mine);
    m.algbw = gbps(static_cast<double>(shape.size_bytes()), m.time_us);
    m.busbw = m.algbw * bus_factor(setup_.coll, ranks_);
    if (c_.percentiles && !in_place) {
      // A loop of its own, so that reading the clock per call does not touch the mean above.
      std::vector<double> calls_us;
      calls_us.reserve(static_cast<std::size_t>(m.iters));
      b_.barrier();
      for (int i = 0; i < m.iters; ++i) {
        const auto start_call = PerfClock::now();
        b_.run(calls.front());
        calls_us.push_back(micros_since(start_call));
      }
      std::sort(calls_us.begin(), calls_us.end());
      m.p50_us = b_.max_over_ranks(percentile(calls_us, 50));
      m.p90_us = b_.max_over_ranks(percentile(calls_us, 90));
      m.p99_us = b_.max_over_ranks(percentile(calls_us, 99));
    }
    if (o_.check) m.wrong = check(shape, calls.front(), in_place);
    return m;
  }

 private:
  int slots(const CollShape& shape) const {
    if (c_.blocking) return 1;
    const std::uint64_t fit = kInFlightBytes / std::max<std::uint64_t>(slot_bytes(shape), 1);
    return static_cast<int>(
        std::clamp<std::uint64_t>(fit, 1, static_cast<std::uint64_t>(kMaxInFlight)));
  }

  static std::uint64_t slot_bytes(const CollShape& shape) {
    return page_round(shape.send_bytes) + page_round(shape.recv_bytes);
  }

  // Slot s's buffers: send then receive; in place, one buffer at the slot's start, aliased as
  // NCCL defines it (communicator.h).
  CollCall make_call(const CollShape& shape, int slot, bool in_place) {
    std::byte* base = base_ + static_cast<std::uint64_t>(slot) * slot_bytes(shape);
    CollCall call;
    call.count = shape.count;
    call.in_place = in_place;
    const std::uint64_t own_block = static_cast<std::uint64_t>(rank_) * shape.count * elem_;
    if (!in_place) {
      call.send = base;
      call.recv = base + page_round(shape.send_bytes);
    } else if (setup_.coll == Coll::AllGather) {
      call.recv = base;
      call.send = base + own_block;
    } else if (setup_.coll == Coll::ReduceScatter) {
      call.send = base;
      call.recv = base + own_block;
    } else {
      call.send = base;
      call.recv = base;
    }
    return call;
  }

  void loop(const std::vector<CollCall>& calls, int iters) {
    const int in_flight = static_cast<int>(calls.size());
    if (in_flight == 1) {
      for (int i = 0; i < iters; ++i) b_.run(calls.front());
      return;
    }
    for (int i = 0; i < iters; ++i) {
      const int s = i % in_flight;
      if (i >= in_flight) b_.wait(s);
      b_.start(s, calls[static_cast<std::size_t>(s)]);
    }
    // Wait in the order they started.
    for (int i = std::max(0, iters - in_flight); i < iters; ++i) b_.wait(i % in_flight);
  }

  // One untimed call on fresh inputs and a poisoned output, then every result element against
  // the host reference. Returns the wrong elements of all ranks. Memory the CPU cannot touch is
  // prepared and checked in a host mirror of slot 0 (where `call` lies), copied in and out.
  std::uint64_t check(const CollShape& shape, const CollCall& call, bool in_place) {
    const std::uint64_t n = static_cast<std::uint64_t>(ranks_);
    const std::uint64_t send_elems = shape.send_bytes / elem_;
    const bool mirrored = device_ && !device_->host_accessible();
    const std::uint64_t span = slot_bytes(shape);
    Buffer mirror = mirrored ? Buffer(span) : Buffer();
    auto host = [&](const std::byte* p) {
      return mirrored ? mirror.data() + (p - base_) : const_cast<std::byte*>(p);
    };
    std::byte* send = host(call.send);
    std::byte* recv = host(call.recv);
    if (!in_place) {
      fill_input(spec_, rank_, send, 0, send_elems);
      poison(recv, shape.recv_bytes);
    } else if (setup_.coll == Coll::AllGather) {
      poison(recv, shape.recv_bytes);
      fill_input(spec_, rank_, send, 0, shape.count);
    } else if (setup_.coll == Coll::Broadcast && rank_ != c_.root) {
      poison(recv, shape.recv_bytes);
    } else {
      fill_input(spec_, rank_, send, 0, send_elems);
    }
    if (mirrored) device_->write(0, mirror.data(), span);
    b_.run(call);
    if (mirrored) device_->read(0, mirror.data(), span);
    std::uint64_t wrong = 0;
    if (setup_.coll != Coll::Reduce || rank_ == c_.root) {
      const std::byte* result = host(in_place ? b_.in_place_result(call) : call.recv);
      const ElemMismatch m = check_result(spec_, rank_, shape.count, result);
      if (m.wrong > 0) {
        const bool gathered = setup_.coll == Coll::AllGather || setup_.coll == Coll::AllToAll;
        report_error(rank_, std::string(coll_name(setup_.coll)) +
                                (in_place ? " in-place" : " out-of-place") + " of " +
                                std::to_string(shape.size_bytes()) +
                                " bytes: " + describe(m, gathered ? shape.count * n : shape.count));
      }
      wrong = m.wrong;
    }
    return static_cast<std::uint64_t>(b_.sum_over_ranks(static_cast<double>(wrong)));
  }

  CollBackend& b_;
  const CollSetup& setup_;
  const Options& o_;
  const CollOptions& c_;
  int rank_;
  int ranks_;
  std::size_t elem_;
  CheckSpec spec_;
  // The buffers: the backend's (device_, which may be device memory) or host_. base_ points at
  // whichever it is.
  std::unique_ptr<CollArena> device_;
  Buffer host_;
  std::byte* base_ = nullptr;
};

}  // namespace

std::string_view coll_name(Coll coll) {
  for (const CollName& c : kColls) {
    if (c.coll == coll) return c.name;
  }
  return "unknown";
}

std::optional<Coll> parse_coll(std::string_view name) {
  for (const CollName& c : kColls) {
    if (c.name == name) return c.coll;
  }
  if (name == "all_to_all") return Coll::AllToAll;
  return std::nullopt;
}

bool coll_has_op(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool coll_has_root(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Reduce;
}

std::string_view type_name(ElemType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

std::size_t type_size(ElemType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 1;
}

std::optional<ElemType> parse_type(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (t.name == name) return t.type;
  }
  for (const auto& [alias, type] : kTypeAliases) {
    if (alias == name) return type;
  }
  return std::nullopt;
}

std::string_view op_name(RedOp op) {
  for (const auto& [o, name] : kOps) {
    if (o == op) return name;
  }
  return "unknown";
}

std::optional<RedOp> parse_op(std::string_view name) {
  for (const auto& [op, n] : kOps) {
    if (n == name) return op;
  }
  return std::nullopt;
}

CollShape coll_shape(Coll coll, std::uint64_t size, std::size_t elem_size, int ranks) {
  const std::uint64_t n = static_cast<std::uint64_t>(std::max(ranks, 1));
  const std::uint64_t elements = size / elem_size;
  CollShape s;
  switch (coll) {
    case Coll::AllGather:
      s.count = elements / (4 * n) * 4;
      s.send_bytes = s.count * elem_size;
      s.recv_bytes = s.send_bytes * n;
      break;
    case Coll::ReduceScatter:
      s.count = elements / (4 * n) * 4;
      s.recv_bytes = s.count * elem_size;
      s.send_bytes = s.recv_bytes * n;
      break;
    case Coll::AllToAll: {
      const std::uint64_t align = std::max<std::uint64_t>(16 / elem_size, 1);
      s.count = elements / n / align * align;
      s.send_bytes = s.recv_bytes = s.count * elem_size * n;
      break;
    }
    default:
      s.count = elements;
      s.send_bytes = s.recv_bytes = elements * elem_size;
      break;
  }
  return s;
}

double bus_factor(Coll coll, int ranks) {
  const double n = std::max(ranks, 1);
  switch (coll) {
    case Coll::AllReduce: return 2 * (n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce: return 1;
    default: return (n - 1) / n;
  }
}

CollSetup parse_coll_options(int argc, char** argv, Coll coll, Program program, bool print_messages,
                             const CollSupport& support, const Options& defaults) {
  CollSetup setup;
  setup.coll = coll;
  CollOptions& c = setup.coll_options;
  const std::string name(coll_name(coll));
  program.extra.push_back(ExtraFlag{
      "--datatype", "T",
      "element type (default float32): int8, uint8, int32, uint32,\n"
      "int64, uint64, float16, bfloat16, float32, float64, or nccl-tests'\n"
      "names (char, int, uint, half, bf16, float, double)" +
          (support.why.empty() ? std::string() : ";\n" + support.why),
      [&c, &support](std::string_view value) -> std::string {
        auto t = parse_type(value);
        if (!t) return "expected one of " + type_list();
        if (!support.types.empty() &&
            std::find(support.types.begin(), support.types.end(), *t) == support.types.end()) {
          return "type " + std::string(type_name(*t)) + " is not measured here (" + support.why +
                 ")";
        }
        c.type = *t;
        return "";
      },
      'd'});
  program.extra.push_back(ExtraFlag{
      "--op", "OP",
      coll_has_op(coll) ? "reduction (default sum): sum, prod, min, max or avg"
                        : "sum, prod, min, max or avg; " + name + " does not reduce (ignored)",
      [&c, &support](std::string_view value) -> std::string {
        auto op = parse_op(value);
        if (!op) return "expected sum, prod, min, max or avg";
        if (!support.ops.empty() &&
            std::find(support.ops.begin(), support.ops.end(), *op) == support.ops.end()) {
          return "op " + std::string(op_name(*op)) + " is not measured here (" + support.why + ")";
        }
        c.op = *op;
        return "";
      },
      'o'});
  program.extra.push_back(int_flag(
      "--root",
      coll_has_root(coll) ? "root rank (default 0)" : "root rank; " + name + " has none (ignored)",
      &c.root, 0, 1 << 24));
  program.extra.back().short_name = 'r';
  program.extra.push_back(ExtraFlag{
      "--blocking", "0|1",
      "1 (default): each iteration waits for its collective; 0: up to\n" +
          std::to_string(kMaxInFlight) + " collectives in flight, each on its own buffers " +
          "(fewer when\nthey would pass " + format_size(kInFlightBytes) +
          "), waited oldest first; time is still\nthe loop's duration / iterations",
      [&c](std::string_view value) -> std::string {
        if (value != "0" && value != "1") return "expected 0 or 1";
        c.blocking = value == "1";
        return "";
      },
      'z'});
  program.extra.push_back(
      ExtraFlag{"--percentiles", "0|1",
                "1: after each out-of-place timed loop, time every call of a second\n"
                "loop as long and add p50/p90/p99 columns (the slowest rank's\n"
                "per-call time at each percentile); needs -z 1 (default 0)",
                [&c](std::string_view value) -> std::string {
                  if (value != "0" && value != "1") return "expected 0 or 1";
                  c.percentiles = value == "1";
                  return "";
                },
                'p'});
  if (program.check_help.empty()) {
    program.check_help =
        "fill the inputs with small integers and check every result\n"
        "element against a host reference, after the timed loops";
  }
  // The convention's count clause on a line of its own keeps --help within 100 columns.
  std::string convention = size_convention(coll);
  if (auto at = convention.find("; count:"); at != std::string::npos) {
    convention.replace(at, 2, ";\n");
  }
  program.summary += "\n" + convention + ".\nalgbw = size / time; busbw = algbw * " +
                     bus_formula(coll) + " (nccl-tests' bus bandwidth).";
  program.single_transport = true;
  setup.options = parse_options(argc, argv, program, print_messages, defaults);
  if (c.percentiles && !c.blocking) {
    usage_error(program, print_messages,
                "flag -p (--percentiles) 1 needs -z 1: with several collectives in flight a "
                "call's time is not its own");
  }
  const int job = launcher_size();
  if (coll_has_root(coll) && job > 0 && c.root >= job) {
    usage_error(program, print_messages,
                "flag -r (--root): root " + std::to_string(c.root) + " is not a rank of this " +
                    std::to_string(job) + "-rank job");
  }
  return setup;
}

int run_coll_sweep(CollBackend& backend, const CollSetup& setup, RunInfo info,
                   const SummaryLines& summary) {
  const int rank = backend.rank();
  const int ranks = backend.size();
  const Coll coll = setup.coll;
  const CollOptions& c = setup.coll_options;
  if (coll_has_root(coll) && c.root >= ranks) {
    fatal(rank, "-r " + std::to_string(c.root) + ": the root must be below the job's " +
                    std::to_string(ranks) + " ranks");
  }
  Sweep sweep(backend, setup);

  std::optional<Report> report;
  if (rank == 0) {
    info.ranks = ranks;
    info.wrong_unit = "elements";
    info.config.emplace_back("root", coll_has_root(coll) ? c.root : -1);
    info.config.emplace_back("blocking", c.blocking ? 1 : 0);
    info.notes.insert(
        info.notes.begin(),
        {size_convention(coll),
         "time: the timed loop's duration / iterations, the slowest rank's; " +
             std::string(c.blocking ? "-z 1: each collective waited before the next starts"
                                    : "-z 0: several collectives in flight"),
         "algbw = size / time; busbw = algbw * " + bus_formula(coll) + " (n ranks)",
         "in-place: the buffers alias as NCCL defines it; #wrong: result elements unlike the "
         "host reference, all ranks (-c 1)",
         "iterations shrink above " + format_size(kPointByteBudget) +
             " moved per point (at least " + std::to_string(kMinTimedIters) +
             "); the JSON rows hold the counts"});
    std::vector<std::string> types, ops;
    for (int t = 0; t < kElemTypeCount; ++t) {
      types.emplace_back(type_name(static_cast<ElemType>(t)));
    }
    for (int o = 0; o < kRedOpCount; ++o) ops.emplace_back(op_name(static_cast<RedOp>(o)));
    ops.emplace_back("none");
    std::vector<Column> columns = {{"size(B)", "size", 0},
                                   {"count", "count", 0},
                                   {"type", "type", 0, true, 10, types},
                                   {"redop", "redop", 0, true, 7, ops},
                                   {"root", "root", 0, true, 6}};
    for (const auto& [prefix, group] :
         {std::pair<std::string, std::string>{"", "out-of-place"}, {"inplace_", "in-place"}}) {
      columns.push_back({"time(us)", prefix + "time_us", 2, true, 11, {}, group});
      columns.push_back({"algbw(GB/s)", prefix + "algbw_gbps", 2, true, 12, {}, group});
      columns.push_back({.header = "busbw(GB/s)",
                         .key = prefix + "busbw_gbps",
                         .width = 12,
                         .group = group,
                         .bus_bandwidth = true});
      columns.push_back({"#wrong", prefix + "wrong", 0, true, 7, {}, group});
    }
    if (c.percentiles) {
      for (const char* p : {"p50", "p90", "p99"}) {
        columns.push_back(
            {std::string(p) + "(us)", std::string(p) + "_us", 2, true, 10, {}, "per call"});
      }
    }
    columns.push_back({"iters", "iters", 0, false});
    columns.push_back({"inplace_iters", "inplace_iters", 0, false});
    report.emplace(std::move(info), setup.options, std::move(columns));
    report->print_header();
  }

  std::uint64_t wrong = 0;
  const Cell op_cell = coll_has_op(coll) ? static_cast<double>(c.op) : kRedOpCount;
  const Cell root_cell = coll_has_root(coll) ? c.root : -1;
  for (std::uint64_t size : size_list(setup.options)) {
    const CollShape shape = coll_shape(coll, size, type_size(c.type), ranks);
    const Measured out = sweep.measure(shape, false);
    const Measured in = sweep.measure(shape, true);
    wrong += out.wrong + in.wrong;
    if (!report) continue;
    auto wrong_cell = [&](const Measured& m) {
      return setup.options.check ? Cell(static_cast<double>(m.wrong)) : std::nullopt;
    };
    std::vector<Cell> row = {static_cast<double>(shape.size_bytes()),
                             static_cast<double>(shape.count),
                             static_cast<double>(c.type),
                             op_cell,
                             root_cell,
                             out.time_us,
                             out.algbw,
                             out.busbw,
                             wrong_cell(out),
                             in.time_us,
                             in.algbw,
                             in.busbw,
                             wrong_cell(in)};
    if (c.percentiles) row.insert(row.end(), {out.p50_us, out.p90_us, out.p99_us});
    row.insert(row.end(), {static_cast<double>(out.iters), static_cast<double>(in.iters)});
    report->add_row(std::move(row));
  }
  bool ok = wrong == 0;
  if (report) {
    if (summary) {
      for (auto& [key, line] : summary()) report->add_summary(key, line);
    }
    ok = report->finish(wrong) && ok;
  }
  // The JSON file is complete before any rank exits, so a launcher that stops the job when one
  // rank ends cannot cut it short.
  backend.barrier();
  return ok ? 0 : 1;
}

}  // namespace orbite::perf
