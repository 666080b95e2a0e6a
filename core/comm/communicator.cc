// The Communicator: a FIFO queue of collectives drained by one progress
// thread that runs each algorithm (algorithms/) over the transport.
//
// Note [One failure ends the communicator]. A collective that fails leaves
// the ranks' message streams in an unknown state (half a ring step may have
// been sent), so nothing after it can be trusted: the first error is kept,
// the transport is aborted (nothing more is sent or received on it), queued
// work fails, and every later call fails at once with a message that carries
// the first error. Recovery is a new Communicator on every rank; peers
// still waiting on this rank see its connections close (PeerError) when the
// failed communicator is destroyed, or time out.
#include "core/comm/communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/failure.h"
#include "core/comm/history.h"
#include "core/comm/work.h"
#include "core/common/timer.h"

namespace mddp::comm {

struct Communicator::Impl {
  struct Task {
    uint64_t seq;
    std::string op;
    std::function<void(const AlgoContext&)> run;
    std::shared_ptr<detail::WorkImpl> work;
  };

  // Routes a running task's steps into its Work, and to the observer.
  struct TaskTrace final : StepTrace {
    detail::WorkImpl& work;
    const std::function<void(const AlgoStep&, const void*)>& observer;
    TaskTrace(detail::WorkImpl& w, const std::function<void(const AlgoStep&, const void*)>& o)
        : work(w), observer(o) {}
    void record(const AlgoStep& step, const void* data) override {
      work.add_step(step);
      if (observer) observer(step, data);
    }
  };

  std::unique_ptr<Transport> transport;
  CommOptions options;
  std::function<void(const AlgoStep&, const void*)> step_observer;  // set before issuing
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
    return detail::same_type(first_error,
                             str(label(task),
                                 ": not run: this communicator failed earlier and is unusable "
                                 "(recreate it on every rank); first error: ",
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
      TaskTrace trace(*task.work, step_observer);
      const AlgoContext ctx{*transport, rank, size, Clock::now() + options.timeout, scratch, &trace};
      task.run(ctx);
    } catch (...) {
      error = detail::describe_failure(rank, label(task), std::current_exception(), options.timeout,
                                       history.snapshot());
    }
    const int64_t end = now_ns();
    if (!error) history.finished(task.seq, end);
    if (error) {
      const std::string what = what_of(error);
      fail(error, str("an earlier collective failed: ", what.substr(0, what.find('\n'))));
    }
    task.work->finish(error, error ? 0 : end);
  }

  // Records the first error and tears down: See Note [One failure ends the
  // communicator]. `reason` is what the transport's blocked calls report.
  void fail(std::exception_ptr error, const std::string& reason) {
    std::deque<Task> dropped;
    {
      std::lock_guard lock(mu);
      if (!first_error) first_error = error;
      dropped.swap(queue);
      for (auto& task : dropped) task.work->finish(refusal(task), 0);
    }
    transport->abort(reason);
  }

  void abort(const std::string& reason) {
    fail(std::make_exception_ptr(AbortedError(str("rank ", rank, ": aborted: ", reason))), reason);
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
void Communicator::set_step_observer(std::function<void(const AlgoStep&, const void* data)> observer) {
  // Under mu: the next submit() takes mu too, which publishes it to the progress thread.
  std::lock_guard lock(impl_->mu);
  impl_->step_observer = std::move(observer);
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

WorkPtr Communicator::all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) {
  return all_reduce(data, count, dtype, op, Algorithm::kAuto);
}

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
  const auto* in_b = static_cast<const std::byte*>(in);
  const auto* out_b = static_cast<const std::byte*>(out);
  MDDP_CHECK(count == 0 || out_b + bytes_of(count, dtype) <= in_b ||
                 in_b + bytes_of(count * size(), dtype) <= out_b,
             "reduce_scatter: out must not overlap in");
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
