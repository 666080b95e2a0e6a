// Lab 8's reference solution: core's DistributedDataParallel (core/ddp/ddp.cc),
// which also checks that every rank built the same model.
#include "labs/08_ddp/lab.h"

namespace mddp::labs::impl {

std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync) {
  return std::make_unique<ddp::DistributedDataParallel>(model, group,
                                                        ddp::DdpOptions{.sync = sync});
}

}  // namespace mddp::labs::impl
