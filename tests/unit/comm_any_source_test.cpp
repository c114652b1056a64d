// Receives from any source and with any tag, and probes, between three communicators in this
// process (threads, an in-process store, an engine each): MPI's matching order, the source and
// tag reported, eager and rendezvous sizes, messages that arrived before the receive, and the
// same with two lanes per engine (a receive from any source is then posted on both).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/store.h>
#include <orbite/transfer.h>

#include "../support/local_comms.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

std::vector<std::uint8_t> filled(std::uint64_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(seed + i * 7);
  return out;
}

// Param: lanes per engine.
class CommAnySource : public ::testing::TestWithParam<int> {
 protected:
  static constexpr int kRanks = 3;

  void SetUp() override {
    EngineConfig config;
    config.tcp.interface = "lo";
    config.bootstrap.timeout = 30s;
    config.num_lanes = static_cast<std::uint32_t>(GetParam());
    comms_ = testing::local_communicators(kRanks, config);
    ASSERT_EQ(comms_.size(), static_cast<size_t>(kRanks));
  }

  Request send(int from, const std::vector<std::uint8_t>& data, int to, int tag,
               Transport transport = Transport::Unspec) {
    TransferOptions opts;
    opts.transport = transport;
    auto r = comms_[static_cast<size_t>(from)].isend(data.data(), data.size(), to, tag, opts);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : Request();
  }
  Request recv(int at, std::vector<std::uint8_t>& into, int from, int tag) {
    auto r = comms_[static_cast<size_t>(at)].irecv(into.data(), into.size(), from, tag);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : Request();
  }
  // Waits until rank `at` sees a message from `from` with `tag` waiting (probe), so that a test
  // can order arrivals before its receives.
  MessageInfo arrived(int at, int from, int tag) {
    auto info = comms_[static_cast<size_t>(at)].probe(from, tag, 20s);
    EXPECT_TRUE(info.ok()) << info.status().to_string();
    return info.ok() ? *info : MessageInfo{};
  }

  std::vector<Communicator> comms_;
};

// Every other rank sends one message to rank 0, of a size apart per sender (eager, and large
// enough to go by rendezvous), before or after rank 0 posts receives from any source with any
// tag. Each receive reports who sent it, with which tag and size, and holds that sender's bytes.
TEST_P(CommAnySource, ReceivesFromEverySenderAndReportsSourceTagAndSize) {
  for (bool receives_first : {true, false}) {
    for (Transport transport : {Transport::Unspec, Transport::Tcp}) {
      const std::uint64_t sizes[kRanks] = {0, 100, 300 * 1024 + 5};
      std::vector<std::vector<std::uint8_t>> in(kRanks, std::vector<std::uint8_t>(400 * 1024));
      std::vector<std::vector<std::uint8_t>> out;
      for (int r = 0; r < kRanks; ++r) {
        out.push_back(filled(sizes[r], static_cast<std::uint8_t>(r * 40)));
      }
      std::vector<Request> recvs, sends;
      if (receives_first) {
        for (int i = 1; i < kRanks; ++i) recvs.push_back(recv(0, in[i], kAnySource, kAnyTag));
      }
      for (int r = 1; r < kRanks; ++r) sends.push_back(send(r, out[r], 0, 20 + r, transport));
      if (!receives_first) {
        for (int r = 1; r < kRanks; ++r) arrived(0, r, 20 + r);
        for (int i = 1; i < kRanks; ++i) recvs.push_back(recv(0, in[i], kAnySource, kAnyTag));
      }
      ASSERT_TRUE(wait_all(recvs, 30s).ok());
      ASSERT_TRUE(wait_all(sends, 30s).ok());
      std::set<int> sources;
      for (int i = 1; i < kRanks; ++i) {
        const Request& r = recvs[static_cast<size_t>(i - 1)];
        const int src = r.source();
        ASSERT_GE(src, 1);
        ASSERT_LT(src, kRanks);
        sources.insert(src);
        EXPECT_EQ(r.tag(), 20 + src);
        ASSERT_EQ(r.bytes(), sizes[src]);
        EXPECT_EQ(0, std::memcmp(in[i].data(), out[src].data(), sizes[src]))
            << "receive " << i << " holds rank " << src << "'s bytes";
      }
      EXPECT_EQ(sources.size(), static_cast<size_t>(kRanks - 1)) << "one receive per sender";
    }
  }
}

// MPI's order: a message goes to the earliest posted receive it matches, wildcard or not, and
// one sender's messages are matched in the order they were sent.
TEST_P(CommAnySource, MessagesGoToTheEarliestPostedMatchingReceive) {
  std::vector<std::vector<std::uint8_t>> in(4, std::vector<std::uint8_t>(64, 0));
  std::vector<Request> recvs;
  recvs.push_back(recv(0, in[0], kAnySource, 5));  // posted first: gets rank 1's first tag-5
  recvs.push_back(recv(0, in[1], 1, 5));           // then rank 1's second
  recvs.push_back(recv(0, in[2], kAnySource, kAnyTag));
  recvs.push_back(recv(0, in[3], 1, kAnyTag));
  std::vector<Request> sends;
  const auto m1 = filled(8, 1), m2 = filled(9, 2), m3 = filled(10, 3), m4 = filled(11, 4);
  sends.push_back(send(1, m1, 0, 5));
  sends.push_back(send(1, m2, 0, 5));
  sends.push_back(send(1, m3, 0, 9));
  sends.push_back(send(1, m4, 0, 5));
  ASSERT_TRUE(wait_all(recvs, 30s).ok());
  ASSERT_TRUE(wait_all(sends, 30s).ok());
  const std::vector<std::uint8_t>* want[] = {&m1, &m2, &m3, &m4};
  const int tags[] = {5, 5, 9, 5};
  for (int i = 0; i < 4; ++i) {
    const Request& r = recvs[static_cast<size_t>(i)];
    EXPECT_EQ(r.source(), 1) << "receive " << i;
    EXPECT_EQ(r.tag(), tags[i]) << "receive " << i;
    ASSERT_EQ(r.bytes(), want[i]->size()) << "receive " << i;
    EXPECT_EQ(0, std::memcmp(in[static_cast<size_t>(i)].data(), want[i]->data(), r.bytes()))
        << "receive " << i << " got another message";
  }
}

// One sender, many messages, only receives from any source: they complete in send order.
TEST_P(CommAnySource, OneSendersMessagesAreNotOvertaken) {
  constexpr int kCount = 64;
  std::vector<std::vector<std::uint8_t>> in(kCount, std::vector<std::uint8_t>(70000));
  std::vector<std::vector<std::uint8_t>> out;
  std::vector<Request> sends, recvs;
  for (int i = 0; i < kCount; ++i) {
    // Eager and rendezvous mixed: a small message must not pass a large one sent before it.
    out.push_back(filled(i % 3 == 0 ? 65000 : 16, static_cast<std::uint8_t>(i)));
  }
  for (int i = 0; i < kCount / 2; ++i) recvs.push_back(recv(2, in[i], kAnySource, 3));
  for (int i = 0; i < kCount; ++i) sends.push_back(send(0, out[i], 2, 3));
  for (int i = kCount / 2; i < kCount; ++i) recvs.push_back(recv(2, in[i], kAnySource, 3));
  ASSERT_TRUE(wait_all(recvs, 30s).ok());
  ASSERT_TRUE(wait_all(sends, 30s).ok());
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(recvs[static_cast<size_t>(i)].source(), 0);
    ASSERT_EQ(recvs[static_cast<size_t>(i)].bytes(), out[i].size()) << "message " << i;
    ASSERT_EQ(0, std::memcmp(in[i].data(), out[i].data(), out[i].size())) << "message " << i;
  }
}

// probe/iprobe find a waiting message without taking it; a receive with what they report gets it.
TEST_P(CommAnySource, ProbeReportsTheMessageTheNextReceiveGets) {
  Communicator& c = comms_[1];
  auto none = c.iprobe(kAnySource, kAnyTag);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->has_value());
  const auto big = filled(200 * 1024, 9), small = filled(12, 3);
  std::vector<Request> sends = {send(2, big, 1, 44), send(0, small, 1, 45)};
  const MessageInfo first = arrived(1, 2, kAnyTag);
  EXPECT_EQ(first.source, 2);
  EXPECT_EQ(first.tag, 44);
  EXPECT_EQ(first.bytes, big.size());
  const MessageInfo other = arrived(1, kAnySource, 45);
  EXPECT_EQ(other.source, 0);
  EXPECT_EQ(other.bytes, small.size());
  // Probing again finds the same message: nothing was consumed.
  auto again = c.iprobe(2, 44);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->bytes, big.size());
  std::vector<std::uint8_t> in(first.bytes), in2(other.bytes);
  Request r = recv(1, in, first.source, first.tag);
  Request r2 = recv(1, in2, other.source, other.tag);
  ASSERT_TRUE(r.wait(30s).ok());
  ASSERT_TRUE(r2.wait(30s).ok());
  EXPECT_EQ(in, big);
  EXPECT_EQ(in2, small);
  ASSERT_TRUE(wait_all(sends, 30s).ok());
  auto gone = c.iprobe(kAnySource, kAnyTag);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value()) << "both messages were received";
  auto late = c.probe(kAnySource, 77, 20ms);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Errc::Timeout);
  EXPECT_NE(late.status().message().find("tag 77"), std::string::npos) << late.status().message();
}

// A message longer than a receive from any source fails it with the truncation, still naming
// the sender and tag. Wildcards where a rank must be named are refused.
TEST_P(CommAnySource, TruncationAndBadWildcardsAreErrors) {
  const auto big = filled(300, 1);
  std::vector<std::uint8_t> in(100, 0xee);
  Request s = send(2, big, 0, 8);
  Request r = recv(0, in, kAnySource, kAnyTag);
  const Status st = r.wait(30s);
  EXPECT_EQ(st.code(), Errc::InvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  EXPECT_EQ(r.source(), 2);
  EXPECT_EQ(r.tag(), 8);
  // The sender learns of it when its message went by rendezvous; an eager one completed first.
  const Status sent = s.wait(30s);
  EXPECT_TRUE(sent.ok() || sent.code() == Errc::InvalidArgument) << sent.to_string();
  EXPECT_EQ(in, std::vector<std::uint8_t>(100, 0xee)) << "nothing was overrun";

  std::uint8_t byte = 0;
  auto to_any = comms_[0].isend(&byte, 1, kAnySource, 1);
  ASSERT_FALSE(to_any.ok());
  EXPECT_EQ(to_any.status().code(), Errc::InvalidArgument);
  EXPECT_NE(to_any.status().message().find("peer -1"), std::string::npos);
  auto any_tag_send = comms_[0].isend(&byte, 1, 1, kAnyTag);
  ASSERT_FALSE(any_tag_send.ok());
  EXPECT_NE(any_tag_send.status().message().find("tag -1"), std::string::npos);
  auto bad_tag = comms_[0].irecv(&byte, 1, kAnySource, -2);
  ASSERT_FALSE(bad_tag.ok());
  EXPECT_NE(bad_tag.status().message().find("tag -2"), std::string::npos)
      << bad_tag.status().message();
  auto bad_peer = comms_[0].iprobe(kRanks, 0);
  ASSERT_FALSE(bad_peer.ok());
  EXPECT_NE(bad_peer.status().message().find("peer 3"), std::string::npos);
}

// A receive from any source nobody sends to ends with the engine's close, as Cancelled.
TEST_P(CommAnySource, AnUnmatchedReceiveEndsWithTheEngine) {
  std::vector<std::uint8_t> in(8);
  Request r = recv(0, in, kAnySource, 123);
  EXPECT_EQ(r.wait(20ms).code(), Errc::Timeout);
  EXPECT_EQ(r.source(), -1);
  // The unmatched receive keeps the engine busy until close's timeout, which cancels it.
  (void)comms_[0].engine().close(100ms, CloseTimeout::Cancel);
  const Status st = r.wait(5s);
  EXPECT_EQ(st.code(), Errc::Cancelled) << st.to_string();
  EXPECT_EQ(r.source(), -1);
}

INSTANTIATE_TEST_SUITE_P(Lanes, CommAnySource, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::to_string(param.param) + "Lanes";
                         });

}  // namespace
}  // namespace orbite
