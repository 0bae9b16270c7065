#include <gtest/gtest.h>

#include "collectives/datatype.h"

using namespace weft;

TEST(DataType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DataType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DataType::kInt64), 8u);
  DataType t;
  ASSERT_TRUE(parse_dtype("bfloat16", &t));
  EXPECT_EQ(t, DataType::kBfloat16);
  EXPECT_FALSE(parse_dtype("float128", &t));
  EXPECT_EQ(redop_name(RedOp::kAvg), "avg");
}
