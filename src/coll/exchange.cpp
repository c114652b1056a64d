// Exchanges: all_gather (ring, Bruck), all_to_all(v) (pairwise) and the dissemination barrier.
#include <algorithm>
#include <cstring>

#include "coll/algorithms.h"

namespace orbite::coll {

// Block r - s - 1 arrives at step s from the left and, but for the last step, goes on to the
// right as soon as each of its pieces is in.
Task ring_all_gather(Ctx& c, Args a) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t es = size_of(a.type);
  const std::uint64_t block = a.count * es;
  const int right = wrap(r + 1, n);
  const int left = wrap(r - 1, n);
  std::byte* own = a.out + static_cast<std::uint64_t>(r) * block;
  const std::uint64_t piece = std::max<std::uint64_t>(1, a.chunk_bytes / es);
  std::vector<Piece> pieces;
  for (int s = 0; s + 1 < n; ++s) {
    split_pieces(pieces, s, static_cast<std::uint64_t>(wrap(r - s - 1, n)) * a.count, a.count,
                 piece);
  }
  std::vector<Request> recvs;
  for (const Piece& p : pieces) recvs.push_back(c.recv(a.out + p.off * es, p.len * es, left));
  {
    // Own block straight from the input, so that the local copy below overlaps the transfers.
    std::vector<Piece> first;
    split_pieces(first, 0, 0, a.count, piece);
    for (const Piece& p : first) c.send(a.in + p.off * es, p.len * es, right);
  }
  c.copy(own, a.in, block);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    co_await c.done(recvs[i]);
    if (pieces[i].step + 2 < n) c.send(a.out + pieces[i].off * es, pieces[i].len * es, right);
  }
  co_await c.all();
}

// After the round with distance k, scratch holds the blocks of ranks r .. r + 2k - 1; each round
// sends the first min(k, n - k) of them to rank r - k. log2(n) rounds, then a rotation.
Task bruck_all_gather(Ctx& c, Args a) {
  const int n = c.size();
  const int r = c.rank();
  const std::uint64_t block = a.count * size_of(a.type);
  std::byte* tmp = c.scratch(block * static_cast<std::uint64_t>(n));
  copy_bytes(tmp, a.in, block);
  for (int k = 1; k < n; k <<= 1) {
    const std::uint64_t m = static_cast<std::uint64_t>(std::min(k, n - k));
    c.send(tmp, m * block, wrap(r - k, n));
    c.recv(tmp + static_cast<std::uint64_t>(k) * block, m * block, wrap(r + k, n));
    co_await c.all();
  }
  for (int i = 0; i < n; ++i) {
    copy_bytes(a.out + static_cast<std::uint64_t>(wrap(r + i, n)) * block,
               tmp + static_cast<std::uint64_t>(i) * block, block);
  }
}

// At step s, rank r sends to r + s and receives from r - s, a few steps in flight at a time so
// that no rank is flooded by everyone at once.
Task pairwise_all_to_all(Ctx& c, Args a) {
  constexpr int kStepsInFlight = 4;
  const int n = c.size();
  const int r = c.rank();
  const std::size_t es = size_of(a.type);
  const bool v = !a.send_counts.empty();
  auto send_off = [&](int p) {
    return (v ? a.send_displs[static_cast<std::size_t>(p)] : a.count * static_cast<unsigned>(p)) *
           es;
  };
  auto send_len = [&](int p) {
    return (v ? a.send_counts[static_cast<std::size_t>(p)] : a.count) * es;
  };
  auto recv_off = [&](int p) {
    return (v ? a.recv_displs[static_cast<std::size_t>(p)] : a.count * static_cast<unsigned>(p)) *
           es;
  };
  auto recv_len = [&](int p) {
    return (v ? a.recv_counts[static_cast<std::size_t>(p)] : a.count) * es;
  };
  // In place, arrivals land in scratch (the blocks still to leave are in the same buffer) and
  // are copied into place at the end.
  const bool in_place = a.in == a.out && !v;
  std::byte* landing = in_place ? c.scratch(a.count * es * static_cast<std::uint64_t>(n)) : a.out;
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const int from = wrap(r - s, n);
    c.recv(landing + recv_off(from), recv_len(from), from);
    c.send(a.in + send_off(to), send_len(to), to);
    // The own block is copied while the first steps' messages move.
    if (s == std::min(kStepsInFlight, n - 1) && !in_place) {
      c.copy(a.out + recv_off(r), a.in + send_off(r), std::min(send_len(r), recv_len(r)));
    }
    if (s % kStepsInFlight == 0) co_await c.all();
  }
  if (n == 1 && !in_place) {
    c.copy(a.out + recv_off(r), a.in + send_off(r), std::min(send_len(r), recv_len(r)));
  }
  co_await c.all();
  if (in_place) {
    for (int p = 0; p < n; ++p) {
      if (p != r) c.copy(a.out + recv_off(p), landing + recv_off(p), recv_len(p));
    }
  }
}

// Round k: tell rank r + k, hear from rank r - k. After ceil(log2 n) rounds every rank has
// (transitively) heard from every other.
Task dissemination_barrier(Ctx& c) {
  const int n = c.size();
  const int r = c.rank();
  for (int k = 1; k < n; k <<= 1) {
    c.send(nullptr, 0, wrap(r + k, n));
    c.recv(nullptr, 0, wrap(r - k, n));
    co_await c.all();
  }
}

}  // namespace orbite::coll
