// History: the last collectives of one Communicator (op, sequence number,
// bytes, start and end), kept so an error can say what this rank was doing
// and what it finished last. Private to the comm layer. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace mddp::comm::detail {

class History {
 public:
  static constexpr std::size_t kCapacity = 32;

  void issued(uint64_t seq, std::string op, std::size_t bytes);
  void started(uint64_t seq, int64_t ns);
  void finished(uint64_t seq, int64_t ns);
  std::vector<CollectiveRecord> snapshot() const;  // oldest first

  // The last `max_lines` records as indented lines, times relative to now_ns:
  //     #41 all_reduce(ring)  400.0 KiB  started 12.1 ms ago, took 0.8 ms
  //     #42 all_reduce(ring)  400.0 KiB  started 5001.7 ms ago, never finished
  static std::string format(const std::vector<CollectiveRecord>& records, int64_t now_ns,
                            std::size_t max_lines);

 private:
  CollectiveRecord* find(uint64_t seq);
  mutable std::mutex mu_;
  std::deque<CollectiveRecord> records_;
};

}  // namespace mddp::comm::detail
