#include "dashboard/server/stream.h"

#include <algorithm>

#include "dashboard/server/job_json.h"
#include "dashboard/server/ws_session.h"

namespace mddp::dashboard {

using coordinator::Clock;

Stream::Stream(boost::asio::io_context& ioc, const coordinator::Job& job, Tracker& tracker)
    : timer_(ioc), job_(job), tracker_(tracker) {}

void Stream::start() {
  poll();
}

void Stream::stop() {
  stopped_ = true;
  timer_.cancel();
}

std::vector<std::shared_ptr<const std::string>> Stream::frames(
    const std::vector<std::string>& records) {
  std::vector<std::shared_ptr<const std::string>> out;
  for (std::size_t i = 0; i < records.size(); i += kRecordsPerFrame) {
    const auto end = records.begin() +
                     static_cast<std::ptrdiff_t>(std::min(records.size(), i + kRecordsPerFrame));
    out.push_back(std::make_shared<const std::string>(
        metrics_frame({records.begin() + static_cast<std::ptrdiff_t>(i), end})));
  }
  return out;
}

void Stream::drain() {
  if (stopped_) return;
  const auto now = Clock::now();
  // Drain what arrived, a frame at a time.
  for (;;) {
    const auto batch = job_.metrics_log().since(last_seq_, kRecordsPerFrame);
    if (batch.empty()) break;
    tracker_.observe(batch, now);
    last_seq_ = batch.back().seq;
    std::vector<std::string> records;
    for (const auto& r : batch) records.push_back(dump_json(stream_record_json(r)));
    for (const auto& f : frames(records)) broadcast(f);
  }
  tracker_.observe({}, now);
  const control::State state = job_.status().state;
  if (state != last_state_ || now >= next_job_frame_) {
    broadcast(std::make_shared<const std::string>(job_frame(tracker_.snapshot(now))));
    last_state_ = state;
    next_job_frame_ = now + kJobPeriod;
  }
}

void Stream::poll() {
  if (stopped_) return;
  drain();
  timer_.expires_after(kPollPeriod);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) poll();
  });
}

void Stream::broadcast(const std::shared_ptr<const std::string>& frame) {
  std::erase_if(clients_, [](const std::weak_ptr<WsSession>& c) { return c.expired(); });
  for (const auto& weak : clients_)
    if (auto c = weak.lock()) c->send(frame);
}

void Stream::join(const std::shared_ptr<WsSession>& client) {
  client->send(std::make_shared<const std::string>(job_frame(tracker_.snapshot(Clock::now()))));
  // The records up to last_seq_ (later ones come with the next broadcast),
  // newest first until the byte budget is spent.
  const uint64_t span = static_cast<uint64_t>(kCatchUpSteps * job_.options().world_size);
  const uint64_t from = last_seq_ > span ? last_seq_ - span : 0;
  auto tail = job_.metrics_log().since(from, static_cast<std::size_t>(last_seq_ - from));
  std::vector<std::string> records;
  std::size_t bytes = 0;
  for (auto it = tail.rbegin(); it != tail.rend() && bytes < kCatchUpBytes; ++it) {
    if (it->seq > last_seq_) continue;
    records.push_back(dump_json(stream_record_json(*it)));
    bytes += records.back().size();
  }
  std::reverse(records.begin(), records.end());
  for (const auto& f : frames(records)) client->send(f);
  clients_.push_back(client);
}

}  // namespace mddp::dashboard
