// Random operators: uniform_, normal_ (and the functional normal overloads), bernoulli_ (scalar and
// tensor probabilities), bernoulli, random_ (all three overloads), exponential_, geometric_,
// log_normal_, cauchy_ and native_dropout (what nn.Dropout and F.dropout reach on this device).
//
// torch.rand, torch.randn, torch.randint, *_like and dropout all end up here. Each operator draws
// from the device's generator (Generator.h), never from the CPU's: the host checks arguments with
// ATen's own templates (ATen/native/DistributionTemplates.h, shared with the CPU and CUDA kernels, so
// errors read the same), reserves one Philox offset under the generator's lock, and calls the
// operator library (fooOpRandom and friends), whose kernels receive seed and offset by value. Each
// element draws from a Philox block chosen by its index, so the result does not depend on how the
// device splits the work. Random operators without a kernel here (multinomial, randperm, poisson, ...) run on the
// CPU fallback with a CPU generator seeded from the device generator (Fallback.cpp).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#ifndef AT_PER_OPERATOR_HEADERS
#define AT_PER_OPERATOR_HEADERS // compat/Distributions.h: per-operator headers, not ATen/Functions.h
#endif
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <mutex>
#include <tuple>

#include "../compat/Distributions.h"
#include "../core/Generator.h"
#include "OpLibrary.h"

namespace torch_foo {
namespace {

// Reserves one Philox offset of the generator for a kernel on `device`.
fooPhilox reserve(const std::optional<at::Generator>& gen, c10::Device device) {
  auto* generator = generator_for(gen, device);
  std::lock_guard<std::mutex> lock(generator->mutex_);
  const PhiloxArgs args = generator->reserve(1);
  return {args.seed, args.offset};
}

// Fills the iterator's one operand with draws from `distribution` (parameters a, b, range, base as
// fooRandomArgs describes them). `op` names the operator in errors, worded as the CPU's.
void fill_random(
    at::TensorIteratorBase& iter,
    const std::optional<at::Generator>& gen,
    const char* op,
    fooDistribution distribution,
    double a = 0,
    double b = 0,
    uint64_t range = 0,
    int64_t base = 0) {
  const c10::ScalarType dtype = iter.dtype();
  bool continuous = false;
  switch (distribution) {
    case fooUniform:
    case fooNormal:
    case fooLogNormal:
    case fooExponential:
    case fooCauchy: continuous = true; break;
    default: break;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      !c10::isComplexType(dtype) && (!continuous || c10::isFloatingType(dtype)) && op_dtype(dtype).has_value(),
      "\"",
      op,
      "\" not implemented for '",
      c10::toString(dtype),
      "'");
  if (iter.numel() == 0) {
    return;
  }
  const fooRandomArgs args{reserve(gen, iter.device()), a, b, range, base};
  const c10::DeviceGuard guard(iter.device());
  const OpIter op_iter(iter, {0}, 1);
  FOO_OP_CHECK(fooOpRandom(distribution, &args, op_iter.get(), current_stream()));
}

// The kernels DistributionTemplates.h calls after checking arguments (RNG is unused: the
// generator travels as std::optional<at::Generator>).
template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "uniform_", fooUniform, from, to);
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& self, double mean, double std, std::optional<at::Generator> gen) {
    auto iter = at::TensorIterator::borrowing_nullary_op(self);
    fill_random(iter, gen, "normal_", fooNormal, mean, std);
  }
};

template <typename RNG>
struct LogNormalKernel {
  void operator()(at::TensorIteratorBase& iter, double mean, double std, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "log_normal_", fooLogNormal, mean, std);
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "exponential_", fooExponential, lambda);
  }
};

template <typename RNG>
struct GeometricKernel {
  void operator()(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "geometric_", fooGeometric, p);
  }
};

template <typename RNG>
struct CauchyKernel {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "cauchy_", fooCauchy, median, sigma);
  }
};

template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "random_", fooRandomBits);
  }
};

template <typename RNG>
struct RandomFromToKernel {
  // [base, base + range)
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, std::optional<at::Generator> gen) {
    fill_random(iter, gen, "random_from_to", fooRandomRange, 0, 0, range, base);
  }

  // The whole int64 range.
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const c10::ScalarType t = iter.dtype();
    TORCH_CHECK(
        t == c10::kLong || t == c10::kDouble || t == c10::kFloat || t == c10::kBFloat16,
        "random_ over the full 64-bit range handles only int64, double, float and bfloat16");
    fill_random(iter, gen, "random_full_range", fooRandomFullRange);
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const at::TensorBase& self, double p, std::optional<at::Generator> gen) {
    auto iter = at::TensorIterator::borrowing_nullary_op(self);
    fill_random(iter, gen, "bernoulli_", fooBernoulli, p);
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
    if (iter.numel() == 0) {
      return;
    }
    const fooPhilox philox = reserve(gen, self.device());
    const c10::DeviceGuard guard(self.device());
    const OpIter op_iter(iter, {0, 1}, 2);
    FOO_OP_CHECK(fooOpBernoulliTensor(philox, op_iter.get(), current_stream()));
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
  const fooPhilox philox = reserve(std::nullopt, input.device());
  const c10::DeviceGuard guard(input.device());
  const OpIter op_iter(iter, {0, 1, 2}, 3);
  FOO_OP_CHECK(fooOpDropout(philox, keep, scale, op_iter.get(), current_stream()));
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
