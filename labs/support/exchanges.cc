#include "labs/support/exchanges.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mddp::labs {
namespace {

double first_float(const void* data, std::size_t bytes) {
  if (data == nullptr || bytes < sizeof(float)) return std::numeric_limits<double>::quiet_NaN();
  float v;
  std::memcpy(&v, data, sizeof v);
  return v;
}

nlohmann::json side_json(const std::vector<Message>& side) {
  nlohmann::json out = nlohmann::json::array();
  // NaN is not JSON: null stands for "no value".
  for (const Message& m : side)
    out.push_back({m.peer, m.bytes,
                   std::isnan(m.first) ? nlohmann::json() : nlohmann::json(m.first), m.done});
  return out;
}

std::vector<Message> side_from(const nlohmann::json& j) {
  std::vector<Message> out;
  for (const auto& m : j)
    out.push_back({m[0].get<int>(), m[1].get<int64_t>(),
                   m[2].is_null() ? std::numeric_limits<double>::quiet_NaN() : m[2].get<double>(),
                   m[3].get<bool>()});
  return out;
}

}  // namespace

nlohmann::json MessageLog::to_json() const {
  return {{"sends", side_json(sends)}, {"recvs", side_json(recvs)}};
}

MessageLog MessageLog::from_json(const nlohmann::json& j) {
  MessageLog log;
  if (!j.is_object()) return log;
  log.sends = side_from(j.at("sends"));
  log.recvs = side_from(j.at("recvs"));
  return log;
}

void RecordingTransport::send_recv(int send_peer, const void* send_data, std::size_t send_bytes,
                                   int recv_peer, void* recv_data, std::size_t recv_bytes,
                                   comm::Deadline deadline) {
  const bool sends = send_peer != kNoPeer, recvs = recv_peer != kNoPeer;
  const auto nan = std::numeric_limits<double>::quiet_NaN();
  if (sends)
    log_.sends.push_back(
        {send_peer, static_cast<int64_t>(send_bytes), first_float(send_data, send_bytes), false});
  if (recvs) log_.recvs.push_back({recv_peer, static_cast<int64_t>(recv_bytes), nan, false});
  const std::size_t s = log_.sends.size(), r = log_.recvs.size();
  inner_.send_recv(send_peer, send_data, send_bytes, recv_peer, recv_data, recv_bytes, deadline);
  if (sends) log_.sends[s - 1].done = true;
  if (recvs)
    log_.recvs[r - 1] = {recv_peer, static_cast<int64_t>(recv_bytes),
                         first_float(recv_data, recv_bytes), true};
}

}  // namespace mddp::labs
