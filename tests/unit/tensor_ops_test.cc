#include <gtest/gtest.h>
#include "core/tensor/ops.h"
TEST(Tensor, Placeholder) { EXPECT_EQ(mddp::tensor::numel_of({2, 3}), 6); }
