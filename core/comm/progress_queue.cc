#include "core/comm/progress_queue.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/comm/failure.h"
#include "core/comm/history.h"
#include "core/comm/work.h"
#include "core/common/timer.h"

namespace mddp::comm::detail {

struct ProgressQueue::Impl {
  struct Entry {
    uint64_t seq;
    std::string op;
    Task run;
    std::shared_ptr<WorkImpl> work;
  };

  // Routes a running collective's steps into its Work, and to the observer.
  struct EntryTrace final : StepTrace {
    WorkImpl& work;
    const std::function<void(const AlgoStep&, const void*)>& observer;
    EntryTrace(WorkImpl& w, const std::function<void(const AlgoStep&, const void*)>& o)
        : work(w), observer(o) {}
    void record(const AlgoStep& step, const void* data) override {
      work.add_step(step);
      if (observer) observer(step, data);
    }
  };

  int rank;
  std::chrono::milliseconds timeout;
  std::function<void(const std::string&)> on_failure;
  std::function<void(const AlgoStep&, const void*)> step_observer;  // set before issuing
  History history;

  mutable std::mutex mu;
  std::condition_variable wake;
  mutable std::condition_variable idle;  // current became null
  std::deque<Entry> queue;
  Entry* current = nullptr;  // the collective the progress thread is in
  bool abandoned = false;    // See abandon()
  bool stopping = false;
  uint64_t next_seq = 0;
  std::exception_ptr first_error;  // See Note [One failure ends the communicator]
  std::thread thread;

  Impl(int r, std::chrono::milliseconds t, std::function<void(const std::string&)> f)
      : rank(r), timeout(t), on_failure(std::move(f)) {
    thread = std::thread([this] { loop(); });
  }

  std::string label(const Entry& e) const { return str("rank ", rank, ": ", e.op, " #", e.seq); }

  // The error a collective reports when it is refused because of first_error.
  std::exception_ptr refusal(const Entry& e) const {
    return same_type(first_error, str(label(e),
                                      ": not run: this communicator failed earlier and is unusable "
                                      "(recreate it on every rank); first error: ",
                                      what_of(first_error)));
  }

  WorkPtr submit(std::string op, std::size_t bytes, Task run) {
    auto work = std::make_shared<WorkImpl>();
    std::unique_lock lock(mu);
    Entry e{++next_seq, std::move(op), std::move(run), work};
    history.issued(e.seq, e.op, bytes);
    if (first_error) {
      auto error = refusal(e);
      lock.unlock();
      work->finish(error, 0);
      return work;
    }
    queue.push_back(std::move(e));
    lock.unlock();
    wake.notify_one();
    return work;
  }

  void loop() {
    for (;;) {
      std::unique_lock lock(mu);
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left
      Entry e = std::move(queue.front());
      queue.pop_front();
      if (first_error) {
        auto error = refusal(e);
        lock.unlock();
        e.work->finish(error, 0);
        continue;
      }
      current = &e;
      lock.unlock();
      run(e);
      lock.lock();
      if (abandoned) return;
    }
  }

  void run(Entry& e) {
    const int64_t start = now_ns();
    history.started(e.seq, start);
    e.work->mark_started(start);
    std::exception_ptr error;
    try {
      EntryTrace trace(*e.work, step_observer);
      e.run(trace);
    } catch (...) {
      error =
          describe_failure(rank, label(e), std::current_exception(), timeout, history.snapshot());
    }
    // A failure first ends the queue and stops the engine, then wakes the
    // waiter, who may destroy the engine. If stopping blocks (gloo's, once
    // its device thread died: Note [gloo's device thread dies] in
    // gloo/device_thread.h), abandon() finishes the work meanwhile.
    if (error) fail(error, failed_reason(error));
    {
      std::lock_guard lock(mu);
      current = nullptr;
      idle.notify_all();
      if (abandoned) return;  // abandon() finished its work
    }
    const int64_t end = now_ns();
    if (!error) history.finished(e.seq, end);
    e.work->finish(error, error ? 0 : end);
  }

  // What the engine's blocked calls report after a collective failed with `error`.
  static std::string failed_reason(const std::exception_ptr& error) {
    const std::string what = what_of(error);
    return str("an earlier collective failed: ", what.substr(0, what.find('\n')));
  }

  // Records the first error and tears down:
  // See Note [One failure ends the communicator]. `reason` is what the engine's blocked calls
  // report.
  void fail(std::exception_ptr error, const std::string& reason) {
    std::deque<Entry> dropped;
    {
      std::lock_guard lock(mu);
      if (!first_error) first_error = error;
      dropped.swap(queue);
      for (auto& e : dropped) e.work->finish(refusal(e), 0);
    }
    on_failure(reason);
  }

  void abort(const std::string& reason) {
    fail(std::make_exception_ptr(AbortedError(str("rank ", rank, ": aborted: ", reason))), reason);
  }

  void abandon(std::exception_ptr error) {
    std::shared_ptr<WorkImpl> work;
    {
      std::lock_guard lock(mu);
      if (abandoned) return;
      abandoned = true;
      if (current) {
        error = describe_failure(rank, label(*current), error, timeout, history.snapshot());
        work = current->work;
      }
    }
    fail(error, failed_reason(error));
    if (work) work->finish(error, 0);
  }

  bool settled(std::chrono::milliseconds grace) const {
    std::unique_lock lock(mu);
    return idle.wait_for(lock, grace, [&] { return current == nullptr; });
  }

  ~Impl() {
    bool pending;
    {
      std::lock_guard lock(mu);
      stopping = true;
      pending = current != nullptr || !queue.empty();
    }
    if (pending) abort("the communicator was destroyed with collectives pending");
    wake.notify_all();
    thread.join();
  }
};

ProgressQueue::ProgressQueue(int rank, std::chrono::milliseconds timeout,
                             std::function<void(const std::string&)> on_failure)
    : impl_(std::make_unique<Impl>(rank, timeout, std::move(on_failure))) {}

ProgressQueue::~ProgressQueue() = default;

WorkPtr ProgressQueue::submit(std::string op, std::size_t bytes, Task task) {
  return impl_->submit(std::move(op), bytes, std::move(task));
}

void ProgressQueue::abort(const std::string& reason) {
  impl_->abort(reason);
}

void ProgressQueue::abandon(std::exception_ptr error) {
  impl_->abandon(std::move(error));
}

bool ProgressQueue::settled(std::chrono::milliseconds grace) const {
  return impl_->settled(grace);
}

void ProgressQueue::set_step_observer(
    std::function<void(const AlgoStep&, const void* data)> observer) {
  // Under mu: the next submit() takes mu too, which publishes it to the progress thread.
  std::lock_guard lock(impl_->mu);
  impl_->step_observer = std::move(observer);
}

std::vector<CollectiveRecord> ProgressQueue::history() const {
  return impl_->history.snapshot();
}

}  // namespace mddp::comm::detail
