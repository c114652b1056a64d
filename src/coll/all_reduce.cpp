// all_reduce and reduce_scatter: the pipelined ring and recursive doubling.
#include <algorithm>
#include <cstring>

#include "coll/algorithms.h"
#include "coll/reduce.h"

namespace orbite::coll {

void split_pieces(std::vector<Piece>& out, int step, std::uint64_t off, std::uint64_t len,
                  std::uint64_t piece) {
  for (std::uint64_t done = 0; done < len; done += piece) {
    out.push_back(Piece{step, off + done, std::min(piece, len - done)});
  }
}

Task local_copy(Ctx& c, Args a) {
  if (a.out != nullptr && a.in != nullptr) c.copy(a.out, a.in, a.local_bytes);
  co_return;
}

Inline local_copy_inline(Args& a, int, int, bool alone) {
  if (!alone) return Inline::NotTaken;
  if (a.out != nullptr && a.in != nullptr && a.out != a.in && a.local_bytes > 0) {
    std::memcpy(a.out, a.in, a.local_bytes);
  }
  return Inline::Done;
}

namespace {

// The ring's reduce-scatter, and for all_reduce its all-gather. At reduce-scatter step s rank r
// sends segment (r - s + shift) to its right and reduces segment (r - s - 1 + shift) arriving
// from its left; after n - 1 steps it holds segment (r + 1 + shift) fully reduced (shift 0 for
// all_reduce, -1 for reduce_scatter so that rank r ends with block r). Each segment moves in
// pieces, and a piece is forwarded as soon as it is reduced, so reductions overlap transfers.
// Every rank reduces a given segment's contributions in the same ring order, so results are
// identical everywhere and from run to run.
Task ring(Ctx& c, Args a, bool scatter_only) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t es = size_of(a.type);
  const int shift = scatter_only ? -1 : 0;
  const int right = wrap(r + 1, n);
  const int left = wrap(r - 1, n);
  std::vector<std::uint64_t> seg(static_cast<std::size_t>(n) + 1);
  for (int k = 0; k <= n; ++k) {
    seg[static_cast<std::size_t>(k)] =
        scatter_only ? a.count * static_cast<std::uint64_t>(k) : balanced_offset(a.count, n, k);
  }
  auto seg_off = [&](int k) { return seg[static_cast<std::size_t>(k)]; };
  auto seg_len = [&](int k) { return seg_off(k + 1) - seg_off(k); };
  const std::uint64_t piece = std::max<std::uint64_t>(1, a.chunk_bytes / es);
  const int owned = wrap(r + 1 + shift, n);

  // Partial sums: all_reduce keeps them in its output; reduce_scatter in scratch.
  std::byte* part = scatter_only ? c.scratch(seg_off(n) * es) : a.out;
  std::vector<Piece> tasks;
  for (int s = 0; s + 1 < n; ++s) {
    const int k = wrap(r - s - 1 + shift, n);
    split_pieces(tasks, s, seg_off(k), seg_len(k), piece);
  }
  {
    std::vector<Piece> first;
    const int k = wrap(r + shift, n);
    split_pieces(first, 0, seg_off(k), seg_len(k), piece);
    for (const Piece& p : first) c.send(a.in + p.off * es, p.len * es, right);
  }
  std::vector<Piece> gather;
  if (!scatter_only) {
    for (int s = 0; s + 1 < n; ++s) {
      const int k = wrap(r - s, n);
      split_pieces(gather, s, seg_off(k), seg_len(k), piece);
    }
  }
  std::vector<Request> gather_recv(gather.size());
  auto post_gather = [&] {
    for (std::size_t i = 0; i < gather.size(); ++i) {
      gather_recv[i] = c.recv(a.out + gather[i].off * es, gather[i].len * es, left);
    }
  };

  const std::size_t depth = static_cast<std::size_t>(std::max(1, a.depth));
  std::byte* slots = c.scratch(depth * piece * es);
  auto slot = [&](std::size_t t) { return slots + (t % depth) * piece * es; };
  std::vector<Request> recvs(tasks.size());
  std::size_t posted = 0;
  for (; posted < tasks.size() && posted < depth; ++posted) {
    recvs[posted] = c.recv(slot(posted), tasks[posted].len * es, left);
  }
  // Messages between two ranks match in posting order: the all-gather's receives go after the
  // last reduce-scatter receive.
  if (posted == tasks.size()) post_gather();
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    co_await c.done(recvs[t]);
    const Piece p = tasks[t];
    const bool last = p.step == n - 2;
    std::byte* dst =
        last && scatter_only ? a.out + (p.off - seg_off(owned)) * es : part + p.off * es;
    reduce(a.type, a.op, dst, slot(t), a.in + p.off * es, p.len);
    if (last && a.op == ReduceOp::Avg) divide(a.type, dst, p.len, n);
    if (!last || !scatter_only) c.send(dst, p.len * es, right);
    if (posted < tasks.size()) {
      recvs[posted] = c.recv(slot(posted), tasks[posted].len * es, left);
      if (++posted == tasks.size()) post_gather();
    }
  }
  for (std::size_t i = 0; i < gather.size(); ++i) {
    co_await c.done(gather_recv[i]);
    if (gather[i].step + 2 < n) c.send(a.out + gather[i].off * es, gather[i].len * es, right);
  }
  co_await c.all();
}

}  // namespace

Task ring_all_reduce(Ctx& c, Args a) {
  return ring(c, std::move(a), false);
}

Task ring_reduce_scatter(Ctx& c, Args a) {
  return ring(c, std::move(a), true);
}

// Pairs at distance 1, 2, 4... exchange whole vectors. With n not a power of two, the first
// 2 * (n - p) ranks fold in pairs first (the even one hands its vector to the odd one and gets
// the result back at the end). Both partners reduce lower-rank data first, so they hold
// bit-identical results.
Task recursive_doubling_all_reduce(Ctx& c, Args a) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t es = size_of(a.type);
  const std::uint64_t bytes = a.count * es;
  copy_bytes(a.out, a.in, bytes);
  std::byte* tmp = c.scratch(bytes);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  int vr = r - rem;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      c.send(a.out, bytes, r + 1);
      co_await c.all();
      vr = -1;
    } else {
      c.recv(tmp, bytes, r - 1);
      co_await c.all();
      reduce(a.type, a.op, a.out, tmp, a.out, a.count);
      vr = r / 2;
    }
  }
  if (vr >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int pvr = vr ^ mask;
      const int peer = pvr < rem ? pvr * 2 + 1 : pvr + rem;
      c.send(a.out, bytes, peer);
      c.recv(tmp, bytes, peer);
      co_await c.all();
      if (pvr < vr) {
        reduce(a.type, a.op, a.out, tmp, a.out, a.count);
      } else {
        reduce(a.type, a.op, a.out, a.out, tmp, a.count);
      }
    }
    if (a.op == ReduceOp::Avg) divide(a.type, a.out, a.count, n);
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      c.send(a.out, bytes, r - 1);
    } else {
      c.recv(a.out, bytes, r + 1);
    }
  }
  co_await c.all();
}

}  // namespace orbite::coll
