// The NCCL process group (nccl.h): set-up, issue, teardown.
//
// Note [Stream ordering]
// ~~~~~~~~~~~~~~~~~~~~~~
// Backward queues gradient kernels on the compute stream and returns long
// before they ran; a bucket's all-reduce, issued from the grad-ready hook,
// must not start before its gradients exist, and must not hold up the
// kernels queued after it. So collectives run on a communication stream of
// their own: at issue, an event (`ready`) is recorded on the compute stream
// and the communication stream waits for it (cudaStreamWaitEvent) — a
// dependency on the GPU, the host does not block — then `start`, the NCCL
// call and `end` are queued. Backward's later kernels keep running on the
// compute stream while NCCL runs beside them: the overlap the CPU path gets
// from its progress thread. The other direction is ordered by the host: the
// trainer waits for every bucket's `end` (NcclWork::wait) before it queues
// the optimiser, so the compute stream never waits on the communication
// stream and a dead peer can never hang a compute-stream synchronisation.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/comm/failure.h"
#include "core/comm/nccl/half_scale.h"
#include "core/comm/nccl/nccl.h"
#include "core/comm/nccl/nccl_library.h"
#include "core/comm/nccl/nccl_work.h"
#include "core/comm/nccl/transport_log.h"
#include "core/comm/nccl/unique_id.h"
#include "core/common/timer.h"
#include "core/tensor/cuda/context.h"
#include "core/tensor/cuda_status.h"

namespace mddp::comm::nccl {
namespace {

std::string nccl_version() {
  return find_nccl().version;
}

std::size_t bytes_of(int64_t count, DataType t, const char* op) {
  MDDP_CHECK(count >= 0, op, ": negative count ", count);
  return static_cast<std::size_t>(count) * element_size(t);
}

class NcclGroup final : public ProcessGroup, public ComputeTimeline {
 public:
  NcclGroup(std::shared_ptr<GroupState> state, cudaStream_t compute)
      : state_(std::move(state)), where_(state_->where), compute_(compute) {
    check_cuda(cudaStreamCreateWithFlags(&state_->comm_stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", where_);
    check_cuda(cudaStreamCreateWithFlags(&state_->aux_stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", where_);
    comm_stream_ = state_->comm_stream;
    aux_stream_ = state_->aux_stream;
    check_cuda(cudaMalloc(&barrier_word_, sizeof(float)), "cudaMalloc", where_);
    check_cuda(cudaMemset(barrier_word_, 0, sizeof(float)), "cudaMemset",
               where_);  // a sum of zeros, never garbage
    anchor_ = std::make_shared<const ClockAnchor>(aux_stream_, where_);
    name_ = str("nccl ", nccl_version(), " (cuda:", where_.device, ")");
  }

  ~NcclGroup() override {
    // Drain what is queued (bounded by the timeout), then leave cleanly; on
    // any failure ncclCommAbort, which never waits for the peers.
    try {
      if (last_) last_->wait();
      std::unique_lock lock(state_->mu);
      if (state_->comm) {
        const ncclResult_t r = nccl_library().comm_finalize(state_->comm);
        if (r != ncclSuccess && r != ncclInProgress)
          state_->fail_locked(nccl_error(r, "ncclCommFinalize", state_->comm, where_));
        state_->await_call(lock, "ncclCommFinalize");
        nccl_library().comm_destroy(state_->comm);
        state_->comm = nullptr;
      }
    } catch (const CommError& e) {
      spdlog::warn("{}: NCCL teardown: {}", where_.str(), e.what());
    }
    state_->fail(
        std::make_exception_ptr(AbortedError(str(where_.str(), ": the NCCL group was destroyed"))));
    last_.reset();
    marks_.clear();
    for (cudaEvent_t e : mark_events_) cudaEventDestroy(e);
    cudaFree(barrier_word_);
    // The streams go with the last holder of state_ (a Work may outlive us).
  }

  int rank() const override { return where_.rank; }
  int size() const override { return state_->size; }
  std::string transport_name() const override { return name_; }

  WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    const std::size_t bytes = bytes_of(count, dtype, "all_reduce");
    // Note [Averaging in 16 bits]: a 16-bit average is a 16-bit sum, then 1/n in fp32.
    const bool avg16 = op == ReduceOp::kAvg && dtype != DataType::kFloat32;
    const Epilogue scale = [&](void* out, cudaStream_t s) {
      scale_16bit(out, count, dtype == DataType::kBFloat16, 1.0f / static_cast<float>(size()), s);
      check_cuda(cudaGetLastError(), "launch of the 16-bit averaging kernel", where_);
    };
    return issue(
        "all_reduce", data, data, bytes, bytes,
        [&](const void* in, void* out, ncclComm_t c, cudaStream_t s) {
          return nccl_library().all_reduce(in, out, count, to_nccl(dtype),
                                           avg16 ? ncclSum : to_nccl(op), c, s);
        },
        avg16 ? scale : Epilogue{});
  }

  // ncclReduceScatter is in place when out == in + rank*count, the same
  // convention as ProcessGroup's.
  WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                         ReduceOp op) override {
    const std::size_t bytes = bytes_of(count, dtype, "reduce_scatter");
    const bool avg16 =
        op == ReduceOp::kAvg && dtype != DataType::kFloat32;  // Note [Averaging in 16 bits]
    const Epilogue scale = [&](void* o, cudaStream_t s) {
      scale_16bit(o, count, dtype == DataType::kBFloat16, 1.0f / static_cast<float>(size()), s);
      check_cuda(cudaGetLastError(), "launch of the 16-bit averaging kernel", where_);
    };
    return issue(
        "reduce_scatter", in, out, bytes * size(), bytes,
        [&](const void* i, void* o, ncclComm_t c, cudaStream_t s) {
          return nccl_library().reduce_scatter(i, o, count, to_nccl(dtype),
                                               avg16 ? ncclSum : to_nccl(op), c, s);
        },
        avg16 ? scale : Epilogue{});
  }

  WorkPtr all_gather(const void* in, void* out, int64_t count, DataType dtype) override {
    const std::size_t bytes = bytes_of(count, dtype, "all_gather");
    return issue("all_gather", in, out, bytes, bytes * size(),
                 [&](const void* i, void* o, ncclComm_t c, cudaStream_t s) {
                   return nccl_library().all_gather(i, o, count, to_nccl(dtype), c, s);
                 });
  }

  WorkPtr broadcast(void* data, int64_t count, DataType dtype, int root) override {
    MDDP_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank of ", size());
    const std::size_t bytes = bytes_of(count, dtype, "broadcast");
    return issue(str("broadcast(root ", root, ")"), data, data, bytes, bytes,
                 [&](const void* in, void* out, ncclComm_t c, cudaStream_t s) {
                   return nccl_library().broadcast(in, out, count, to_nccl(dtype), root, c, s);
                 });
  }

  // NCCL has no barrier: a one-element all-reduce on the GPU, as PyTorch does.
  WorkPtr barrier() override {
    return issue("barrier", barrier_word_, barrier_word_, sizeof(float), sizeof(float),
                 [&](const void* in, void* out, ncclComm_t c, cudaStream_t s) {
                   return nccl_library().all_reduce(in, out, 1, ncclFloat32, ncclSum, c, s);
                 });
  }

  void abort(const std::string& reason) override {
    state_->fail(std::make_exception_ptr(AbortedError(str(where_.str(), ": aborted: ", reason))));
  }

  std::vector<CollectiveRecord> history() const override { return state_->history.snapshot(); }

  void mark(const char* name) override {
    std::lock_guard lock(state_->mu);
    if (marks_.size() == mark_events_.size()) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate", where_);
      mark_events_.push_back(e);
    }
    cudaEvent_t e = mark_events_[marks_.size()];
    check_cuda(cudaEventRecord(e, compute_), "cudaEventRecord (compute stream)", where_);
    marks_.push_back({name, e, current_anchor()});
  }

  // The compute stream never waits on the communication stream
  // (Note [Stream ordering]), so this synchronisation cannot hang on a peer.
  std::vector<PhaseMark> take_marks() override {
    std::lock_guard lock(state_->mu);
    std::vector<PhaseMark> out;
    if (marks_.empty()) return out;
    tensor::cuda::note_host_wait();
    check_cuda(cudaEventSynchronize(marks_.back().event), "cudaEventSynchronize", where_);
    for (const Mark& m : marks_) out.push_back({m.name, m.anchor->to_ns(m.event)});
    marks_.clear();
    return out;
  }

 private:
  using Launch = std::function<ncclResult_t(const void* in, void* out, ncclComm_t, cudaStream_t)>;
  // Queued on the comm stream after the NCCL call, on its output.
  using Epilogue = std::function<void(void* out, cudaStream_t)>;
  struct Mark {
    const char* name;
    cudaEvent_t event;
    std::shared_ptr<const ClockAnchor> anchor;
  };

  // Call with state_->mu held.
  std::shared_ptr<const ClockAnchor> current_anchor() {
    if (now_ns() - anchor_->host_ns() > ClockAnchor::kAnchorPeriodNs)
      anchor_ = std::make_shared<const ClockAnchor>(aux_stream_, where_);
    return anchor_;
  }

  // True for buffers on this GPU, false for host buffers (staged); anything
  // else is a programming error.
  bool on_device(const void* p, const std::string& op) const {
    int device = -1;
    const bool dev = is_device_memory(p, &device, where_);
    MDDP_CHECK(!dev || device == where_.device, op, ": buffer on cuda:", device,
               " but this rank's NCCL group is on cuda:", where_.device);
    return dev;
  }

  // Queues one collective (Note [Stream ordering]). Host buffers are copied
  // to a stream-ordered device allocation first, after the collectives
  // already issued finished: a copy from pageable memory synchronises the
  // stream, which must not block on a peer without the timeout.
  WorkPtr issue(const std::string& op, const void* in, void* out, std::size_t in_bytes,
                std::size_t out_bytes, const Launch& launch, const Epilogue& epilogue = {}) {
    const bool device = in_bytes == 0 || on_device(in, op);
    MDDP_CHECK(out_bytes == 0 || on_device(out, op) == device, op,
               ": mixes host and device buffers");
    if (!device && last_) last_->wait();

    std::unique_lock lock(state_->mu);
    const uint64_t seq = ++seq_;
    const std::string label = str(where_.str(), ": ", op, "(nccl) #", seq);
    state_->history.issued(seq, op + "(nccl)", std::max(in_bytes, out_bytes));
    if (state_->first_error)
      std::rethrow_exception(detail::same_type(
          state_->first_error,
          str(label,
              ": not run: this NCCL group failed earlier and is unusable (recreate it on "
              "every rank); first error: ",
              what_of(state_->first_error))));
    try {
      check_cuda(cudaSetDevice(where_.device), "cudaSetDevice", where_);
      auto work = std::make_shared<NcclWork>(state_, current_anchor(), seq, label);
      const void* src = in;
      void* dst = out;
      if (!device) {
        // In place (all_reduce, broadcast) shares one device copy; otherwise out follows in.
        const bool in_place = in == out;
        const std::size_t offset = in_place ? 0 : in_bytes;
        check_cuda(cudaMallocAsync(&work->staged, offset + out_bytes, comm_stream_),
                   "cudaMallocAsync", where_);
        check_cuda(
            cudaMemcpyAsync(work->staged, in, in_bytes, cudaMemcpyHostToDevice, comm_stream_),
            "cudaMemcpyAsync (host buffer to device)", where_);
        work->staged_offset = offset;
        work->staged_bytes = out_bytes;
        work->host_out = out;
        src = work->staged;
        dst = static_cast<std::byte*>(work->staged) + offset;
      }
      check_cuda(cudaEventRecord(work->ready, compute_), "cudaEventRecord (compute stream)",
                 where_);
      check_cuda(cudaStreamWaitEvent(comm_stream_, work->ready, 0), "cudaStreamWaitEvent", where_);
      check_cuda(cudaEventRecord(work->start, comm_stream_), "cudaEventRecord", where_);
      const ncclResult_t r = launch(src, dst, state_->comm, comm_stream_);
      if (r != ncclSuccess && r != ncclInProgress)
        std::rethrow_exception(nccl_error(r, label, state_->comm, where_));
      // Nonblocking: the call may still be enqueueing; anything queued after
      // it (the epilogue, `end`) must wait until it is on the stream.
      if (r == ncclInProgress) state_->await_call(lock, label);
      if (epilogue) epilogue(dst, comm_stream_);
      check_cuda(cudaEventRecord(work->end, comm_stream_), "cudaEventRecord", where_);
      last_ = work;
      return work;
    } catch (const CommError&) {
      // Half-issued: this rank's sequence of collectives no longer matches the others'.
      state_->fail_locked(std::current_exception());
      throw;
    }
  }

  std::shared_ptr<GroupState> state_;
  const Where where_;
  cudaStream_t compute_;
  cudaStream_t comm_stream_ = nullptr;  // state_'s streams (it owns them)
  cudaStream_t aux_stream_ = nullptr;   // idle: clock anchors, staged results' copies home
  void* barrier_word_ = nullptr;
  std::string name_;
  uint64_t seq_ = 0;
  std::shared_ptr<const ClockAnchor> anchor_;
  std::shared_ptr<NcclWork> last_;  // the last collective issued: drained before staging
  std::vector<Mark> marks_;
  std::vector<cudaEvent_t> mark_events_;  // reused: marks_[i] records mark_events_[i]
};

// InputError when this rank's GPU cannot be used: before any collective, so
// the message is the one a user sees.
void require_gpu(int device) {
  const tensor::CudaStatus s = tensor::cuda_status();
  if (s.broken()) throw InputError("NCCL cannot run: " + s.problem);
  if (s.devices == 0)
    throw InputError(
        "NCCL needs a CUDA GPU and none was found on this machine; use --device cpu / --backend "
        "cpu");
  if (device < 0 || device >= s.devices)
    throw InputError(str("cuda:", device, " does not exist: this machine has ", s.devices,
                         " GPU(s); run one rank per GPU (LOCAL_RANK picks the GPU)"));
}

// Host-buffer collectives (the loss mean, the model check) stage through
// cudaMallocAsync. The device's default pool returns its memory to the
// driver at every synchronisation unless its release threshold says keep it
// (the default, 0, keeps nothing): raised, staging in the steady state reuses
// the pool instead of allocating from the driver each time. Best effort: a
// device without memory pools keeps working, only slower.
void keep_staging_memory(int device) {
  cudaMemPool_t pool = nullptr;
  uint64_t keep = UINT64_MAX;
  if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
    cudaGetLastError();  // clear it: nothing else depends on this
}

// One line on what NCCL will use, and where its log goes (`nccl_log`, "" when
// the user set NCCL_DEBUG); the transport it chose follows after the first
// collective (GroupState::log_transport_once).
void log_setup(const Where& where, int size, const std::string& nccl_log) {
  cudaDeviceProp prop{};
  char bus[32] = "?";
  if (cudaGetDeviceProperties(&prop, where.device) != cudaSuccess) cudaGetLastError();
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, where.device) != cudaSuccess) cudaGetLastError();
  std::string env;
  for (const char* var :
       {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE", "NCCL_NET", "NCCL_ALGO", "NCCL_PROTO"})
    if (const char* v = std::getenv(var)) env += str(" ", var, "=", v);
  spdlog::info("NCCL {}: rank {} of {} on cuda:{} ({}, PCI {}){}{}", nccl_version(), where.rank,
               size, where.device, prop.name, bus, env.empty() ? "" : ";", env);
  if (!nccl_log.empty())
    spdlog::info(
        "NCCL's INFO log goes to {}; the transport it chose is logged after the first collective",
        nccl_log);
}

}  // namespace

std::unique_ptr<ProcessGroup> connect_nccl(Store& store, int rank, int size,
                                           const NcclOptions& options) {
  MDDP_CHECK(rank >= 0 && rank < size, "rank ", rank, " of ", size);
  MDDP_CHECK(options.timeout.count() > 0, "NcclOptions::timeout must be positive");
  require_gpu(options.device);
  nccl_library();  // loads NCCL: InputError naming where it looked when there is none
  auto state = std::make_shared<GroupState>();
  state->nccl_log = nccl_log_path();  // set up at process start (capture_nccl_log)
  state->where = {rank, options.device};
  state->size = size;
  state->timeout = options.timeout;
  check_cuda(cudaSetDevice(options.device), "cudaSetDevice", state->where);
  keep_staging_memory(options.device);

  const std::string raw = exchange_unique_id(
      store, rank, options.prefix + "/unique_id", sizeof(ncclUniqueId),
      [&] {
        ncclUniqueId id;
        const ncclResult_t r = nccl_library().get_unique_id(&id);
        if (r != ncclSuccess)
          std::rethrow_exception(nccl_error(r, "ncclGetUniqueId", nullptr, state->where));
        return std::string(id.internal, sizeof id.internal);
      },
      options.timeout);
  ncclUniqueId id;
  std::copy(raw.begin(), raw.end(), id.internal);

  // Nonblocking: every NCCL call returns at once and is polled with the
  // timeout (GroupState::await_call), so a rank that never joins cannot hang
  // the others in ncclCommInitRank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::unique_lock lock(state->mu);
  const ncclResult_t r =
      nccl_library().comm_init_rank_config(&state->comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    state->fail_locked(nccl_error(r, "ncclCommInitRankConfig", state->comm, state->where));
    std::rethrow_exception(state->first_error);
  }
  state->await_call(lock, str("NCCL set-up (ncclCommInitRankConfig, ", size, " ranks)"));
  lock.unlock();
  log_setup(state->where, size, state->nccl_log);
  try {
    // The tensors' compute stream of this GPU: the one the gradients are computed on.
    return std::make_unique<NcclGroup>(
        state, static_cast<cudaStream_t>(tensor::cuda::compute_stream(options.device)));
  } catch (const CommError&) {
    state->fail(std::current_exception());
    throw;
  }
}

}  // namespace mddp::comm::nccl
