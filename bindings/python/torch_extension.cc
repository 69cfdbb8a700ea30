// _braid_torch: the part of braid.torch that Python cannot reach in PyTorch 1.13. A PREMUL_SUM
// ReduceOp keeps its factor in a C++ supplement that 1.13 does not expose to Python (PyTorch 2
// pickles it, and braid.torch reads it there without this module).
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace {

/// The factor of a ReduceOp made by torch.distributed._make_nccl_premul_sum: a number, or the
/// first of its factor tensors (one per input tensor; braid.torch takes one tensor per call).
double premulFactor(const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) {
    throw pybind11::value_error("the ReduceOp is not a PREMUL_SUM");
  }
  const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (supplement == nullptr) {
    throw pybind11::value_error("the PREMUL_SUM ReduceOp carries no factor");
  }
  if (!supplement->tensor_factors.empty()) {
    return supplement->tensor_factors.front().item().toDouble();
  }
  return supplement->double_factor;
}

}  // namespace

PYBIND11_MODULE(_braid_torch, m) {
  m.doc() = "What braid.torch needs from PyTorch's C++ side.";
  m.def("premul_factor", &premulFactor, pybind11::arg("reduce_op"),
        "The factor of a PREMUL_SUM ReduceOp.");
}
