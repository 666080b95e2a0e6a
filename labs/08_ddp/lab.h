// Lab 8 — the DDP wrapper: initial broadcast, gradient sync through a
// GradSync, no_sync for gradient accumulation (docs/ddp.md). What you write
// (my_work/ddp.cc): a ddp::DataParallel (core/ddp/ddp.h), the interface the
// reference ddp::DistributedDataParallel satisfies.
#pragma once

#include <memory>

#include "core/ddp/ddp.h"

namespace mddp::labs::impl {

// Wraps `model` on this rank (collective: every rank calls it at the same
// point). Gradients are synchronised with ddp::make_grad_sync(sync, ...).
std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync);

}  // namespace mddp::labs::impl
