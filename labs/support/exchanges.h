// RecordingTransport: a Transport that passes every call on to another and
// logs it — which peer, how many bytes, the first element sent and received
// (decoded by the checkers: values.h) and whether it completed. A Lab
// checker runs a student's algorithm over it, and when the result is wrong
// reads the log to say which step of the algorithm went astray.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/comm/transport.h"

namespace mddp::labs {

// One side of a transport call: a send or a receive.
struct Message {
  int peer = -1;
  int64_t bytes = 0;
  double first = 0;   // the first fp32 element (NaN when none, or a receive never completed)
  bool done = false;  // the call returned normally
};

// The sends and the receives of one rank, each in the order they were made
// (a send_recv contributes one of each; send() and recv() one).
struct MessageLog {
  std::vector<Message> sends, recvs;
  nlohmann::json to_json() const;
  static MessageLog from_json(const nlohmann::json& j);
};

class RecordingTransport : public comm::Transport {
 public:
  explicit RecordingTransport(comm::Transport& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  void send_recv(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                 void* recv_data, std::size_t recv_bytes, comm::Deadline deadline) override;
  void abort(const std::string& reason) override { inner_.abort(reason); }

  const MessageLog& log() const { return log_; }
  void clear() { log_ = {}; }

 private:
  comm::Transport& inner_;
  MessageLog log_;
};

}  // namespace mddp::labs
