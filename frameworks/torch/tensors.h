// Tensor checks and type mapping shared by the backend's operations. Every check fails with
// TORCH_CHECK (a Python RuntimeError) naming the operation and what is wrong.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "collectives/collective.h"

namespace weft::torch_backend {

// torch dtype -> Weft type; other types (bool, int16, complex, ...) fail.
DataType weft_dtype(const at::Tensor& t, const char* op);
// SUM, PRODUCT, MIN, MAX, AVG; the bitwise ops and PREMUL_SUM fail.
RedOp weft_op(const c10d::ReduceOp& op, const char* name);
// Defined, on the CPU ("the GPU path is not built" otherwise), strided, of a Weft type.
void check_tensor(const at::Tensor& t, const char* op);
// check_tensor, plus the type of ref and numel elements.
void check_like(const at::Tensor& t, const at::Tensor& ref, int64_t numel, const char* op, const char* what);
// The one tensor of a one-tensor-per-process call, checked.
const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op);
// Args of kind over count elements of t's type.
CollectiveArgs make_args(CollectiveKind kind, const at::Tensor& t, uint64_t count);

}  // namespace weft::torch_backend
