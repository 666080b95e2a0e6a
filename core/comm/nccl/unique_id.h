// The NCCL unique id's trip through the job's key/value store — the one piece
// of NCCL set-up that needs no GPU, factored out so it is tested without one.
//
// ncclCommInitRank needs the same opaque id (128 bytes) on every rank: rank 0
// creates it (ncclGetUniqueId: it names rank 0's bootstrap socket) and
// publishes it; every other rank reads it. The id travels hex-encoded because
// a store value is text (the coordinator's gRPC store, a FileStore's file).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "core/comm/store.h"

namespace mddp::comm::nccl {

// On rank 0: calls create() (which returns id_bytes raw bytes), publishes the
// id under `key` and returns it. On other ranks: blocks until the key exists
// (TimeoutError naming it after `timeout`) and returns the decoded id. Throws
// CommError if what the store holds is not an id of id_bytes bytes.
std::string exchange_unique_id(Store& store, int rank, const std::string& key, std::size_t id_bytes,
                               const std::function<std::string()>& create,
                               std::chrono::milliseconds timeout);

std::string to_hex(const std::string& bytes);
// Throws CommError naming `what` on anything but an even-length hex string.
std::string from_hex(const std::string& hex, const std::string& what);

}  // namespace mddp::comm::nccl
