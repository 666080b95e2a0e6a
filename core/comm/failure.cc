#include "core/comm/failure.h"

#include <stdexcept>

#include "core/comm/history.h"
#include "core/common/timer.h"

namespace mddp::comm::detail {
namespace {
constexpr std::size_t kHistoryInErrors = 8;  // of History::kCapacity kept
// What a user should make of a failed connection, by what was seen of the peer.
const char* peer_hint(PeerFault fault) {
  switch (fault) {
    case PeerFault::kDied:
      return "the peer's process is gone (crashed or killed): its log or exit status says why";
    case PeerFault::kClosed:
      return "the peer closed its end: it exited or failed first, and its own log has the first "
             "error";
    case PeerFault::kReset:
      return "the connection broke: the peer's process died, or the network between the two ranks "
             "failed; the coordinator's verdict says which";
    case PeerFault::kUnknown:
      break;
  }
  return "the two ranks disagree on the protocol or the collective: check they run the same build "
         "and job";
}

}  // namespace

std::exception_ptr same_type(std::exception_ptr cause, const std::string& message) {
  try {
    std::rethrow_exception(cause);
  } catch (const AbortedError&) {
    return std::make_exception_ptr(AbortedError(message));
  } catch (const TimeoutError&) {
    return std::make_exception_ptr(TimeoutError(message));
  } catch (const PeerError& e) {
    return std::make_exception_ptr(PeerError(message, e.peer(), e.fault()));
  } catch (...) {
    return std::make_exception_ptr(CommError(message));
  }
}

std::exception_ptr describe_failure(int rank, const std::string& label, std::exception_ptr cause,
                                    std::chrono::milliseconds timeout,
                                    const std::vector<CollectiveRecord>& history) {
  // The transport's messages start with "rank R: " too; say it once.
  auto detail = [&](const std::exception& e) {
    std::string what = e.what();
    const std::string own = str("rank ", rank, ": ");
    return what.starts_with(own) ? what.substr(own.size()) : what;
  };
  std::string message = label + ": ";
  std::string hint;
  try {
    std::rethrow_exception(cause);
  } catch (const TimeoutError& e) {
    message += detail(e);
    hint = str("the collective's deadline is CommOptions::timeout (", timeout.count(),
               " ms); if that peer is only slow, raise it");
  } catch (const PeerError& e) {
    message += detail(e);
    hint = peer_hint(e.fault());
  } catch (const std::logic_error& e) {  // MDDP_CHECK: a bug, not a network problem
    message += str("internal error: ", e.what());
  } catch (const std::exception& e) {
    message += detail(e);
  } catch (...) {
    message += "unknown exception";
  }
  if (!hint.empty()) message += "\n  hint: " + hint;
  message += str("\n  last collectives on rank ", rank, " (oldest first):\n");
  message += History::format(history, now_ns(), kHistoryInErrors);
  if (message.back() == '\n') message.pop_back();
  return same_type(cause, message);
}

}  // namespace mddp::comm::detail
