// Random kernels of the emulated device: every distribution PyTorch's random operators need,
// drawn from Philox4x32-10 exactly as PyTorch's CPU and CUDA generators compute it.
#include <cmath>
#include <limits>

#include "device.h"
#include "philox.h"

namespace torch_foo::kernels {
namespace {

constexpr double kPi = 3.14159265358979323846;

using Block = PhiloxBlock;

// The accumulation type of a distribution: double for double, float for the other floats.
template <typename T>
using dist_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The words one uniform value needs: one 32-bit draw (float precision) or two (double).
template <typename acc_t>
constexpr int kUniformWords = std::is_same_v<acc_t, double> ? 2 : 1;

// Uniform in [0, 1) from the words starting at `i`.
template <typename acc_t>
acc_t uniform01(const Block& b, int i) {
  if constexpr (std::is_same_v<acc_t, double>) {
    return static_cast<double>(b.u64(i) >> 11) * 0x1.0p-53;
  } else {
    return uniform_float(b.w[i]);
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
  return radius *
      std::cos(static_cast<acc_t>(2) * static_cast<acc_t>(kPi) * uniform01<acc_t>(b, i + kUniformWords<acc_t>));
}

// Calls f(i, block, word) for elements first .. first + n - 1 of a kernel whose values need
// kWords words each: 4 / kWords consecutive elements share one Philox block (subsequence
// element / (4 / kWords)), so a value depends only on its index.
template <int kWords, typename F>
void for_each_draw(const fooPhilox& philox, int64_t n, int64_t first, const F& f) {
  static_assert(kWords == 1 || kWords == 2 || kWords == 4);
  constexpr int64_t per_block = 4 / kWords;
  int64_t i = 0;
  while (i < n) {
    const auto element = static_cast<uint64_t>(first + i);
    const Block block(philox.seed, element / per_block, philox.offset);
    for (auto slot = static_cast<int64_t>(element % per_block); slot < per_block && i < n; ++slot, ++i) {
      f(i, block, static_cast<int>(slot) * kWords);
    }
  }
}

// The digits of T's significand (std::numeric_limits<T>::digits for the 16-bit floats too).
template <typename T>
constexpr int kDigits = std::is_same_v<T, half> ? 11
    : std::is_same_v<T, bfloat16>               ? 8
                                                : std::numeric_limits<T>::digits;

// random_() without bounds: [0, 2^digits] for floating types, [0, max] for integral ones.
template <typename T, typename V>
T uniform_int(V value) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<bool>(value & 1);
  } else if constexpr (is_floating_v<T>) {
    return convert<T>(value % static_cast<uint64_t>((1ULL << kDigits<T>)+1));
  } else if constexpr (std::numeric_limits<T>::max() == std::numeric_limits<uint64_t>::max()) {
    return static_cast<T>(value); // max + 1 wraps to 0: every value is in range
  } else {
    return static_cast<T>(value % (static_cast<uint64_t>(std::numeric_limits<T>::max()) + 1));
  }
}

template <typename T>
bool same(T x, T y) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return x.bits == y.bits;
  } else {
    return x == y;
  }
}

// The distributions: each turns `words` Philox words into one value of T.
template <typename T>
struct Draw {
  fooDistribution kind;
  double a;
  double b;
  uint64_t range;
  int64_t base;

  // The 32-bit words one value takes.
  static int words_for(fooDistribution kind, uint64_t range) {
    using acc_t = dist_t<T>;
    constexpr bool wide = std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, float> ||
        std::is_same_v<T, bfloat16>;
    switch (kind) {
      case fooUniform:
      case fooExponential:
      case fooCauchy: return kUniformWords<acc_t>;
      case fooNormal:
      case fooLogNormal: return 2 * kUniformWords<acc_t>;
      case fooGeometric:
      case fooBernoulli: return 2;
      case fooRandomBits: return std::is_same_v<T, double> || std::is_same_v<T, int64_t> ? 2 : 1;
      case fooRandomRange: return wide && range >= (uint64_t{1} << 32) ? 2 : 1;
      case fooRandomFullRange: return 2;
    }
    return 1;
  }

  T operator()(const Block& blk, int w) const {
    using acc_t = dist_t<T>;
    if constexpr (is_floating_v<T>) {
      switch (kind) {
        case fooUniform: {
          const auto lo = static_cast<acc_t>(a);
          const T value = convert<T>(uniform01<acc_t>(blk, w) * static_cast<acc_t>(b - a) + lo);
          return same(value, convert<T>(b)) ? convert<T>(a) : value; // rounding to T may reach `to`
        }
        case fooNormal:
          return convert<T>(standard_normal<acc_t>(blk, w) * static_cast<acc_t>(b) + static_cast<acc_t>(a));
        case fooLogNormal:
          return convert<T>(std::exp(standard_normal<acc_t>(blk, w) * static_cast<acc_t>(b) + static_cast<acc_t>(a)));
        case fooExponential:
          return convert<T>(static_cast<acc_t>(-1.0) / static_cast<acc_t>(a) * std::log1p(-uniform01<acc_t>(blk, w)));
        case fooCauchy: {
          acc_t u = uniform_open<acc_t>(blk, w);
          if constexpr (!std::is_same_v<acc_t, double>) {
            constexpr acc_t eps = std::numeric_limits<acc_t>::epsilon();
            u = std::clamp(u, eps, 1 - eps);
          }
          return convert<T>(
              static_cast<acc_t>(a) +
              static_cast<acc_t>(b) * std::tan(static_cast<acc_t>(kPi) * (u - static_cast<acc_t>(0.5))));
        }
        default: break;
      }
    }
    switch (kind) {
      case fooGeometric: return convert<T>(std::ceil(std::log(uniform_open<double>(blk, w)) / std::log1p(-a)));
      case fooBernoulli: return convert<T>(uniform01<double>(blk, w) < a);
      case fooRandomBits:
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
          return uniform_int<T>(blk.u64(w));
        } else {
          return uniform_int<T>(blk.w[w]);
        }
      case fooRandomRange: {
        const uint64_t bits = words_for(kind, range) == 2 ? blk.u64(w) : blk.w[w];
        return convert<T>(static_cast<int64_t>(bits % range + static_cast<uint64_t>(base)));
      }
      case fooRandomFullRange: return convert<T>(static_cast<int64_t>(blk.u64(w)));
      default: return T{};
    }
  }
};

template <typename T, int kWords>
struct RandomLoop {
  fooPhilox philox;
  Draw<T> draw;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t first) const {
    for_each_draw<kWords>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      *reinterpret_cast<T*>(data[0] + i * strides[0]) = draw(b, w);
    });
  }
};

// out[i] = (u < p[i]), p in float64.
template <typename T>
struct BernoulliTensorLoop {
  fooPhilox philox;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t first) const {
    for_each_draw<2>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      const double p = *reinterpret_cast<const double*>(data[1] + i * strides[1]);
      *reinterpret_cast<T*>(data[0] + i * strides[0]) = convert<T>(uniform01<double>(b, w) < p);
    });
  }
};

template <typename T>
struct DropoutLoop {
  fooPhilox philox;
  float keep;
  opmath_t<T> scale;
  void run(const fooEmuKernelContext*, char** data, const int64_t* strides, int64_t n, int64_t first) const {
    using M = opmath_t<T>;
    for_each_draw<1>(philox, n, first, [&](int64_t i, const Block& b, int w) {
      const bool kept = uniform01<float>(b, w) < keep;
      const auto x = static_cast<M>(*reinterpret_cast<const T*>(data[2] + i * strides[2]));
      *reinterpret_cast<T*>(data[0] + i * strides[0]) = static_cast<T>(kept ? x * scale : M(0));
      *reinterpret_cast<bool*>(data[1] + i * strides[1]) = kept;
    });
  }
};

template <typename T, int kWords>
fooError_t launch_random(const fooPhilox& key, const Draw<T>& draw, const fooIter* it, fooStream_t s) {
  return launch_elementwise("random", it, 1, RandomLoop<T, kWords>{key, draw}, s);
}

bool continuous(fooDistribution d) {
  switch (d) {
    case fooUniform:
    case fooNormal:
    case fooLogNormal:
    case fooExponential:
    case fooCauchy: return true;
    default: return false;
  }
}

} // namespace
} // namespace torch_foo::kernels

using namespace torch_foo::kernels;

extern "C" {

fooError_t fooOpRandom(
    fooDistribution distribution,
    const fooRandomArgs* arguments, // the generator's state and the distribution's parameters
    const fooIter* iteration,
    fooStream_t s) {
  if (arguments == nullptr || iteration == nullptr || iteration->noperands != 1) {
    return invalid_argument(__func__);
  }
  const auto run = [&](auto tag) -> fooError_t {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      return not_supported("this data type");
    } else {
      if (continuous(distribution) && !is_floating_v<T>) {
        return not_supported("this data type");
      }
      const Draw<T> draw{distribution, arguments->a, arguments->b, arguments->range, arguments->base};
      switch (Draw<T>::words_for(distribution, arguments->range)) {
        case 1: return launch_random<T, 1>(arguments->philox, draw, iteration, s);
        case 2: return launch_random<T, 2>(arguments->philox, draw, iteration, s);
        default: return launch_random<T, 4>(arguments->philox, draw, iteration, s);
      }
    }
  };
  return dispatch<Types::Real>(iteration->dtype[0], run);
}

fooError_t fooOpBernoulliTensor(fooPhilox philox, const fooIter* it, fooStream_t stream) {
  if (it == nullptr || it->noperands != 2 || it->dtype[1] != fooFloat64) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Real>(it->dtype[0], [&](auto tag) {
    using T = decltype(tag);
    return launch_elementwise("bernoulli", it, 2, BernoulliTensorLoop<T>{philox}, stream);
  });
}

fooError_t fooOpDropout(
    fooPhilox philox, double keep_probability, double scale, const fooIter* it, fooStream_t stream) {
  if (it == nullptr || it->noperands != 3 || it->dtype[1] != fooBool || it->dtype[2] != it->dtype[0]) {
    return invalid_argument(__func__);
  }
  return dispatch<Types::Floating>(it->dtype[0], [&](auto tag) {
    using T = decltype(tag);
    return launch_elementwise(
        "dropout",
        it,
        3,
        DropoutLoop<T>{philox, static_cast<float>(keep_probability), static_cast<opmath_t<T>>(scale)},
        stream);
  });
}

} // extern "C"
