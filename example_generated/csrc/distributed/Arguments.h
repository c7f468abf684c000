// Argument checks of the fooccl backend (Backend.cpp): what torch.distributed hands a collective,
// checked and turned into what a Communicator takes (reduce ops), with a clear error for anything
// else. Staging.h moves the checked tensors into the buffers a Communicator reads.
//
// Device tensors must be dense (the elementwise collectives work on the memory as laid out, the
// same on every rank) or contiguous (the others address blocks per rank); lists must hold one
// tensor per rank of the input's dtype, device and size. Checks raise before anything is enqueued,
// so a rejected call never reaches the other ranks. Only headers: Backend.cpp is its user (Group.h
// takes kName).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <optional>
#include <vector>

#include "Communicator.h"

namespace torch_foo::distributed {

inline constexpr const char* kName = "fooccl";

// A reduction as communicator op plus what happens to the result afterwards.
struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  std::optional<double> scale; // AVG: 1 / size; PREMUL_SUM with a number
  at::Tensor tensor_scale; // PREMUL_SUM with a tensor
};

inline const char* reduce_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

inline Reduction reduction(const c10d::ReduceOp& op, c10::ScalarType dtype, int size, const char* call) {
  const auto type = op.op_;
  const bool floating = c10::isFloatingType(dtype) || c10::isComplexType(dtype);
  const bool integral = c10::isIntegralType(dtype, /*includeBool=*/true);
  TORCH_CHECK(
      !c10::isComplexType(dtype) || type == c10d::ReduceOp::SUM || type == c10d::ReduceOp::AVG ||
          type == c10d::ReduceOp::PREMUL_SUM,
      kName,
      ": ",
      call,
      " with ReduceOp.",
      reduce_op_name(type),
      " is not defined for complex tensors");
  Reduction r;
  switch (type) {
    case c10d::ReduceOp::SUM: r.op = ReduceOp::Sum; break;
    case c10d::ReduceOp::PRODUCT: r.op = ReduceOp::Product; break;
    case c10d::ReduceOp::MIN: r.op = ReduceOp::Min; break;
    case c10d::ReduceOp::MAX: r.op = ReduceOp::Max; break;
    case c10d::ReduceOp::BAND: r.op = ReduceOp::BitwiseAnd; break;
    case c10d::ReduceOp::BOR: r.op = ReduceOp::BitwiseOr; break;
    case c10d::ReduceOp::BXOR: r.op = ReduceOp::BitwiseXor; break;
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(
          floating,
          kName,
          ": ",
          call,
          " with ReduceOp.",
          reduce_op_name(type),
          " needs a floating-point tensor, got ",
          dtype);
      if (type == c10d::ReduceOp::AVG) {
        r.scale = 1.0 / size;
        break;
      }
      const auto* supplement = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(supplement != nullptr, kName, ": ReduceOp.PREMUL_SUM without a factor");
      if (supplement->tensor_factor.defined()) {
        r.tensor_scale = supplement->tensor_factor;
      } else {
        r.scale = supplement->double_factor;
      }
      break;
    }
    default: TORCH_CHECK(false, kName, ": unsupported reduce op ", static_cast<int>(type));
  }
  if (r.op == ReduceOp::BitwiseAnd || r.op == ReduceOp::BitwiseOr || r.op == ReduceOp::BitwiseXor) {
    TORCH_CHECK(
        integral,
        kName,
        ": ",
        call,
        " with ReduceOp.",
        reduce_op_name(type),
        " needs an integer or bool tensor, got ",
        dtype);
  }
  return r;
}

// The result of a SUM made into AVG or PREMUL_SUM, on the current stream (the collective's).
inline void finish_reduction(const Reduction& r, at::Tensor& result) {
  if (r.scale) {
    result.mul_(*r.scale);
  } else if (r.tensor_scale.defined()) {
    if (r.tensor_scale.is_cpu()) {
      result.mul_(r.tensor_scale.item());
    } else {
      result.mul_(r.tensor_scale);
    }
  }
}

// The checks that depend on the group: ranks, roots, one tensor per rank.
class Arguments {
 public:
  Arguments(int rank, int size) : rank_(rank), size_(size) {}

  // True for CPU tensors (handed to the host Gloo group); raises for a mix, or other devices.
  bool on_host(const std::vector<at::Tensor>& tensors) const {
    bool cpu = false;
    bool device = false;
    for (const at::Tensor& t : tensors) {
      TORCH_CHECK(t.defined(), kName, ": undefined tensor");
      TORCH_CHECK(
          t.is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1,
          kName,
          " handles foo and cpu tensors, got one on ",
          t.device());
      (t.is_cpu() ? cpu : device) = true;
    }
    TORCH_CHECK(!(cpu && device), kName, ": one collective cannot mix cpu and foo tensors");
    return cpu;
  }

  void check_layout(const at::Tensor& t, const char* call, bool elementwise) const {
    TORCH_CHECK(t.layout() == c10::kStrided, kName, ": ", call, " supports dense tensors only, got ", t.layout());
    // Elementwise collectives work on the memory as it is laid out (the same on every rank);
    // the others need rank blocks in order.
    TORCH_CHECK(
        elementwise ? t.is_non_overlapping_and_dense() : t.is_contiguous(),
        kName,
        ": ",
        call,
        " needs ",
        elementwise ? "dense" : "contiguous",
        " tensors, got one with sizes ",
        t.sizes(),
        " and strides ",
        t.strides(),
        "; call .contiguous() first");
  }

  const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* call, bool elementwise) const {
    TORCH_CHECK(tensors.size() == 1, kName, ": ", call, " takes one tensor per process, got ", tensors.size());
    check_layout(tensors[0], call, elementwise);
    return tensors[0];
  }

  void check_pair(const at::Tensor& t, const at::Tensor& like, const char* call) const {
    TORCH_CHECK(
        t.scalar_type() == like.scalar_type(),
        kName,
        ": ",
        call,
        ": expected ",
        like.scalar_type(),
        " tensors, got ",
        t.scalar_type());
    TORCH_CHECK(t.device() == like.device(), kName, ": ", call, ": tensors on ", like.device(), " and ", t.device());
    check_layout(t, call, /*elementwise=*/false);
  }

  // A list of one tensor per rank, each with the dtype and number of elements of `like`.
  void check_list(
      const std::vector<at::Tensor>& list, const at::Tensor& like, const char* call, const char* what) const {
    TORCH_CHECK(
        list.size() == static_cast<size_t>(size_),
        kName,
        ": ",
        call,
        " takes one ",
        what,
        " tensor per rank (",
        size_,
        "), got ",
        list.size());
    for (const at::Tensor& t : list) {
      TORCH_CHECK(t.defined() && !t.is_cpu(), kName, ": ", call, ": ", what, " tensors must be on ", like.device());
      TORCH_CHECK(
          t.device() == like.device(),
          kName,
          ": ",
          call,
          ": ",
          what,
          " tensor on ",
          t.device(),
          ", expected ",
          like.device());
      TORCH_CHECK(
          t.scalar_type() == like.scalar_type(),
          kName,
          ": ",
          call,
          ": ",
          what,
          " tensors must have dtype ",
          like.scalar_type(),
          ", got ",
          t.scalar_type());
      TORCH_CHECK(
          t.numel() == like.numel(),
          kName,
          ": ",
          call,
          ": each ",
          what,
          " tensor must have ",
          like.numel(),
          " elements, got ",
          t.numel());
    }
  }

  // `large` (named `large_name`) has world size times the elements of `small`.
  void check_world_size_times(
      const at::Tensor& large,
      const at::Tensor& small,
      const char* call,
      const char* large_name,
      const char* small_name) const {
    TORCH_CHECK(
        large.numel() == small.numel() * size_,
        kName,
        ": ",
        call,
        ": the ",
        large_name,
        " must have world size (",
        size_,
        ") times the ",
        small_name,
        "'s ",
        small.numel(),
        " elements, got ",
        large.numel());
  }

  void check_root(int64_t root, const char* call) const {
    TORCH_CHECK(root >= 0 && root < size_, kName, ": ", call, ": root rank ", root, " is not in [0, ", size_, ")");
  }

  void check_peer(int peer, const char* call) const {
    TORCH_CHECK(peer >= 0 && peer < size_, kName, ": ", call, ": peer rank ", peer, " is not in [0, ", size_, ")");
    TORCH_CHECK(peer != rank_, kName, ": ", call, ": rank ", rank_, " cannot ", call, " to or from itself");
  }

  // Elements per rank of an all_to_all_single buffer: splits along dim 0 (empty: equal blocks).
  std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) const {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<size_t> counts;
    if (splits.empty()) {
      TORCH_CHECK(
          rows % size_ == 0,
          kName,
          ": all_to_all_single: the ",
          what,
          "'s first dimension (",
          rows,
          ") must divide into ",
          size_,
          " equal parts when no split sizes are given");
      counts.assign(size_, static_cast<size_t>(rows / size_ * row));
      return counts;
    }
    TORCH_CHECK(
        splits.size() == static_cast<size_t>(size_),
        kName,
        ": all_to_all_single: expected one ",
        what,
        " split size per rank (",
        size_,
        "), got ",
        splits.size());
    int64_t total = 0;
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0, kName, ": all_to_all_single: negative split size ", s);
      total += s;
      counts.push_back(static_cast<size_t>(s * row));
    }
    TORCH_CHECK(
        total == rows,
        kName,
        ": all_to_all_single: ",
        what,
        " split sizes add up to ",
        total,
        ", but its first dimension is ",
        rows);
    return counts;
  }

  static int64_t total_numel(const std::vector<at::Tensor>& tensors) {
    int64_t total = 0;
    for (const at::Tensor& t : tensors) {
      total += t.numel();
    }
    return total;
  }

 private:
  const int rank_;
  const int size_;
};

} // namespace torch_foo::distributed
