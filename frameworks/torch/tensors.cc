#include "frameworks/torch/tensors.h"

namespace weft::torch_backend {

DataType weft_dtype(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUint8;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBfloat16;
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    default:
      TORCH_CHECK(false, "weft: ", op, ": tensors of type ", t.scalar_type(),
                  " are not supported (weft takes int8, uint8, int32, int64, float16, bfloat16, float32, float64)");
  }
}

RedOp weft_op(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return RedOp::kSum;
    case c10d::ReduceOp::AVG: return RedOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return RedOp::kProd;
    case c10d::ReduceOp::MIN: return RedOp::kMin;
    case c10d::ReduceOp::MAX: return RedOp::kMax;
    default:
      TORCH_CHECK(false, "weft: ", name, ": reduce op ", static_cast<int>(op.op_),
                  " is not supported (weft reduces with SUM, PRODUCT, MIN, MAX, AVG)");
  }
}

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "weft: ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "weft: ", op, ": the tensor is on ", t.device(),
              "; the GPU path is not built (the weft backend takes CPU tensors only)");
  TORCH_CHECK(t.layout() == at::kStrided, "weft: ", op, ": only dense (strided) tensors are supported");
  weft_dtype(t, op);
}

void check_like(const at::Tensor& t, const at::Tensor& ref, int64_t numel, const char* op, const char* what) {
  check_tensor(t, op);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "weft: ", op, ": ", what, " has type ", t.scalar_type(),
              " but the input has type ", ref.scalar_type());
  TORCH_CHECK(t.numel() == numel, "weft: ", op, ": ", what, " has ", t.numel(), " elements, expected ", numel);
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "weft: ", op, " takes one tensor per process (got ", ts.size(), ")");
  check_tensor(ts[0], op);
  return ts[0];
}

CollectiveArgs make_args(CollectiveKind kind, const at::Tensor& t, uint64_t count) {
  CollectiveArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = weft_dtype(t, collective_name(kind).data());
  return a;
}

}  // namespace weft::torch_backend
