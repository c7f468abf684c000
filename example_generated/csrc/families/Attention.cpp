// Fused attention: where torch.nn.functional.scaled_dot_product_attention reaches a device kernel.
//
// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub which implementation to use
// (PyTorch's "math" path composes matmul, softmax and dropout from other operators). A PrivateUse1
// backend answers SDPBackend::overrideable for the calls its kernel handles, and PyTorch then calls
// _scaled_dot_product_fused_attention_overrideable, whose autograd formula calls the backward
// operator registered here. The choice also serves torch._fused_sdp_choice, and it respects
// torch.nn.attention.sdpa_kernel: with the overrideable backend disabled, the math path runs.
//
// This file is host logic: it checks what the kernel supports (4-d operands of one float dtype,
// equal batch sizes, grouped-query heads, head dimensions up to FOO_OP_ATTENTION_MAX_HEAD_DIM, an
// additive or boolean mask broadcastable to the scores), allocates the results and the workspace,
// reserves dropout's random numbers from the device generator, and calls the operator library
// (csrc/kernels/attention.h: on hardware, the vendor's flash-attention).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // ATen/ExpandUtils.h: per-operator headers, not ATen/Functions.h
#endif
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sum_to_size.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <optional>
#include <tuple>

#include "../aten/OpLibrary.h"
#include "../compat/Attention.h"
#include "../core/Generator.h"
#include "../kernels/attention.h"

namespace torch_foo {
namespace {

bool kernel_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kHalf || dtype == c10::kBFloat16;
}

// Whether the fused kernel computes this call; otherwise the math path runs (and reports errors
// in the arguments with PyTorch's own messages).
bool fused_kernel_supports(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    const std::optional<at::Tensor>& mask,
    bool is_causal,
    bool enable_gqa) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || q.is_nested() || k.is_nested() || v.is_nested()) {
    return false;
  }
  if (!kernel_dtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) {
    return false;
  }
  // Sizes as SymInts: a graph traced with dynamic shapes (torch.compile) has fake tensors of symbolic
  // sizes, and each comparison below then becomes a guard of the graph, as CUDA's checks do, so that a
  // transformer compiled for any sequence length keeps the fused kernel.
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) || k.sym_size(2) != v.sym_size(2) ||
      k.sym_size(3) != q.sym_size(3)) {
    return false;
  }
  if (k.sym_size(1) != v.sym_size(1) || k.sym_size(1) == 0 || q.sym_size(1) % k.sym_size(1) != 0 ||
      (q.sym_size(1) != k.sym_size(1) && !enable_gqa)) {
    return false;
  }
  constexpr int64_t max_head_dim = FOO_OP_ATTENTION_MAX_HEAD_DIM;
  if (q.sym_numel() == 0 || k.sym_numel() == 0 || v.sym_numel() == 0 || q.sym_size(3) > max_head_dim ||
      v.sym_size(3) > max_head_dim) {
    return false;
  }
  if (mask.has_value() && mask->defined()) {
    if (is_causal || mask->dim() > 4 || !(mask->scalar_type() == c10::kBool || kernel_dtype(mask->scalar_type()))) {
      return false;
    }
    const std::array<c10::SymInt, 4> scores{q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    if (!at::is_expandable_to(mask->sym_sizes(), scores)) {
      return false;
    }
  }
  return true;
}

int64_t fused_sdp_choice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double /*dropout_p*/,
    bool is_causal,
    std::optional<double> /*scale*/,
    bool enable_gqa) {
  const auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && fused_kernel_supports(query, key, value, attn_mask, is_causal, enable_gqa)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  TORCH_CHECK(
      ctx.userEnabledMathSDP(),
      "No viable backend for scaled_dot_product_attention was found on foo: the fused kernel does not "
      "support these arguments and the math backend is disabled.");
  return static_cast<int64_t>(at::SDPBackend::math);
}

double scale_of(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

fooAttentionParams attention_params_of(
    const at::Tensor& query, double dropout_p, bool is_causal, std::optional<double> scale) {
  fooAttentionParams p{};
  p.scale = scale_of(query, scale);
  p.causal = is_causal ? 1 : 0;
  p.dropout_p = dropout_p;
  return p;
}

// The mask as the library takes it: broadcast to the scores' shape by strides.
fooTensor bias_of(const at::Tensor& bias, const at::Tensor& q, const at::Tensor& k) {
  if (!bias.defined()) {
    fooTensor none{};
    return none;
  }
  return op_tensor(bias.expand({q.size(0), q.size(1), q.size(2), k.size(2)}));
}

// An optional result for the library: data NULL when it is not computed.
fooTensor optional_tensor(const at::Tensor& t) {
  if (!t.defined()) {
    fooTensor none{};
    return none;
  }
  return op_tensor(t);
}

void check_operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias) {
  TORCH_CHECK(
      q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
      "foo fused attention: query, key and value must be 4-d (batch, heads, sequence, head dim)");
  TORCH_CHECK(
      kernel_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
      "foo fused attention: query, key and value must have one dtype of float32, float16 and bfloat16, got ",
      q.scalar_type(),
      ", ",
      k.scalar_type(),
      " and ",
      v.scalar_type());
  TORCH_CHECK(
      k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(2) == v.size(2) && k.size(3) == q.size(3) &&
          k.size(1) == v.size(1) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
      "foo fused attention: shapes do not match: query ",
      q.sizes(),
      ", key ",
      k.sizes(),
      ", value ",
      v.sizes());
  TORCH_CHECK(
      !bias.defined() ||
          (kernel_dtype(bias.scalar_type()) &&
           at::is_expandable_to(bias.sizes(), {q.size(0), q.size(1), q.size(2), k.size(2)})),
      "foo fused attention: attn_bias must be a float32, float16 or bfloat16 tensor broadcastable to ",
      at::IntArrayRef({q.size(0), q.size(1), q.size(2), k.size(2)}),
      ", got ",
      bias.scalar_type(),
      " ",
      bias.sizes());
}

// The output in the query's layout (its dimensions ordered by the query's strides), as PyTorch's meta
// kernel of the operator allocates it: torch.compile traces with the meta kernel and checks that the
// device's result has the strides it predicted.
at::Tensor empty_in_layout_of(const at::Tensor& query, at::IntArrayRef sizes) {
  if (query.sizes() == sizes) {
    return at::empty_like(query);
  }
  std::array<int64_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::array<int64_t, 4> strides{};
  int64_t stride = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    strides[*d] = stride;
    stride *= sizes[*d];
  }
  return at::empty_strided(sizes, strides, query.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fused_attention(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_bias,
    double dropout_p,
    bool is_causal,
    bool return_debug_mask,
    std::optional<double> scale) {
  const at::Tensor bias = attn_bias.has_value() ? *attn_bias : at::Tensor();
  check_operands(query, key, value, bias);
  TORCH_CHECK(!(is_causal && bias.defined()), "foo fused attention: is_causal and attn_bias are exclusive");
  TORCH_CHECK(dropout_p >= 0 && dropout_p <= 1, "dropout probability has to be between 0 and 1, but got ", dropout_p);
  const c10::DeviceGuard guard(query.device());
  const int64_t batch = query.size(0);
  const int64_t heads = query.size(1);
  const int64_t len_q = query.size(2);
  const int64_t len_kv = key.size(2);
  fooAttentionParams p = attention_params_of(query, dropout_p, is_causal, scale);
  const auto options = query.options();
  at::Tensor output = empty_in_layout_of(query, {batch, heads, len_q, value.size(3)});
  at::Tensor logsumexp = at::empty({batch, heads, len_q}, options.dtype(at::kFloat));
  at::Tensor probs;
  if (return_debug_mask) {
    probs = at::empty({batch, heads, len_q, len_kv}, options.dtype(at::kFloat));
  }
  if (dropout_p > 0) {
    auto* generator = generator_for(std::nullopt, query.device());
    std::lock_guard<std::mutex> lock(generator->mutex_);
    const PhiloxArgs philox = generator->reserve(fooOpAttentionDropoutOffsets(len_kv));
    p.philox.seed = philox.seed;
    p.philox.offset = philox.offset;
  }
  const fooTensor q = op_tensor(query);
  const fooTensor k = op_tensor(key);
  const fooTensor v = op_tensor(value);
  const fooTensor b = bias_of(bias, query, key);
  fooTensor out = op_tensor(output);
  fooTensor lse = op_tensor(logsumexp);
  fooTensor debug = optional_tensor(probs);
  FOO_OP_CHECK(fooOpAttentionForward(&p, &q, &k, &v, &b, &out, &lse, &debug, current_stream()));
  // The backward pass regenerates the dropout mask from these (host tensors, as CUDA's kernels return).
  const auto as_long = [](uint64_t x) { return at::scalar_tensor(static_cast<int64_t>(x), at::dtype(at::kLong)); };
  return std::make_tuple(
      output,
      logsumexp,
      at::Tensor(),
      at::Tensor(),
      c10::SymInt(len_q),
      c10::SymInt(len_kv),
      as_long(p.philox.seed),
      as_long(p.philox.offset),
      probs);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask,
    const at::Tensor& out,
    const at::Tensor& logsumexp,
    const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/,
    c10::SymInt /*max_k*/,
    double dropout_p,
    bool is_causal,
    const at::Tensor& philox_seed,
    const at::Tensor& philox_offset,
    std::optional<double> scale) {
  check_operands(query, key, value, attn_bias);
  TORCH_CHECK(
      grad_out.sizes() == at::IntArrayRef({query.size(0), query.size(1), query.size(2), value.size(3)}) &&
          grad_out.scalar_type() == query.scalar_type(),
      "foo fused attention backward: grad_out has shape ",
      grad_out.sizes(),
      " and dtype ",
      grad_out.scalar_type(),
      ", expected the output's");
  TORCH_CHECK(
      logsumexp.scalar_type() == at::kFloat &&
          logsumexp.sizes() == at::IntArrayRef({query.size(0), query.size(1), query.size(2)}),
      "foo fused attention backward: logsumexp must be the forward pass's");
  TORCH_CHECK(
      out.sizes() == grad_out.sizes() && out.scalar_type() == grad_out.scalar_type(),
      "foo fused attention backward: out must be the forward pass's output");
  const c10::DeviceGuard guard(query.device());
  fooAttentionParams p = attention_params_of(query, dropout_p, is_causal, scale);
  if (dropout_p > 0) {
    p.philox.seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    p.philox.offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  at::Tensor grad_q = grad_input_mask[0] ? at::empty_like(query) : at::Tensor();
  at::Tensor grad_k = grad_input_mask[1] ? at::empty_like(key) : at::Tensor();
  at::Tensor grad_v = grad_input_mask[2] ? at::empty_like(value) : at::Tensor();
  at::Tensor grad_scores;
  if (grad_input_mask[3] && attn_bias.defined()) {
    grad_scores =
        at::empty({query.size(0), query.size(1), query.size(2), key.size(2)}, query.options().dtype(at::kFloat));
  }
  const size_t workspace_bytes = fooOpAttentionBackwardWorkspaceSize(query.size(0), query.size(1), query.size(2));
  const at::Tensor workspace = at::empty({static_cast<int64_t>(workspace_bytes)}, query.options().dtype(at::kByte));
  const fooTensor go = op_tensor(grad_out);
  const fooTensor q = op_tensor(query);
  const fooTensor k = op_tensor(key);
  const fooTensor v = op_tensor(value);
  const fooTensor b = bias_of(attn_bias, query, key);
  const fooTensor o = op_tensor(out);
  const fooTensor lse = op_tensor(logsumexp);
  fooTensor dq = optional_tensor(grad_q);
  fooTensor dk = optional_tensor(grad_k);
  fooTensor dv = optional_tensor(grad_v);
  fooTensor ds = optional_tensor(grad_scores);
  FOO_OP_CHECK(fooOpAttentionBackward(
      &p, &go, &q, &k, &v, &b, &o, &lse, &dq, &dk, &dv, &ds, workspace.data_ptr(), current_stream()));
  at::Tensor grad_bias;
  if (grad_scores.defined()) { // summed over the dimensions the mask was broadcast along
    grad_bias = grad_scores.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  return std::make_tuple(grad_q, grad_k, grad_v, grad_bias);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
}

} // namespace torch_foo

namespace at::native {
// scaled_dot_product_attention calls the stub, not the operator: register the same choice there.
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_foo::fused_sdp_choice);
} // namespace at::native
