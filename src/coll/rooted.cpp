// Rooted collectives: broadcast and reduce (binomial tree, pipelined chain), gather and scatter
// (linear: the root posts every message at once). Ranks are renumbered relative to the root
// (vr = rank - root mod n) so that every tree and chain starts at vr 0.
#include <algorithm>
#include <cstring>

#include "coll/algorithms.h"
#include "coll/reduce.h"

namespace orbite::coll {

namespace {

int real_rank(int vr, int root, int n) {
  return wrap(vr + root, n);
}

}  // namespace

Task binomial_broadcast(Ctx& c, Args a) {
  const int n = c.size();
  const int vr = wrap(c.rank() - a.root, n);
  const std::uint64_t bytes = a.count * size_of(a.type);
  const std::byte* data = vr == 0 ? a.in : a.out;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (vr & mask) {
      c.recv(a.out, bytes, real_rank(vr - mask, a.root, n));
      co_await c.all();
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) c.send(data, bytes, real_rank(vr + mask, a.root, n));
  }
  if (vr == 0 && a.out != nullptr) c.copy(a.out, a.in, bytes);
  co_await c.all();
}

// Root -> vr 1 -> vr 2 ... in pieces: each rank forwards a piece as soon as it has it.
Task chain_broadcast(Ctx& c, Args a) {
  const int n = c.size();
  const int vr = wrap(c.rank() - a.root, n);
  const std::size_t es = size_of(a.type);
  std::vector<Piece> pieces;
  split_pieces(pieces, 0, 0, a.count, std::max<std::uint64_t>(1, a.chunk_bytes / es));
  const int next = real_rank(vr + 1, a.root, n);
  if (vr == 0) {
    for (const Piece& p : pieces) c.send(a.in + p.off * es, p.len * es, next);
    if (a.out != nullptr) c.copy(a.out, a.in, a.count * es);
  } else {
    const int prev = real_rank(vr - 1, a.root, n);
    std::vector<Request> recvs;
    for (const Piece& p : pieces) recvs.push_back(c.recv(a.out + p.off * es, p.len * es, prev));
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      co_await c.done(recvs[i]);
      if (vr + 1 < n) c.send(a.out + pieces[i].off * es, pieces[i].len * es, next);
    }
  }
  co_await c.all();
}

// Each rank folds in its children's partial results (its own data first, then the child with
// the lower relative rank), then hands the result to its parent.
Task binomial_reduce(Ctx& c, Args a) {
  const int n = c.size();
  const int vr = wrap(c.rank() - a.root, n);
  const std::size_t es = size_of(a.type);
  const std::uint64_t bytes = a.count * es;
  std::byte* acc = vr == 0 ? a.out : c.scratch(bytes);
  copy_bytes(acc, a.in, bytes);
  std::byte* tmp = c.scratch(bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      c.send(acc, bytes, real_rank(vr - mask, a.root, n));
      break;
    }
    if (vr + mask < n) {
      c.recv(tmp, bytes, real_rank(vr + mask, a.root, n));
      co_await c.all();
      reduce(a.type, a.op, acc, acc, tmp, a.count);
    }
  }
  if (vr == 0 && a.op == ReduceOp::Avg) divide(a.type, acc, a.count, n);
  co_await c.all();
}

// vr n-1 -> n-2 -> ... -> root, in pieces: each rank reduces a piece into its own data and
// passes it on while the next piece is arriving.
Task chain_reduce(Ctx& c, Args a) {
  const int n = c.size();
  const int vr = wrap(c.rank() - a.root, n);
  const std::size_t es = size_of(a.type);
  const std::uint64_t piece = std::max<std::uint64_t>(1, a.chunk_bytes / es);
  std::vector<Piece> pieces;
  split_pieces(pieces, 0, 0, a.count, piece);
  if (vr == n - 1) {
    for (const Piece& p : pieces) {
      c.send(a.in + p.off * es, p.len * es, real_rank(vr - 1, a.root, n));
    }
    co_await c.all();
    co_return;
  }
  std::byte* acc = vr == 0 ? a.out : c.scratch(a.count * es);
  const std::size_t depth = static_cast<std::size_t>(std::max(1, a.depth));
  std::byte* slots = c.scratch(depth * piece * es);
  auto slot = [&](std::size_t t) { return slots + (t % depth) * piece * es; };
  const int from = real_rank(vr + 1, a.root, n);
  std::vector<Request> recvs(pieces.size());
  std::size_t posted = 0;
  for (; posted < pieces.size() && posted < depth; ++posted) {
    recvs[posted] = c.recv(slot(posted), pieces[posted].len * es, from);
  }
  for (std::size_t t = 0; t < pieces.size(); ++t) {
    co_await c.done(recvs[t]);
    const Piece p = pieces[t];
    std::byte* dst = acc + p.off * es;
    reduce(a.type, a.op, dst, a.in + p.off * es, slot(t), p.len);
    if (vr == 0) {
      if (a.op == ReduceOp::Avg) divide(a.type, dst, p.len, n);
    } else {
      c.send(dst, p.len * es, real_rank(vr - 1, a.root, n));
    }
    if (posted < pieces.size()) {
      recvs[posted] = c.recv(slot(posted), pieces[posted].len * es, from);
      ++posted;
    }
  }
  co_await c.all();
}

Task linear_gather(Ctx& c, Args a) {
  const std::uint64_t block = a.count * size_of(a.type);
  if (c.rank() != a.root) {
    c.send(a.in, block, a.root);
  } else {
    for (int p = 0; p < c.size(); ++p) {
      if (p != a.root) c.recv(a.out + static_cast<std::uint64_t>(p) * block, block, p);
    }
    c.copy(a.out + static_cast<std::uint64_t>(a.root) * block, a.in, block);
  }
  co_await c.all();
}

Task linear_scatter(Ctx& c, Args a) {
  const std::uint64_t block = a.count * size_of(a.type);
  if (c.rank() != a.root) {
    c.recv(a.out, block, a.root);
  } else {
    for (int p = 0; p < c.size(); ++p) {
      if (p != a.root) c.send(a.in + static_cast<std::uint64_t>(p) * block, block, p);
    }
    c.copy(a.out, a.in + static_cast<std::uint64_t>(a.root) * block, block);
  }
  co_await c.all();
}

}  // namespace orbite::coll
