// How a failed collective is reported: the wording of every CommError a Work
// rethrows. Private to the comm layer.
#pragma once

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace mddp::comm::detail {

// A new exception of the same CommError subtype as `cause` (AbortedError,
// TimeoutError, PeerError; CommError for anything else) carrying `message`.
std::exception_ptr same_type(std::exception_ptr cause, const std::string& message);

// The error of collective `label` ("rank 1: all_reduce(ring) #42") that
// failed with `cause`, of the same type:
//
//   rank 1: all_reduce(ring) #42: timed out after 5000 ms receiving ... from rank 2 ...
//     hint: ...
//     last collectives on rank 1 (oldest first):
//       #41 all_reduce(ring) 400.0 KiB: started 5012.3 ms ago, took 0.812 ms
//       #42 all_reduce(ring) 400.0 KiB: started 5001.7 ms ago, never finished
std::exception_ptr describe_failure(int rank, const std::string& label, std::exception_ptr cause,
                                    std::chrono::milliseconds timeout,
                                    const std::vector<CollectiveRecord>& history);

}  // namespace mddp::comm::detail
