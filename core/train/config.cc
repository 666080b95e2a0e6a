#include "core/train/config.h"

#include "core/common/check.h"

namespace mddp::train {

void TrainConfig::validate() const {
  if (batch < 1) throw InputError(str("--batch must be at least 1, got ", batch));
  if (steps < 0) throw InputError(str("--steps must be >= 0, got ", steps));
  if (steps == 0 && epochs < 1) throw InputError("give --steps N or --epochs N (at least 1)");
  if (accumulate < 1) throw InputError(str("--accumulate must be at least 1, got ", accumulate));
  if (threads < 1) throw InputError(str("--threads must be at least 1, got ", threads));
  if (loss != "xent" && loss != "mse") throw InputError("--loss must be xent or mse, got '" + loss + "'");
  if (loss == "mse" && model.kind == "mlp" && model.classes != 0 && data.spec != "synthetic-regression")
    throw InputError("--loss mse trains against regression targets: use --dataset synthetic-regression "
                     "(and --classes 0 for the square benchmark MLP)");
  if (loss == "xent" && data.spec == "synthetic-regression")
    throw InputError("--dataset synthetic-regression needs --loss mse");
}

}  // namespace mddp::train
