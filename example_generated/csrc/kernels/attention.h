// Fused scaled-dot-product attention, part of the operator library (kernels.h states its
// conventions): what torch.nn.functional.scaled_dot_product_attention runs on this device
// (csrc/families/Attention.cpp calls it). A hardware port puts its flash-attention kernels here.
//
//   out[b, h, i] = sum_j P[b, h, i, j] * value[b, h / G, j]
//   P[b, h, i, :] = dropout(softmax(scale * query[b, h, i] . key[b, h / G, :] + bias[b, h, i, :]))
//
// with G = heads / heads_kv query heads per key/value head (grouped-query attention), a causal mask
// that keeps key j for query i when j <= i, and rows whose scores are all -inf giving zeros (as
// PyTorch's math path does). Everything is computed in float whatever the element type, and the
// attention matrix is never stored: the forward pass keeps each row's log-sum-exp, from which the
// backward pass recomputes P. Dropout keeps a weight with probability 1 - dropout_p and scales it by
// 1 / (1 - dropout_p); row (b, h, i) draws from Philox subsequence (b * heads + h) * len_q + i, key j
// from word j % 4 of the block at offset + j / 4, so the backward pass regenerates the mask.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// The largest head dimension (of query and key, and of value) the kernels take.
#define FOO_OP_ATTENTION_MAX_HEAD_DIM 512

typedef struct fooAttentionParams {
  double scale; // multiplies query . key
  int causal; // 1: key j is masked for query i when j > i
  double dropout_p; // the probability of dropping a weight; 0: no dropout (philox unused)
  fooPhilox philox; // the generator's seed and the offset the caller reserved
} fooAttentionParams;

// Philox offsets a launch uses per subsequence: what the caller reserves from its generator.
int64_t fooOpAttentionDropoutOffsets(int64_t len_kv);

// Forward. query (batch, heads, len_q, dim), key (batch, heads_kv, len_kv, dim), value (batch,
// heads_kv, len_kv, dim_v) and out (batch, heads, len_q, dim_v) have one dtype of Float16, BFloat16
// and Float32; bias (data NULL: none) is an additive mask of those dtypes with strides of
// (batch, heads, len_q, len_kv) (0 broadcasts); logsumexp is Float32 (batch, heads, len_q) and gets
// -inf for a row without keys; probs (data NULL: not written) is Float32 (batch, heads, len_q,
// len_kv) and gets P after dropout.
fooError_t fooOpAttentionForward(
    const fooAttentionParams* params,
    const fooTensor* query,
    const fooTensor* key,
    const fooTensor* value,
    const fooTensor* bias,
    fooTensor* out,
    fooTensor* logsumexp,
    fooTensor* probs,
    fooStream_t stream);

// Bytes of device memory the backward pass needs as its workspace.
size_t fooOpAttentionBackwardWorkspaceSize(int64_t batch, int64_t heads, int64_t len_q);

// Backward, from the forward pass's arguments, out and logsumexp: the gradients whose data is not
// NULL, shaped and typed like their operands; grad_scores (Float32, batch, heads, len_q, len_kv)
// receives the gradient of the scores, which is the bias's before broadcasting.
fooError_t fooOpAttentionBackward(
    const fooAttentionParams* params,
    const fooTensor* grad_out,
    const fooTensor* query,
    const fooTensor* key,
    const fooTensor* value,
    const fooTensor* bias,
    const fooTensor* out,
    const fooTensor* logsumexp,
    fooTensor* grad_query,
    fooTensor* grad_key,
    fooTensor* grad_value,
    fooTensor* grad_scores,
    void* workspace, // device memory of fooOpAttentionBackwardWorkspaceSize() bytes
    fooStream_t stream);

#ifdef __cplusplus
} // extern "C"
#endif
