// Random operators: uniform_, normal_ (and the functional normal overloads), bernoulli_ (scalar and
// tensor probabilities), bernoulli, random_ (all three overloads), exponential_, geometric_,
// log_normal_, cauchy_ and native_dropout (what nn.Dropout and F.dropout reach on this device).
//
// torch.rand, torch.randn, torch.randint, *_like and dropout all end up here. Each operator draws
// from the device's generator (Generator.h), never from the CPU's: the host checks arguments with
// ATen's own templates (ATen/native/DistributionTemplates.h, shared with the CPU and CUDA kernels, so
// errors read the same), reserves one Philox offset under the generator's lock, and launches a
// kernel that receives seed and offset by value. Each element draws from a Philox block chosen by
// its index (for_each_draw below) and turns the bits into a value with ATen's transformations
// (ATen/core/TransformationHelper.h), so the result does not depend on how the device splits the
// work. Random operators without a kernel here (multinomial, randperm, poisson, ...) run on the
// CPU fallback with a CPU generator seeded from the device generator (Fallback.cpp).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // DistributionTemplates.h: per-operator headers, not ATen/Functions.h
#endif
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/core/TransformationHelper.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/MathConstants.h>
#include <torch/library.h>

#include <cmath>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "../core/Generator.h"
#include "Loops.h"

namespace torch_foo {
namespace {

// ---- device code --------------------------------------------------------------------------

// The four 32-bit words of one Philox block (one evaluation of the generator).
struct Block {
  uint32_t w[4];

  explicit Block(at::philox_engine engine) {
    for (auto& word : w) {
      word = engine();
    }
  }

  uint64_t u64(int i) const {
    return (static_cast<uint64_t>(w[i]) << 32) | w[i + 1];
  }
};

// The words one value needs: a 32-bit draw (float precision), a 64-bit draw (double precision, 64-bit
// integers) or all four (two double uniforms for a double normal).
template <typename acc_t>
constexpr int kUniformWords = std::is_same_v<acc_t, double> ? 2 : 1;

// Uniform in [0, 1) from the words starting at `i`.
template <typename acc_t>
acc_t uniform01(const Block& b, int i) {
  if constexpr (std::is_same_v<acc_t, double>) {
    return static_cast<double>(b.u64(i) >> 11) * 0x1.0p-53;
  } else {
    return static_cast<float>(b.w[i] >> 8) * 0x1.0p-24f;
  }
}

// Uniform in (0, 1): never 0 or 1, for the logarithms below.
template <typename acc_t>
acc_t uniform_open(const Block& b, int i) {
  if constexpr (std::is_same_v<acc_t, double>) {
    return (static_cast<double>(b.u64(i) >> 11) + 0.5) * 0x1.0p-53;
  } else {
    return (static_cast<float>(b.w[i] >> 8) + 0.5f) * 0x1.0p-24f;
  }
}

// Standard normal by the Box-Muller transform of two uniforms (2 * kUniformWords words).
template <typename acc_t>
acc_t standard_normal(const Block& b, int i) {
  const acc_t radius = std::sqrt(static_cast<acc_t>(-2) * std::log(uniform_open<acc_t>(b, i)));
  return radius * std::cos(static_cast<acc_t>(2) * c10::pi<acc_t> * uniform01<acc_t>(b, i + kUniformWords<acc_t>));
}

// Calls f(i, block, word) for elements first .. first + n - 1 of a kernel whose values need kWords
// words each. 4 / kWords consecutive elements share one Philox block (subsequence element / (4 /
// kWords) at the kernel's offset), so a value depends only on its index, not on how the work is
// split, and every element of one launch gets different bits.
template <int kWords, typename F>
void for_each_draw(const PhiloxArgs& philox, int64_t n, int64_t first, const F& f) {
  static_assert(kWords == 1 || kWords == 2 || kWords == 4);
  constexpr int64_t per_block = 4 / kWords;
  int64_t i = 0;
  while (i < n) {
    const auto element = static_cast<uint64_t>(first + i);
    const Block block(philox.engine(element / per_block));
    for (auto slot = static_cast<int64_t>(element % per_block); slot < per_block && i < n; ++slot, ++i) {
      f(i, block, static_cast<int>(slot) * kWords);
    }
  }
}

// out[i] = draw(block, word) for one output operand.
template <typename scalar_t, int kWords, typename Draw>
struct RandomLoop {
  PhiloxArgs philox;
  Draw draw;
  void operator()(char** data, const int64_t* strides, int64_t n, int64_t first) const {
    for_each_draw<kWords>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = draw(b, w);
    });
  }
};

// out[i] = (u < p[i]), with p converted to double on the host side.
template <typename scalar_t>
struct BernoulliTensorLoop {
  PhiloxArgs philox;
  void operator()(char** data, const int64_t* strides, int64_t n, int64_t first) const {
    for_each_draw<2>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      const double p = *reinterpret_cast<const double*>(data[1] + i * strides[1]);
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = static_cast<scalar_t>(uniform01<double>(b, w) < p);
    });
  }
};

// Dropout in one pass: mask[i] = (u < 1 - p), out[i] = mask[i] ? in[i] * scale : 0.
template <typename scalar_t>
struct DropoutLoop {
  PhiloxArgs philox;
  float keep;
  at::opmath_type<scalar_t> scale;
  void operator()(char** data, const int64_t* strides, int64_t n, int64_t first) const {
    using opmath_t = at::opmath_type<scalar_t>;
    for_each_draw<1>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      const bool kept = uniform01<float>(b, w) < keep;
      const auto x = static_cast<opmath_t>(*reinterpret_cast<const scalar_t*>(data[2] + i * strides[2]));
      *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = static_cast<scalar_t>(kept ? x * scale : opmath_t(0));
      *reinterpret_cast<bool*>(data[1] + i * strides[1]) = kept;
    });
  }
};

// ---- host code ----------------------------------------------------------------------------

// Reserves one Philox offset of the generator for a kernel on `device`.
PhiloxArgs reserve(const std::optional<at::Generator>& gen, c10::Device device) {
  auto* generator = generator_for(gen, device);
  std::lock_guard<std::mutex> lock(generator->mutex_);
  return generator->reserve(1);
}

template <typename scalar_t, int kWords, typename Draw>
void fill_random(at::TensorIteratorBase& iter, const std::optional<at::Generator>& gen, Draw draw) {
  const PhiloxArgs philox = reserve(gen, iter.device());
  const c10::DeviceGuard guard(iter.device());
  launch_elementwise(make_args<1>(iter, c10::ArrayRef<int>({0})), RandomLoop<scalar_t, kWords, Draw>{philox, draw});
}

template <typename scalar_t>
constexpr bool kWideRandom = std::is_same_v<scalar_t, int64_t> || std::is_same_v<scalar_t, double> ||
    std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>;

// The kernels DistributionTemplates.h calls after checking arguments (RNG is unused: the
// generator travels as std::optional<at::Generator>).
template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, std::optional<at::Generator> gen) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "uniform_", [&] {
      using acc_t = at::dist_acctype<scalar_t>;
      const auto lo = static_cast<acc_t>(from);
      const auto range = static_cast<acc_t>(to - from);
      const auto lo_value = static_cast<scalar_t>(from);
      const auto hi_value = static_cast<scalar_t>(to);
      fill_random<scalar_t, kUniformWords<acc_t>>(iter, gen, [=](const Block& b, int w) {
        const auto value = static_cast<scalar_t>(uniform01<acc_t>(b, w) * range + lo);
        return value == hi_value ? lo_value : value; // rounding to scalar_t may reach `to`
      });
    });
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& self, double mean, double std, std::optional<at::Generator> gen) {
    auto iter = at::TensorIterator::borrowing_nullary_op(self);
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "normal_", [&] {
      using acc_t = at::dist_acctype<scalar_t>;
      const auto m = static_cast<acc_t>(mean);
      const auto s = static_cast<acc_t>(std);
      fill_random<scalar_t, 2 * kUniformWords<acc_t>>(iter, gen, [=](const Block& b, int w) {
        return static_cast<scalar_t>(at::transformation::normal(standard_normal<acc_t>(b, w), m, s));
      });
    });
  }
};

template <typename RNG>
struct LogNormalKernel {
  void operator()(at::TensorIteratorBase& iter, double mean, double std, std::optional<at::Generator> gen) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "log_normal_", [&] {
      using acc_t = at::dist_acctype<scalar_t>;
      const auto m = static_cast<acc_t>(mean);
      const auto s = static_cast<acc_t>(std);
      fill_random<scalar_t, 2 * kUniformWords<acc_t>>(iter, gen, [=](const Block& b, int w) {
        return static_cast<scalar_t>(
            at::transformation::log_normal(at::transformation::normal(standard_normal<acc_t>(b, w), m, s)));
      });
    });
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "exponential_", [&] {
      using acc_t = at::dist_acctype<scalar_t>;
      const auto l = static_cast<acc_t>(lambda);
      fill_random<scalar_t, kUniformWords<acc_t>>(iter, gen, [=](const Block& b, int w) {
        return static_cast<scalar_t>(at::transformation::exponential(uniform01<acc_t>(b, w), l));
      });
    });
  }
};

template <typename RNG>
struct GeometricKernel {
  void operator()(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
    AT_DISPATCH_ALL_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "geometric_", [&] {
      fill_random<scalar_t, 2>(iter, gen, [=](const Block& b, int w) {
        return static_cast<scalar_t>(at::transformation::geometric(uniform_open<double>(b, w), p));
      });
    });
  }
};

template <typename RNG>
struct CauchyKernel {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma, std::optional<at::Generator> gen) {
    AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, iter.dtype(), "cauchy_", [&] {
      using acc_t = at::dist_acctype<scalar_t>;
      const auto m = static_cast<acc_t>(median);
      const auto s = static_cast<acc_t>(sigma);
      fill_random<scalar_t, kUniformWords<acc_t>>(iter, gen, [=](const Block& b, int w) {
        return static_cast<scalar_t>(at::transformation::cauchy(uniform_open<acc_t>(b, w), m, s));
      });
    });
  }
};

template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    AT_DISPATCH_ALL_TYPES_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, iter.dtype(), "random_", [&] {
      if constexpr (std::is_same_v<scalar_t, double> || std::is_same_v<scalar_t, int64_t>) {
        fill_random<scalar_t, 2>(
            iter, gen, [](const Block& b, int w) { return at::transformation::uniform_int<scalar_t>(b.u64(w)); });
      } else {
        fill_random<scalar_t, 1>(
            iter, gen, [](const Block& b, int w) { return at::transformation::uniform_int<scalar_t>(b.w[w]); });
      }
    });
  }
};

template <typename RNG>
struct RandomFromToKernel {
  // [base, base + range)
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, std::optional<at::Generator> gen) {
    AT_DISPATCH_V2(
        iter.dtype(),
        "random_from_to",
        AT_WRAP([&] {
          if (kWideRandom<scalar_t> && range >= (uint64_t{1} << 32)) {
            fill_random<scalar_t, 2>(iter, gen, [=](const Block& b, int w) {
              return at::transformation::uniform_int_from_to<scalar_t>(b.u64(w), range, base);
            });
          } else {
            fill_random<scalar_t, 1>(iter, gen, [=](const Block& b, int w) {
              return at::transformation::uniform_int_from_to<scalar_t>(b.w[w], range, base);
            });
          }
        }),
        AT_EXPAND(AT_ALL_TYPES),
        c10::kBool,
        c10::kHalf,
        c10::kBFloat16,
        AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  }

  // The whole int64 range.
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    AT_DISPATCH_ALL_TYPES_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, iter.dtype(), "random_full_range", [&] {
      if constexpr (kWideRandom<scalar_t>) {
        fill_random<scalar_t, 2>(iter, gen, [](const Block& b, int w) {
          return at::transformation::uniform_int_full_range<scalar_t>(b.u64(w));
        });
      } else {
        TORCH_CHECK(false, "random_ over the full 64-bit range handles only int64, double, float and bfloat16");
      }
    });
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const at::TensorBase& self, double p, std::optional<at::Generator> gen) {
    auto iter = at::TensorIterator::borrowing_nullary_op(self);
    AT_DISPATCH_ALL_TYPES_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, iter.dtype(), "bernoulli_", [&] {
      fill_random<scalar_t, 2>(
          iter, gen, [=](const Block& b, int w) { return static_cast<scalar_t>(uniform01<double>(b, w) < p); });
    });
  }
};

template <typename RNG>
struct BernoulliTensorKernel {
  void operator()(const at::TensorBase& self_base, const at::TensorBase& p_base, std::optional<at::Generator> gen) {
    const at::Tensor self(self_base);
    at::Tensor p(p_base);
    TORCH_CHECK(
        at::isFloatingType(p.scalar_type()),
        "bernoulli_ expects a floating point tensor of probabilities, got ",
        p.scalar_type());
    p = p.to(self.device(), c10::kDouble);
    // Probabilities outside [0, 1] are an error, as on the CPU (one reduction and a sync).
    TORCH_CHECK(p.ge(0).logical_and_(p.le(1)).all().item<bool>(), "bernoulli_ expects all probabilities in [0, 1]");
    if (p.is_alias_of(self)) {
      p = p.clone(); // self is written while p is read
    }
    p = p.expand(self.sizes());
    const at::TensorIterator iter =
        at::TensorIteratorConfig().add_output(self).add_const_input(p).check_all_same_dtype(false).build();
    const PhiloxArgs philox = reserve(gen, self.device());
    const c10::DeviceGuard guard(self.device());
    AT_DISPATCH_ALL_TYPES_AND3(c10::kBool, c10::kHalf, c10::kBFloat16, self.scalar_type(), "bernoulli_", [&] {
      launch_elementwise(make_args<2>(iter, c10::ArrayRef<int>({0, 1})), BernoulliTensorLoop<scalar_t>{philox});
    });
  }
};

namespace tpl = at::native::templates;

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return tpl::uniform_impl_<UniformKernel, at::Generator>(self, from, to, std::move(gen));
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return tpl::normal_impl_<NormalKernel, at::Generator>(self, mean, std, std::move(gen));
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalKernel, at::Generator>(mean, std, std::move(gen));
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalKernel, at::Generator>(mean, std, std::move(gen));
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  return tpl::normal_impl<NormalKernel, at::Generator>(mean, std, std::move(gen));
}

at::Tensor& normal_tensor_float_out(
    const at::Tensor& mean, double std, std::optional<at::Generator> gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, at::Generator>(out, mean, std, std::move(gen));
}

at::Tensor& normal_float_tensor_out(
    double mean, const at::Tensor& std, std::optional<at::Generator> gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, at::Generator>(out, mean, std, std::move(gen));
}

at::Tensor& normal_tensor_tensor_out(
    const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, at::Generator>(out, mean, std, std::move(gen));
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return tpl::log_normal_impl_<LogNormalKernel, at::Generator>(self, mean, std, std::move(gen));
}

at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> gen) {
  return tpl::exponential_impl_<ExponentialKernel, at::Generator>(self, lambda, std::move(gen));
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return tpl::geometric_impl_<GeometricKernel, at::Generator>(self, p, std::move(gen));
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  return tpl::cauchy_impl_<CauchyKernel, at::Generator>(self, median, sigma, std::move(gen));
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return tpl::random_impl<RandomKernel, at::Generator>(self, std::move(gen));
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  return tpl::random_from_to_impl<RandomFromToKernel, at::Generator>(self, from, to, std::move(gen));
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_(self, 0, to, std::move(gen));
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  return tpl::bernoulli_impl_<BernoulliTensorKernel, at::Generator>(self, p, std::move(gen));
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return tpl::bernoulli_impl_<BernoulliScalarKernel, at::Generator>(self, p, std::move(gen));
}

// bernoulli(p) samples with the probabilities in p; bernoulli(self, p) with one probability.
at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  return tpl::bernoulli_out_impl<BernoulliTensorKernel, at::Generator>(out, self, std::move(gen));
}

at::Tensor bernoulli_p(const at::Tensor& self, double p, std::optional<at::Generator> gen) {
  at::Tensor result = at::empty_like(self, c10::MemoryFormat::Contiguous);
  return bernoulli_float_(result, p, std::move(gen));
}

// What nn.Dropout and F.dropout call in training mode (their CPU path would draw from the CPU
// generator). Returns the output and the boolean mask of kept elements, which
// native_dropout_backward (CPU fallback) multiplies into the gradient.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) {
    return {input, at::empty_like(input)};
  }
  const at::Tensor mask = at::empty_like(input, input.options().dtype(c10::kBool), c10::MemoryFormat::Contiguous);
  if (train.has_value() && !*train) {
    return {input.clone(), mask.fill_(true)};
  }
  const double keep = 1.0 - p;
  TORCH_CHECK(keep >= 0 && keep <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", keep);
  TORCH_CHECK(
      at::isFloatingType(input.scalar_type()),
      "native_dropout expects a floating point input, got ",
      input.scalar_type());
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  at::Tensor output = at::empty_like(input); // the input's layout (channels-last stays so), as on the CPU
  const at::TensorIterator iter = at::TensorIteratorConfig()
                                      .add_output(output)
                                      .add_output(mask)
                                      .add_const_input(input)
                                      .check_all_same_dtype(false)
                                      .build();
  const PhiloxArgs philox = reserve(std::nullopt, input.device());
  const c10::DeviceGuard guard(input.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(c10::kHalf, c10::kBFloat16, input.scalar_type(), "native_dropout", [&] {
    const auto s = static_cast<at::opmath_type<scalar_t>>(scale);
    launch_elementwise(
        make_args<3>(iter, c10::ArrayRef<int>({0, 1, 2})), DropoutLoop<scalar_t>{philox, static_cast<float>(keep), s});
  });
  return {output, mask};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("normal.Tensor_float", normal_tensor_float);
  m.impl("normal.float_Tensor", normal_float_tensor);
  m.impl("normal.Tensor_Tensor", normal_tensor_tensor);
  m.impl("normal.Tensor_float_out", normal_tensor_float_out);
  m.impl("normal.float_Tensor_out", normal_float_tensor_out);
  m.impl("normal.Tensor_Tensor_out", normal_tensor_tensor_out);
  m.impl("log_normal_", log_normal_);
  m.impl("exponential_", exponential_);
  m.impl("geometric_", geometric_);
  m.impl("cauchy_", cauchy_);
  m.impl("random_", random_);
  m.impl("random_.from", random_from_);
  m.impl("random_.to", random_to_);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("bernoulli_.float", bernoulli_float_);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("bernoulli.p", bernoulli_p);
  m.impl("native_dropout", native_dropout);
}

} // namespace torch_foo
