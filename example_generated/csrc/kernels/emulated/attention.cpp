// Fused attention on the emulated device: the kernels of attention.h, written the way
// flash-attention is, so that a port sees which loops its own kernels replace.
//
// Forward: one block per query row. The row's scores are visited once, with an online softmax (a
// running maximum and sum that rescale the accumulated output when the maximum grows), so nothing of
// size len_kv is stored; the row keeps its log-sum-exp for the backward pass.
// Backward: two launches. The first (one block per query row) computes the row's D = dO . O, the
// gradient of the query and the gradient of the scores; the second (one block per key) recomputes
// the probabilities of its column from the saved log-sum-exp and accumulates the gradients of its
// key and value over every query row of its heads, so no two blocks write one gradient row.
// Dropout regenerates each weight's random number from (seed, row, key) in any order.
#include <cmath>
#include <initializer_list>
#include <limits>

#include "../attention.h"
#include "device.h"
#include "philox.h"

namespace torch_foo::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kMaxHeadDim = FOO_OP_ATTENTION_MAX_HEAD_DIM;
// What every argument check here returns, with a message saying which argument is wrong.
constexpr fooError_t kInvalid = fooErrorInvalidValue;

// An operand of up to 4 dimensions in a kernel's parameter block (strides in elements).
struct Operand {
  char* data; // null: absent
  fooDataType dtype;
  int64_t strides[4];
};

Operand operand_of(const fooTensor* t) {
  Operand o{};
  if (t == nullptr || t->data == nullptr) {
    return o;
  }
  o.data = static_cast<char*>(t->data);
  o.dtype = t->dtype;
  for (int d = 0; d < t->ndim && d < 4; ++d) {
    o.strides[d] = t->strides[d];
  }
  return o;
}

// The operand as its kernel reaches it (strict memory mode translates device pointers).
Operand on_device(const fooEmuKernelContext* ctx, Operand o) {
  if (o.data != nullptr) {
    o.data = device_address(ctx, o.data);
  }
  return o;
}

// Element (i0, i1, i2, i3) of an operand whose element type is T.
template <typename T>
T* element(const Operand& o, int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) {
  return reinterpret_cast<T*>(o.data) + i0 * o.strides[0] + i1 * o.strides[1] + i2 * o.strides[2] + i3 * o.strides[3];
}

// A bias element of any of the three dtypes, as float.
float bias_at(const Operand& bias, int64_t b, int64_t h, int64_t i, int64_t j) {
  switch (bias.dtype) {
    case fooFloat16: return static_cast<float>(*element<half>(bias, b, h, i, j));
    case fooBFloat16: return static_cast<float>(*element<bfloat16>(bias, b, h, i, j));
    default: return *element<float>(bias, b, h, i, j);
  }
}

struct Shape {
  int64_t batch, heads, heads_kv, len_q, len_kv, dim, dim_v;

  int64_t rows() const {
    return batch * heads * len_q;
  }
};

// Row r = (b * heads + h) * len_q + i of the attention matrix.
struct Row {
  int64_t b, h, i, kv_head;

  Row(const Shape& s, int64_t r)
      : b(r / (s.len_q * s.heads)), h(r / s.len_q % s.heads), i(r % s.len_q), kv_head(h / (s.heads / s.heads_kv)) {}
};

struct Common {
  Shape shape;
  float scale;
  int causal;
  float keep; // 1 - dropout_p
  float keep_scale; // 1 / keep (0 when nothing is kept)
  fooPhilox philox;
  Operand query, key, value, bias, logsumexp;

  // The keys query i sees: [0, end).
  int64_t keys_end(int64_t i) const {
    return causal ? std::min(i + 1, shape.len_kv) : shape.len_kv;
  }
};

// Dropout's factor for the weights of one row: 0 or 1 / keep, regenerated from (seed, row, key).
class Dropout {
 public:
  Dropout(const Common& p, int64_t row) : p_(p), row_(row) {}

  float factor(int64_t j) {
    if (p_.keep >= 1.0f) {
      return 1.0f;
    }
    const int64_t block = j / 4;
    if (block != cached_) {
      const PhiloxBlock words(p_.philox.seed, static_cast<uint64_t>(row_), p_.philox.offset + block);
      std::memcpy(words_, words.w, sizeof(words_));
      cached_ = block;
    }
    return uniform_float(words_[j % 4]) < p_.keep ? p_.keep_scale : 0.0f;
  }

 private:
  const Common& p_;
  int64_t row_;
  int64_t cached_ = -1;
  uint32_t words_[4] = {0, 0, 0, 0};
};

// scale * q . k[j] + bias: q is the query row in float, k a key row of element type T.
template <typename T>
float score(const Common& p, const Row& r, const float* q, int64_t j) {
  const T* k = element<T>(p.key, r.b, r.kv_head, j);
  const int64_t stride = p.key.strides[3];
  float dot = 0;
  for (int64_t d = 0; d < p.shape.dim; ++d) {
    dot += q[d] * static_cast<float>(k[d * stride]);
  }
  float s = p.scale * dot;
  if (p.bias.data != nullptr) {
    s += bias_at(p.bias, r.b, r.h, r.i, j);
  }
  return s;
}

// Row d of an operand of type T into float.
template <typename T>
void load_row(const T* x, int64_t stride, int64_t n, float* out) {
  for (int64_t d = 0; d < n; ++d) {
    out[d] = static_cast<float>(x[d * stride]);
  }
}

template <typename T>
float dot_row(const T* x, int64_t stride, const float* y, int64_t n) {
  float sum = 0;
  for (int64_t d = 0; d < n; ++d) {
    sum += static_cast<float>(x[d * stride]) * y[d];
  }
  return sum;
}

// ---- forward --------------------------------------------------------------------------------------

struct ForwardParams {
  Common common;
  Operand out, probs;
};

template <typename T>
void forward_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  ForwardParams p = *static_cast<const ForwardParams*>(raw);
  Common& c = p.common;
  for (Operand* o : {&c.query, &c.key, &c.value, &c.bias, &c.logsumexp, &p.out, &p.probs}) {
    *o = on_device(ctx, *o);
  }
  const Shape& s = c.shape;
  const auto row = static_cast<int64_t>(block_index(ctx));
  const Row r(s, row);
  float q[kMaxHeadDim];
  float acc[kMaxHeadDim] = {};
  load_row(element<T>(c.query, r.b, r.h, r.i), c.query.strides[3], s.dim, q);
  Dropout dropout(c, row);
  const int64_t end = c.keys_end(r.i);
  float max = kNegInf;
  float sum = 0;
  for (int64_t j = 0; j < end; ++j) {
    const float score_j = score<T>(c, r, q, j);
    if (score_j == kNegInf) {
      continue; // masked
    }
    if (score_j > max) { // rescale what was accumulated relative to the old maximum
      const float rescale = std::exp(max - score_j);
      sum *= rescale;
      for (int64_t d = 0; d < s.dim_v; ++d) {
        acc[d] *= rescale;
      }
      max = score_j;
    }
    const float e = std::exp(score_j - max);
    sum += e;
    const float weight = e * dropout.factor(j);
    if (weight != 0.0f) {
      const T* v = element<T>(c.value, r.b, r.kv_head, j);
      for (int64_t d = 0; d < s.dim_v; ++d) {
        acc[d] += weight * static_cast<float>(v[d * c.value.strides[3]]);
      }
    }
  }
  const bool empty = max == kNegInf; // no key: zeros, as PyTorch's math path gives
  T* out = element<T>(p.out, r.b, r.h, r.i);
  for (int64_t d = 0; d < s.dim_v; ++d) {
    out[d * p.out.strides[3]] = static_cast<T>(empty ? 0.0f : acc[d] / sum);
  }
  const float lse = empty ? kNegInf : max + std::log(sum);
  *element<float>(c.logsumexp, r.b, r.h, r.i) = lse;
  if (p.probs.data != nullptr) {
    Dropout again(c, row);
    for (int64_t j = 0; j < s.len_kv; ++j) {
      float prob = 0.0f;
      if (!empty && j < end) {
        const float score_j = score<T>(c, r, q, j);
        prob = score_j == kNegInf ? 0.0f : std::exp(score_j - lse) * again.factor(j);
      }
      *element<float>(p.probs, r.b, r.h, r.i, j) = prob;
    }
  }
}

// ---- backward -------------------------------------------------------------------------------------

struct BackwardParams {
  Common common;
  Operand grad_out, out, grad_query, grad_key, grad_value, grad_scores;
  float* rows; // workspace: D of each row
};

void map_backward(const fooEmuKernelContext* ctx, BackwardParams& p) {
  Common& c = p.common;
  for (Operand* o :
       {&c.query,
        &c.key,
        &c.value,
        &c.bias,
        &c.logsumexp,
        &p.grad_out,
        &p.out,
        &p.grad_query,
        &p.grad_key,
        &p.grad_value,
        &p.grad_scores}) {
    *o = on_device(ctx, *o);
  }
  p.rows = device_address(ctx, p.rows);
}

// Per query row: D = dO . O, then dS[j] = P[j] * (dropout(dO . v[j]) - D), dQ = scale * sum_j dS[j] k[j].
template <typename T>
void backward_rows_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  BackwardParams p = *static_cast<const BackwardParams*>(raw);
  map_backward(ctx, p);
  const Common& c = p.common;
  const Shape& s = c.shape;
  const auto row = static_cast<int64_t>(block_index(ctx));
  const Row r(s, row);
  float grad_out[kMaxHeadDim];
  load_row(element<T>(p.grad_out, r.b, r.h, r.i), p.grad_out.strides[3], s.dim_v, grad_out);
  const float d_row = dot_row(element<T>(p.out, r.b, r.h, r.i), p.out.strides[3], grad_out, s.dim_v);
  p.rows[row] = d_row;
  if (p.grad_query.data == nullptr && p.grad_scores.data == nullptr) {
    return;
  }
  float q[kMaxHeadDim];
  float grad_q[kMaxHeadDim] = {};
  load_row(element<T>(c.query, r.b, r.h, r.i), c.query.strides[3], s.dim, q);
  const float lse = *element<float>(c.logsumexp, r.b, r.h, r.i);
  const int64_t end = lse == kNegInf ? 0 : c.keys_end(r.i);
  Dropout dropout(c, row);
  for (int64_t j = 0; j < s.len_kv; ++j) {
    float grad_score = 0.0f;
    if (j < end) {
      const float score_j = score<T>(c, r, q, j);
      if (score_j != kNegInf) {
        const float prob = std::exp(score_j - lse);
        const float factor = dropout.factor(j);
        const T* v = element<T>(c.value, r.b, r.kv_head, j);
        const float grad_prob = factor == 0.0f ? 0.0f : factor * dot_row(v, c.value.strides[3], grad_out, s.dim_v);
        grad_score = prob * (grad_prob - d_row);
      }
    }
    if (p.grad_scores.data != nullptr) {
      *element<float>(p.grad_scores, r.b, r.h, r.i, j) = grad_score;
    }
    if (grad_score != 0.0f && p.grad_query.data != nullptr) {
      const T* k = element<T>(c.key, r.b, r.kv_head, j);
      for (int64_t d = 0; d < s.dim; ++d) {
        grad_q[d] += grad_score * static_cast<float>(k[d * c.key.strides[3]]);
      }
    }
  }
  if (p.grad_query.data != nullptr) {
    T* out = element<T>(p.grad_query, r.b, r.h, r.i);
    for (int64_t d = 0; d < s.dim; ++d) {
      out[d * p.grad_query.strides[3]] = static_cast<T>(c.scale * grad_q[d]);
    }
  }
}

// Per key j of a key/value head: dV[j] = sum_i P[i, j] dropout[i, j] dO[i], dK[j] = scale * sum_i dS[i, j] q[i]
// over the query rows of every query head that shares it.
template <typename T>
void backward_keys_kernel(const fooEmuKernelContext* ctx, const void* raw) {
  BackwardParams p = *static_cast<const BackwardParams*>(raw);
  map_backward(ctx, p);
  const Common& c = p.common;
  const Shape& s = c.shape;
  const auto block = static_cast<int64_t>(block_index(ctx));
  const int64_t j = block % s.len_kv;
  const int64_t kv_head = block / s.len_kv % s.heads_kv;
  const int64_t b = block / (s.len_kv * s.heads_kv);
  const int64_t group = s.heads / s.heads_kv;
  float v[kMaxHeadDim];
  float grad_k[kMaxHeadDim] = {};
  float grad_v[kMaxHeadDim] = {};
  load_row(element<T>(c.value, b, kv_head, j), c.value.strides[3], s.dim_v, v);
  float q[kMaxHeadDim];
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    for (int64_t i = c.causal ? j : 0; i < s.len_q; ++i) {
      const int64_t row = (b * s.heads + h) * s.len_q + i;
      const Row r(s, row);
      const float lse = *element<float>(c.logsumexp, b, h, i);
      if (lse == kNegInf) {
        continue;
      }
      load_row(element<T>(c.query, b, h, i), c.query.strides[3], s.dim, q);
      const float score_j = score<T>(c, r, q, j);
      if (score_j == kNegInf) {
        continue;
      }
      const float prob = std::exp(score_j - lse);
      const float factor = Dropout(c, row).factor(j);
      const T* grad_out = element<T>(p.grad_out, b, h, i);
      const int64_t go_stride = p.grad_out.strides[3];
      const float grad_prob = factor == 0.0f ? 0.0f : factor * dot_row(grad_out, go_stride, v, s.dim_v);
      const float grad_score = prob * (grad_prob - p.rows[row]);
      const float weight = prob * factor;
      for (int64_t d = 0; d < s.dim_v; ++d) {
        grad_v[d] += weight * static_cast<float>(grad_out[d * go_stride]);
      }
      for (int64_t d = 0; d < s.dim; ++d) {
        grad_k[d] += grad_score * q[d];
      }
    }
  }
  if (p.grad_key.data != nullptr) {
    T* out = element<T>(p.grad_key, b, kv_head, j);
    for (int64_t d = 0; d < s.dim; ++d) {
      out[d * p.grad_key.strides[3]] = static_cast<T>(c.scale * grad_k[d]);
    }
  }
  if (p.grad_value.data != nullptr) {
    T* out = element<T>(p.grad_value, b, kv_head, j);
    for (int64_t d = 0; d < s.dim_v; ++d) {
      out[d * p.grad_value.strides[3]] = static_cast<T>(grad_v[d]);
    }
  }
}

// ---- argument checks ------------------------------------------------------------------------------

bool attention_dtype(fooDataType dtype) {
  return dtype == fooFloat16 || dtype == fooBFloat16 || dtype == fooFloat32;
}

bool has_shape(const fooTensor* t, std::initializer_list<int64_t> sizes) {
  if (t == nullptr || t->data == nullptr || t->ndim != static_cast<int>(sizes.size())) {
    return false;
  }
  int d = 0;
  for (const int64_t size : sizes) {
    if (t->sizes[d++] != size) {
      return false;
    }
  }
  return true;
}

bool absent(const fooTensor* t) {
  return t == nullptr || t->data == nullptr;
}

// Checks the operands both passes share and fills `common`.
fooError_t check_common(
    const char* function,
    const fooAttentionParams* params,
    const fooTensor* query,
    const fooTensor* key,
    const fooTensor* value,
    const fooTensor* bias,
    const fooTensor* logsumexp,
    Common* common) {
  if (params == nullptr || query == nullptr || key == nullptr || value == nullptr || query->ndim != 4 ||
      key->ndim != 4 || value->ndim != 4) {
    return fail(kInvalid, "%s: query, key and value must be 4-d tensors", function);
  }
  Shape s{
      query->sizes[0],
      query->sizes[1],
      key->sizes[1],
      query->sizes[2],
      key->sizes[2],
      query->sizes[3],
      value->sizes[3]};
  if (!has_shape(key, {s.batch, s.heads_kv, s.len_kv, s.dim}) ||
      !has_shape(value, {s.batch, s.heads_kv, s.len_kv, s.dim_v}) || s.heads_kv <= 0 || s.heads % s.heads_kv != 0) {
    return fail(kInvalid, "%s: the shapes of query, key and value do not match", function);
  }
  if (!attention_dtype(query->dtype) || key->dtype != query->dtype || value->dtype != query->dtype) {
    return fail(
        fooErrorNotSupported,
        "%s: query, key and value must be of one dtype of Float16, BFloat16 and Float32",
        function);
  }
  if (s.dim > kMaxHeadDim || s.dim_v > kMaxHeadDim) {
    return fail(
        fooErrorNotSupported,
        "%s: head dimensions above %lld are not supported",
        function,
        static_cast<long long>(kMaxHeadDim));
  }
  if (!absent(bias) && (!attention_dtype(bias->dtype) || !has_shape(bias, {s.batch, s.heads, s.len_q, s.len_kv}))) {
    return fail(kInvalid, "%s: bias must be a floating tensor of shape (batch, heads, len_q, len_kv)", function);
  }
  if (!has_shape(logsumexp, {s.batch, s.heads, s.len_q}) || logsumexp->dtype != fooFloat32) {
    return fail(kInvalid, "%s: logsumexp must be a Float32 tensor of shape (batch, heads, len_q)", function);
  }
  if (!(params->dropout_p >= 0.0 && params->dropout_p <= 1.0)) {
    return fail(kInvalid, "%s: dropout_p must be in [0, 1]", function);
  }
  common->shape = s;
  common->scale = static_cast<float>(params->scale);
  common->causal = params->causal != 0 ? 1 : 0;
  common->keep = static_cast<float>(1.0 - params->dropout_p);
  common->keep_scale = common->keep > 0.0f ? 1.0f / common->keep : 0.0f;
  common->philox = params->philox;
  common->query = operand_of(query);
  common->key = operand_of(key);
  common->value = operand_of(value);
  common->bias = operand_of(bias);
  common->logsumexp = operand_of(logsumexp);
  return fooSuccess;
}

// Launches the kernel of the operands' element type.
template <template <typename> class Kernel, typename Params>
fooError_t launch_typed(
    const char* kernel_name, fooDataType dtype, int64_t blocks, const Params& params, fooStream_t stream) {
  if (blocks <= 0) {
    return fooSuccess;
  }
  static_assert(sizeof(Params) <= FOO_MAX_PARAM_BYTES, "the parameter block travels in the launch");
  return dispatch<Types::Floating>(dtype, [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      return not_supported("attention in Float64");
    } else {
      return launch(
          function<&Kernel<T>::run>(kernel_name), static_cast<uint64_t>(blocks), &params, sizeof(params), stream);
    }
  });
}

template <typename T>
struct Forward {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    forward_kernel<T>(ctx, raw);
  }
};

template <typename T>
struct BackwardRows {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    backward_rows_kernel<T>(ctx, raw);
  }
};

template <typename T>
struct BackwardKeys {
  static void run(const fooEmuKernelContext* ctx, const void* raw) {
    backward_keys_kernel<T>(ctx, raw);
  }
};

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

int64_t fooOpAttentionDropoutOffsets(int64_t len_kv) {
  return (len_kv + 3) / 4; // four 32-bit words per Philox block, one word per key
}

size_t fooOpAttentionBackwardWorkspaceSize(int64_t batch, int64_t heads, int64_t len_q) {
  return static_cast<size_t>(std::max<int64_t>(batch * heads * len_q, 0)) * sizeof(float);
}

fooError_t fooOpAttentionForward(
    const fooAttentionParams* params,
    const fooTensor* query,
    const fooTensor* key,
    const fooTensor* value,
    const fooTensor* bias,
    fooTensor* out,
    fooTensor* logsumexp,
    fooTensor* probs,
    fooStream_t stream) {
  ForwardParams p{};
  if (const auto error = check_common(__func__, params, query, key, value, bias, logsumexp, &p.common);
      error != fooSuccess) {
    return error;
  }
  const Shape& s = p.common.shape;
  if (!has_shape(out, {s.batch, s.heads, s.len_q, s.dim_v}) || out->dtype != query->dtype) {
    return fail(
        fooErrorInvalidValue,
        "%s: out must have the shape (batch, heads, len_q, dim_v) and the query's dtype",
        __func__);
  }
  if (!absent(probs) && (!has_shape(probs, {s.batch, s.heads, s.len_q, s.len_kv}) || probs->dtype != fooFloat32)) {
    return fail(kInvalid, "%s: probs must be a Float32 tensor of shape (batch, heads, len_q, len_kv)", __func__);
  }
  p.out = operand_of(out);
  p.probs = operand_of(probs);
  return launch_typed<Forward>("attention_forward", query->dtype, s.rows(), p, stream);
}

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
    void* workspace,
    fooStream_t stream) {
  BackwardParams p{};
  if (const auto error = check_common(__func__, params, query, key, value, bias, logsumexp, &p.common);
      error != fooSuccess) {
    return error;
  }
  const Shape& s = p.common.shape;
  const auto like = [](const fooTensor* t, const fooTensor* operand) {
    return has_shape(t, {operand->sizes[0], operand->sizes[1], operand->sizes[2], operand->sizes[3]}) &&
        t->dtype == operand->dtype;
  };
  if (!like(grad_out, out) || !has_shape(out, {s.batch, s.heads, s.len_q, s.dim_v}) || out->dtype != query->dtype) {
    return fail(kInvalid, "%s: out and grad_out must be shaped and typed as the forward pass's output", __func__);
  }
  if ((!absent(grad_query) && !like(grad_query, query)) || (!absent(grad_key) && !like(grad_key, key)) ||
      (!absent(grad_value) && !like(grad_value, value))) {
    return fail(kInvalid, "%s: a gradient is not shaped and typed as its operand", __func__);
  }
  if (!absent(grad_scores) &&
      (!has_shape(grad_scores, {s.batch, s.heads, s.len_q, s.len_kv}) || grad_scores->dtype != fooFloat32)) {
    return fail(
        fooErrorInvalidValue,
        "%s: grad_scores must be a Float32 tensor of shape (batch, heads, len_q, len_kv)",
        __func__);
  }
  if (workspace == nullptr && s.rows() > 0) {
    return fail(kInvalid, "%s: the workspace is missing", __func__);
  }
  p.grad_out = operand_of(grad_out);
  p.out = operand_of(out);
  p.grad_query = operand_of(grad_query);
  p.grad_key = operand_of(grad_key);
  p.grad_value = operand_of(grad_value);
  p.grad_scores = operand_of(grad_scores);
  p.rows = static_cast<float*>(workspace);
  if (const auto error = launch_typed<BackwardRows>("attention_backward_rows", query->dtype, s.rows(), p, stream);
      error != fooSuccess) {
    return error;
  }
  if (absent(grad_key) && absent(grad_value)) {
    return fooSuccess;
  }
  const int64_t keys = s.batch * s.heads_kv * s.len_kv;
  return launch_typed<BackwardKeys>("attention_backward_keys", query->dtype, keys, p, stream);
}

} // extern "C"
