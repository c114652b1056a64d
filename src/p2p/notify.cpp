// Notifications (TransferOptions::notification, TransferEngine::notify()): the requester sends
// a Notify once the request's bytes moved, so the owner holds it only after they are in place;
// the owner keeps it for its application and answers with an Ack, on which the request
// completes. A message of its own frame type rather than a flag on the last Put: a transfer's
// parts may travel on several transports (RDMA writes, Data frames on TCP streams, staging)
// with no order among them, and the requester learns that all of them ended only from their
// completions.
#include "common/strings.h"
#include "p2p/protocol.h"

namespace orbite::p2p {

static_assert(kMaxNotificationBytes <= kMaxControlPayload, "a notification is a control frame");

using detail::Inflight;
using detail::PeerLink;

void Protocol::finish_put_get(const ReqPtr& req, const Status& outcome) {
  if (!outcome.ok() || !req->options.notification) {
    return detail::complete_request(*req, outcome);
  }
  // start() gave every put and get its link; a request without one could not have moved bytes.
  send_notification(*req->lane_link, req);
}

void Protocol::send_notification(Link& link, const ReqPtr& req) {
  const bool moved = !req->ranges.empty();
  const char* after = moved ? " (its bytes moved)" : "";
  if (link.state != PeerLink::State::Established) {
    return detail::complete_request(
        *req, Status::error(Errc::ConnectionLost,
                            "peer " + short_id(link.ep.id) +
                                ": the link failed before the notification left" + after));
  }
  // The request's endpoint may have gone with a failure since; the route is looked up again
  // (the same, while the link stands).
  auto routed = route(link, *req);
  if (!routed.ok()) {
    return detail::complete_request(
        *req, routed.status().with_context(std::string("notification") + after));
  }
  const std::uint64_t wire_id = next_wire_id_++;
  Inflight f{req};
  f.part = true;
  f.part_put = true;
  f.notify = true;
  detail::RequestState* raw = req.get();
  f.part_done = [raw, moved](const Status& st) {
    detail::complete_request(
        *raw, st.ok() ? st
                      : st.with_context(moved ? "notification (the request's bytes moved)"
                                              : "notification"));
  };
  link.inflight[wire_id] = std::move(f);
  send_control(**routed, FrameType::Notify, wire_id, 0, 0, 0, 0, *req->options.notification);
}

void Protocol::on_notify(Link& link, const FrameHeader& h, PeerEndpoint& ep, std::string&& body) {
  const Status kept = notifications_.push(Notification{link.ep.id, std::move(body)});
  send_control(ep, FrameType::Ack, h.id, static_cast<std::uint64_t>(kept.code()), 0, 0, 0,
               kept.ok() ? std::string() : kept.message());
}

}  // namespace orbite::p2p
