#include "core/comm/algorithms/context.h"

#include "core/common/timer.h"

namespace mddp::comm {

void* Scratch::get(Slot slot, std::size_t bytes) {
  if (capacity_[slot] < bytes) {
    buffers_[slot] = std::make_unique_for_overwrite<std::byte[]>(bytes);  // no zero fill
    capacity_[slot] = bytes;
  }
  return buffers_[slot].get();
}

void AlgoContext::exchange(int send_peer, const void* send_data, std::size_t send_bytes,
                           int recv_peer, void* recv_data, std::size_t recv_bytes) const {
  if (send_bytes > 0 && recv_bytes > 0) {
    transport.send_recv(send_peer, send_data, send_bytes, recv_peer, recv_data, recv_bytes,
                        deadline);
  } else if (send_bytes > 0) {
    transport.send(send_peer, send_data, send_bytes, deadline);
  } else if (recv_bytes > 0) {
    transport.recv(recv_peer, recv_data, recv_bytes, deadline);
  }
}

int64_t AlgoContext::step_clock() const {
  return trace != nullptr ? now_ns() : 0;
}

void AlgoContext::traced(AlgoStep step, int64_t t0, const void* data) const {
  if (trace == nullptr) return;
  step.start_ns = t0;
  step.end_ns = now_ns();
  trace->record(step, data);
}

void AlgoContext::send(int peer, const void* data, std::size_t bytes) const {
  if (bytes > 0) transport.send(peer, data, bytes, deadline);
}

void AlgoContext::recv(int peer, void* data, std::size_t bytes) const {
  if (bytes > 0) transport.recv(peer, data, bytes, deadline);
}

}  // namespace mddp::comm
