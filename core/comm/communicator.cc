// The Communicator: a FIFO queue of collectives drained by one progress
// thread that runs each algorithm (algorithms/) over the transport.
//
// Note [One failure ends the communicator]. A collective that fails leaves
// the ranks' message streams in an unknown state (half a ring step may have
// been sent), so nothing after it can be trusted: the first error is kept,
// the transport is aborted (its peers then fail fast instead of waiting for
// their own timeouts), queued work fails, and every later call fails at once
// with a message that carries the first error. Recovery is a new
// Communicator on every rank.
#include "core/comm/communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/history.h"
#include "core/comm/work.h"
#include "core/common/timer.h"

namespace mddp::comm {
namespace {

constexpr std::size_t kHistoryInErrors = 8;

// A new exception of the same CommError subtype as `cause`, with `message`.
std::exception_ptr same_type(std::exception_ptr cause, const std::string& message) {
  try {
    std::rethrow_exception(cause);
  } catch (const AbortedError&) {
    return std::make_exception_ptr(AbortedError(message));
  } catch (const TimeoutError&) {
    return std::make_exception_ptr(TimeoutError(message));
  } catch (const PeerError&) {
    return std::make_exception_ptr(PeerError(message));
  } catch (...) {
    return std::make_exception_ptr(CommError(message));
  }
}

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

struct Communicator::Impl {
  struct Task {
    uint64_t seq;
    std::string op;
    std::function<void(const AlgoContext&)> run;
    std::shared_ptr<detail::WorkImpl> work;
  };

  std::unique_ptr<Transport> transport;
  CommOptions options;
  int rank, size;
  Scratch scratch;  // progress thread only
  detail::History history;

  std::mutex mu;
  std::condition_variable wake;
  std::deque<Task> queue;
  bool running = false;  // the progress thread is inside a task
  bool stopping = false;
  uint64_t next_seq = 0;
  std::exception_ptr first_error;  // See Note [One failure ends the communicator]
  std::thread thread;

  Impl(std::unique_ptr<Transport> t, CommOptions o)
      : transport(std::move(t)), options(o), rank(transport->rank()), size(transport->size()) {
    thread = std::thread([this] { loop(); });
  }

  std::string label(const Task& task) const {
    return str("rank ", rank, ": ", task.op, " #", task.seq);
  }

  // The error a task reports when it is refused because of first_error.
  std::exception_ptr refusal(const Task& task) const {
    return same_type(first_error,
                     str(label(task),
                         ": not run: an earlier collective failed and this "
                         "communicator is unusable (recreate it on every rank); first error: ",
                         what_of(first_error)));
  }

  WorkPtr submit(std::string op, std::size_t bytes, std::function<void(const AlgoContext&)> run) {
    auto work = std::make_shared<detail::WorkImpl>();
    std::unique_lock lock(mu);
    Task task{++next_seq, std::move(op), std::move(run), work};
    history.issued(task.seq, task.op, bytes);
    if (first_error) {
      auto error = refusal(task);
      lock.unlock();
      work->finish(error, 0);
      return work;
    }
    queue.push_back(std::move(task));
    lock.unlock();
    wake.notify_one();
    return work;
  }

  void loop() {
    for (;;) {
      std::unique_lock lock(mu);
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left
      Task task = std::move(queue.front());
      queue.pop_front();
      if (first_error) {
        auto error = refusal(task);
        lock.unlock();
        task.work->finish(error, 0);
        continue;
      }
      running = true;
      lock.unlock();
      run(task);
      lock.lock();
      running = false;
    }
  }

  void run(Task& task) {
    const int64_t start = now_ns();
    history.started(task.seq, start);
    task.work->mark_started(start);
    std::exception_ptr error;
    try {
      const AlgoContext ctx{*transport, rank, size, Clock::now() + options.timeout, scratch};
      task.run(ctx);
    } catch (...) {
      error = describe_failure(task, std::current_exception());
    }
    const int64_t end = now_ns();
    if (!error) history.finished(task.seq, end);
    if (error) fail(error);
    task.work->finish(error, error ? 0 : end);
  }

  // "rank 1: all_reduce(ring) #42: <what the transport said>", a hint, and
  // the last collectives of the history.
  std::exception_ptr describe_failure(const Task& task, std::exception_ptr cause) {
    // The transport's messages start with "rank R: " too; say it once.
    auto detail = [&](const std::exception& e) {
      std::string what = e.what();
      const std::string own = str("rank ", rank, ": ");
      return what.starts_with(own) ? what.substr(own.size()) : what;
    };
    std::string message = str(label(task), ": ");
    std::string hint;
    try {
      std::rethrow_exception(cause);
    } catch (const TimeoutError& e) {
      message += detail(e);
      hint = str("the collective's deadline is CommOptions::timeout (", options.timeout.count(),
                 " ms); if that peer is only slow, raise it");
    } catch (const PeerError& e) {
      message += detail(e);
      hint = "the peer's process probably exited or crashed: its own log has the first error";
    } catch (const std::logic_error& e) {
      message += str("internal error: ", e.what());
    } catch (const std::exception& e) {
      message += detail(e);
    }
    if (!hint.empty()) message += "\n  hint: " + hint;
    message += str("\n  last collectives on rank ", rank, " (oldest first):\n");
    message += detail::History::format(history.snapshot(), now_ns(), kHistoryInErrors);
    if (message.back() == '\n') message.pop_back();
    return same_type(cause, message);
  }

  // Records the first error and tears down: See Note [One failure ends the communicator].
  void fail(std::exception_ptr error) {
    std::deque<Task> dropped;
    {
      std::lock_guard lock(mu);
      if (!first_error) first_error = error;
      dropped.swap(queue);
      for (auto& task : dropped) task.work->finish(refusal(task), 0);
    }
    const std::string message = what_of(error);
    transport->abort(message.substr(0, message.find('\n')));
  }

  void abort(const std::string& reason) {
    fail(std::make_exception_ptr(AbortedError(str("rank ", rank, ": aborted: ", reason))));
  }

  ~Impl() {
    bool pending;
    {
      std::lock_guard lock(mu);
      stopping = true;
      pending = running || !queue.empty();
    }
    if (pending) abort("the Communicator was destroyed with collectives pending");
    wake.notify_all();
    thread.join();
  }
};

Communicator::Communicator(std::unique_ptr<Transport> transport, CommOptions options) {
  MDDP_CHECK(transport != nullptr);
  MDDP_CHECK(options.timeout.count() > 0, "CommOptions::timeout must be positive");
  impl_ = std::make_unique<Impl>(std::move(transport), options);
}

Communicator::~Communicator() = default;

int Communicator::rank() const {
  return impl_->rank;
}
int Communicator::size() const {
  return impl_->size;
}
const CommOptions& Communicator::options() const {
  return impl_->options;
}
std::string Communicator::transport_name() const {
  return impl_->transport->name();
}
std::vector<CollectiveRecord> Communicator::history() const {
  return impl_->history.snapshot();
}
void Communicator::abort(const std::string& reason) {
  impl_->abort(reason);
}

namespace {
void check_args(const void* p, int64_t count, const char* what) {
  MDDP_CHECK(count >= 0, what, ": negative count ", count);
  MDDP_CHECK(count == 0 || p != nullptr, what, ": null buffer for ", count, " elements");
}
}  // namespace

WorkPtr Communicator::all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op,
                                 Algorithm algorithm) {
  check_args(data, count, "all_reduce");
  const std::size_t bytes = bytes_of(count, dtype);
  if (algorithm == Algorithm::kAuto) algorithm = impl_->options.algorithm;
  if (algorithm == Algorithm::kAuto) algorithm = choose_all_reduce_algorithm(bytes, size());
  using Fn = void (*)(const AlgoContext&, void*, int64_t, DataType, ReduceOp);
  Fn fn = algorithm == Algorithm::kRing   ? all_reduce_ring
          : algorithm == Algorithm::kTree ? all_reduce_tree
                                          : all_reduce_naive;
  return impl_->submit(str("all_reduce(", to_string(algorithm), ")"), bytes,
                       [=](const AlgoContext& ctx) { fn(ctx, data, count, dtype, op); });
}

WorkPtr Communicator::reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                                     ReduceOp op) {
  check_args(in, count, "reduce_scatter");
  check_args(out, count, "reduce_scatter");
  return impl_->submit(
      "reduce_scatter(ring)", bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { reduce_scatter_ring(ctx, in, out, count, dtype, op); });
}

WorkPtr Communicator::all_gather(const void* in, void* out, int64_t count, DataType dtype) {
  check_args(in, count, "all_gather");
  check_args(out, count, "all_gather");
  return impl_->submit(
      "all_gather(ring)", bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { all_gather_ring(ctx, in, out, count, dtype); });
}

namespace {
void check_root(int root, int size, const char* what) {
  MDDP_CHECK(root >= 0 && root < size, what, ": root ", root, " is not a rank of ", size);
}
}  // namespace

WorkPtr Communicator::broadcast(void* data, int64_t count, DataType dtype, int root) {
  check_args(data, count, "broadcast");
  check_root(root, size(), "broadcast");
  return impl_->submit(
      str("broadcast(root ", root, ")"), bytes_of(count, dtype),
      [=](const AlgoContext& ctx) { broadcast_tree(ctx, data, count, dtype, root); });
}

WorkPtr Communicator::reduce(void* data, int64_t count, DataType dtype, ReduceOp op, int root) {
  check_args(data, count, "reduce");
  check_root(root, size(), "reduce");
  return impl_->submit(
      str("reduce(root ", root, ")"), bytes_of(count, dtype),
      [=](const AlgoContext& ctx) { reduce_tree(ctx, data, count, dtype, op, root); });
}

WorkPtr Communicator::scatter(const void* in, void* out, int64_t count, DataType dtype, int root) {
  check_root(root, size(), "scatter");
  if (rank() == root) check_args(in, count, "scatter");
  check_args(out, count, "scatter");
  return impl_->submit(
      str("scatter(root ", root, ")"), bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { scatter_linear(ctx, in, out, count, dtype, root); });
}

WorkPtr Communicator::gather(const void* in, void* out, int64_t count, DataType dtype, int root) {
  check_root(root, size(), "gather");
  check_args(in, count, "gather");
  if (rank() == root) check_args(out, count, "gather");
  return impl_->submit(
      str("gather(root ", root, ")"), bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { gather_linear(ctx, in, out, count, dtype, root); });
}

WorkPtr Communicator::barrier() {
  return impl_->submit("barrier", 0, [](const AlgoContext& ctx) { barrier_dissemination(ctx); });
}

WorkPtr Communicator::send(const void* data, int64_t count, DataType dtype, int peer) {
  check_args(data, count, "send");
  MDDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "send: bad peer ", peer);
  const std::size_t bytes = bytes_of(count, dtype);
  return impl_->submit(str("send(to ", peer, ")"), bytes,
                       [=](const AlgoContext& ctx) { ctx.send(peer, data, bytes); });
}

WorkPtr Communicator::recv(void* data, int64_t count, DataType dtype, int peer) {
  check_args(data, count, "recv");
  MDDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "recv: bad peer ", peer);
  const std::size_t bytes = bytes_of(count, dtype);
  return impl_->submit(str("recv(from ", peer, ")"), bytes,
                       [=](const AlgoContext& ctx) { ctx.recv(peer, data, bytes); });
}

}  // namespace mddp::comm
