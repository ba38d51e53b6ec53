// Fused CPU kernels of the encoder: its feed-forward hidden layer, its dropout
// and its layer normalisation (the last further below).
//
// TfrBiasGeluDropout:     y = gelu(h + bias) * keep / (1 - rate)
// TfrBiasGeluDropoutGrad: dh = dy * keep / (1 - rate) * gelu'(h + bias), dbias = sum_rows dh
// TfrDropout:             y = x * keep / (1 - rate), its own gradient with the same key
//
// gelu is the exact GELU z Phi(z). `keep` is a pure function of (key, row,
// column): a 64-bit key per row from SplitMix64, then two rounds of a 32-bit
// integer finaliser per element. (TfrDropout's rows are chunks of the
// flattened tensor.) Gradients recompute the mask instead
// of reading a stored one, and no result depends on how rows are split among
// threads (dbias is summed over fixed blocks of rows, in block order).
//
// Phi uses Abramowitz & Stegun 26.2.17 (absolute error below 7.5e-8) with an
// exp written out here, so that every inner loop is plain arithmetic the
// compiler vectorises. On x86-64 with GCC the row kernels are compiled for
// several instruction sets and the best one the CPU supports is picked when
// the library is loaded.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TFR_CLONES \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TFR_CLONES
#endif

// Helpers are inlined into every compiled variant of the row kernels.
#define TFR_INLINE __attribute__((always_inline)) inline

namespace tfr_rankformer {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::errors::InvalidArgument;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Rows per block of the dbias partial sums (fixed, so sums do not depend on threads).
constexpr int64_t kRowsPerBlock = 64;

TFR_INLINE uint64_t Mix64(uint64_t z) {  // SplitMix64's output function
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

TFR_INLINE uint32_t Mix32(uint32_t x) {  // a 32-bit xor-shift-multiply finaliser
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// The 64-bit stream key of one row of one call.
TFR_INLINE uint64_t RowKey(int64_t key, int64_t row) {
  return Mix64(Mix64(static_cast<uint64_t>(key)) +
               (static_cast<uint64_t>(row) + 1) * 0x9e3779b97f4a7c15ULL);
}

// 32 random bits of one element of a row.
TFR_INLINE uint32_t ElementBits(uint32_t lo, uint32_t hi, uint32_t column) {
  return Mix32(Mix32(column ^ lo) ^ hi);
}

// Elements kept when their 32 random bits are at least this.
uint32_t KeepThreshold(float rate) {
  const double threshold = static_cast<double>(rate) * 4294967296.0;
  return threshold >= 4294967295.0 ? 0xffffffffU : static_cast<uint32_t>(threshold + 0.5);
}

TFR_INLINE float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// exp(x) for x <= 0 (clamped at -87, where it is about 1.6e-38): x = n ln2 + r,
// |r| <= ln2 / 2, e^r by its Taylor series to degree 7, 2^n through the exponent bits.
TFR_INLINE float ExpNonPositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - n * 0.693145751953125f;  // ln 2 in two parts, the first exact in float
  r = r - n * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t exponent = static_cast<int32_t>(n) + 127;
  return p * BitsToFloat(static_cast<uint32_t>(exponent) << 23);
}

// Phi(z) and the standard normal density phi(z).
TFR_INLINE void NormalCdfAndDensity(float z, float* cdf, float* density) {
  const float a = z < 0.0f ? -z : z;
  const float t = 1.0f / (1.0f + 0.2316419f * a);
  float poly = 1.330274429f;
  poly = poly * t - 1.821255978f;
  poly = poly * t + 1.781477937f;
  poly = poly * t - 0.356563782f;
  poly = poly * t + 0.319381530f;
  poly = poly * t;
  const float pdf = 0.3989422804014327f * ExpNonPositive(-0.5f * a * a);
  const float tail = pdf * poly;  // 1 - Phi(|z|)
  *cdf = z < 0.0f ? tail : 1.0f - tail;
  *density = pdf;
}

template <bool kDropout>
TFR_INLINE
void ForwardRow(const float* __restrict h, const float* __restrict bias, float* __restrict y,
                int64_t columns, uint64_t row_key, uint32_t threshold, float scale) {
  const uint32_t lo = static_cast<uint32_t>(row_key);
  const uint32_t hi = static_cast<uint32_t>(row_key >> 32);
  for (int64_t c = 0; c < columns; ++c) {
    const float z = h[c] + bias[c];
    float cdf, density;
    NormalCdfAndDensity(z, &cdf, &density);
    const float gelu = z * cdf;
    if (kDropout) {
      const bool keep = ElementBits(lo, hi, static_cast<uint32_t>(c)) >= threshold;
      y[c] = keep ? gelu * scale : 0.0f;
    } else {
      y[c] = gelu;
    }
  }
}

template <bool kDropout>
TFR_INLINE
void BackwardRow(const float* __restrict dy, const float* __restrict h,
                 const float* __restrict bias, float* __restrict dh,
                 float* __restrict dbias_partial, int64_t columns, uint64_t row_key,
                 uint32_t threshold, float scale) {
  const uint32_t lo = static_cast<uint32_t>(row_key);
  const uint32_t hi = static_cast<uint32_t>(row_key >> 32);
  for (int64_t c = 0; c < columns; ++c) {
    const float z = h[c] + bias[c];
    float cdf, density;
    NormalCdfAndDensity(z, &cdf, &density);
    float grad = dy[c] * (cdf + z * density);
    if (kDropout) {
      const bool keep = ElementBits(lo, hi, static_cast<uint32_t>(c)) >= threshold;
      grad = keep ? grad * scale : 0.0f;
    }
    dh[c] = grad;
    dbias_partial[c] += grad;
  }
}

TFR_CLONES void ForwardRows(const float* h, const float* bias, float* y, int64_t begin,
                            int64_t end, int64_t columns, int64_t key, uint32_t threshold,
                            float scale) {
  for (int64_t r = begin; r < end; ++r) {
    const uint64_t row_key = RowKey(key, r);
    if (threshold == 0) {
      ForwardRow<false>(h + r * columns, bias, y + r * columns, columns, row_key, threshold,
                        scale);
    } else {
      ForwardRow<true>(h + r * columns, bias, y + r * columns, columns, row_key, threshold,
                       scale);
    }
  }
}

TFR_CLONES void BackwardRows(const float* dy, const float* h, const float* bias, float* dh,
                             float* dbias_partial, int64_t begin, int64_t end, int64_t columns,
                             int64_t key, uint32_t threshold, float scale) {
  for (int64_t c = 0; c < columns; ++c) dbias_partial[c] = 0.0f;
  for (int64_t r = begin; r < end; ++r) {
    const uint64_t row_key = RowKey(key, r);
    const int64_t offset = r * columns;
    if (threshold == 0) {
      BackwardRow<false>(dy + offset, h + offset, bias, dh + offset, dbias_partial, columns,
                         row_key, threshold, scale);
    } else {
      BackwardRow<true>(dy + offset, h + offset, bias, dh + offset, dbias_partial, columns,
                        row_key, threshold, scale);
    }
  }
}

// Dropout hashes flat element positions in chunks of this many elements (one
// key per chunk, the position within it as the column): long vectorised loops
// whatever the tensor's last dimension.
constexpr int64_t kDropoutChunk = 1024;

TFR_CLONES void DropoutChunks(const float* x, float* y, int64_t begin, int64_t end, int64_t size,
                              int64_t key, uint32_t threshold, float scale) {
  for (int64_t chunk = begin; chunk < end; ++chunk) {
    const uint64_t chunk_key = RowKey(key, chunk);
    const uint32_t lo = static_cast<uint32_t>(chunk_key);
    const uint32_t hi = static_cast<uint32_t>(chunk_key >> 32);
    const int64_t start = chunk * kDropoutChunk;
    const int64_t count = std::min(kDropoutChunk, size - start);
    const float* __restrict in = x + start;
    float* __restrict out = y + start;
    for (int64_t c = 0; c < count; ++c) {
      const bool keep = ElementBits(lo, hi, static_cast<uint32_t>(c)) >= threshold;
      out[c] = keep ? in[c] * scale : 0.0f;
    }
  }
}

Status MatrixAndBiasShapes(InferenceContext* c, int h_index) {
  ShapeHandle h, bias, key;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(h_index), 2, &h));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(h_index + 1), 1, &bias));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(h_index + 2), 0, &key));
  DimensionHandle columns;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(h, 1), c->Dim(bias, 0), &columns));
  return ::tensorflow::OkStatus();
}

REGISTER_OP("TfrBiasGeluDropout")
    .Input("h: float")
    .Input("bias: float")
    .Input("key: int64")
    .Output("y: float")
    .Attr("rate: float")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(MatrixAndBiasShapes(c, 0));
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    })
    .Doc("y = gelu(h + bias) * keep / (1 - rate); keep is a hash of (key, row, column).");

REGISTER_OP("TfrBiasGeluDropoutGrad")
    .Input("dy: float")
    .Input("h: float")
    .Input("bias: float")
    .Input("key: int64")
    .Output("dh: float")
    .Output("dbias: float")
    .Attr("rate: float")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(MatrixAndBiasShapes(c, 1));
      ShapeHandle dy;
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(1), &dy));
      c->set_output(0, dy);
      c->set_output(1, c->input(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("Gradients of TfrBiasGeluDropout with respect to h and bias.");

REGISTER_OP("TfrDropout")
    .Input("x: float")
    .Input("key: int64")
    .Output("y: float")
    .Attr("rate: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle key;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &key));
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    })
    .Doc("Inverted dropout, y = x * keep / (1 - rate); keep is a hash of (key, position).");

class DropoutKernelBase : public OpKernel {
 public:
  explicit DropoutKernelBase(OpKernelConstruction* context) : OpKernel(context) {
    float rate;
    OP_REQUIRES_OK(context, context->GetAttr("rate", &rate));
    OP_REQUIRES(context, rate >= 0.0f && rate < 1.0f,
                InvalidArgument("`rate` must lie in [0, 1), got ", rate));
    threshold_ = KeepThreshold(rate);
    scale_ = threshold_ == 0 ? 1.0f : static_cast<float>(1.0 / (1.0 - rate));
  }

 protected:
  // Checks h [N, M], bias [M] and the scalar key.
  void CheckInputs(OpKernelContext* context, const Tensor& h, const Tensor& bias,
                   const Tensor& key) {
    OP_REQUIRES(context, TensorShapeUtils::IsMatrix(h.shape()),
                InvalidArgument("`h` must be a matrix, got shape ", h.shape().DebugString()));
    OP_REQUIRES(context,
                TensorShapeUtils::IsVector(bias.shape()) && bias.dim_size(0) == h.dim_size(1),
                InvalidArgument("`bias` must have shape [", h.dim_size(1), "], got ",
                                bias.shape().DebugString()));
    OP_REQUIRES(context, TensorShapeUtils::IsScalar(key.shape()),
                InvalidArgument("`key` must be a scalar, got shape ", key.shape().DebugString()));
  }

  uint32_t threshold_;
  float scale_;
};

class BiasGeluDropoutOp : public DropoutKernelBase {
 public:
  using DropoutKernelBase::DropoutKernelBase;

  void Compute(OpKernelContext* context) override {
    const Tensor& h = context->input(0);
    const Tensor& bias = context->input(1);
    const Tensor& key_tensor = context->input(2);
    CheckInputs(context, h, bias, key_tensor);
    if (!context->status().ok()) return;
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, h.shape(), &y));
    const int64_t rows = h.dim_size(0);
    const int64_t columns = h.dim_size(1);
    if (rows == 0 || columns == 0) return;
    const float* h_data = h.flat<float>().data();
    const float* bias_data = bias.flat<float>().data();
    float* y_data = y->flat<float>().data();
    const int64_t key = key_tensor.scalar<int64_t>()();
    const uint32_t threshold = threshold_;
    const float scale = scale_;
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(rows, columns * 40, [=](int64_t begin, int64_t end) {
      ForwardRows(h_data, bias_data, y_data, begin, end, columns, key, threshold, scale);
    });
  }
};

class BiasGeluDropoutGradOp : public DropoutKernelBase {
 public:
  using DropoutKernelBase::DropoutKernelBase;

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& h = context->input(1);
    const Tensor& bias = context->input(2);
    const Tensor& key_tensor = context->input(3);
    CheckInputs(context, h, bias, key_tensor);
    if (!context->status().ok()) return;
    OP_REQUIRES(context, dy.shape() == h.shape(),
                InvalidArgument("`dy` and `h` differ in shape: ", dy.shape().DebugString(),
                                " and ", h.shape().DebugString()));
    Tensor* dh = nullptr;
    Tensor* dbias = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, h.shape(), &dh));
    OP_REQUIRES_OK(context, context->allocate_output(1, bias.shape(), &dbias));
    const int64_t rows = h.dim_size(0);
    const int64_t columns = h.dim_size(1);
    float* dbias_data = dbias->flat<float>().data();
    for (int64_t c = 0; c < columns; ++c) dbias_data[c] = 0.0f;
    if (rows == 0 || columns == 0) return;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    std::vector<float> partial(static_cast<size_t>(blocks * columns));
    const float* dy_data = dy.flat<float>().data();
    const float* h_data = h.flat<float>().data();
    const float* bias_data = bias.flat<float>().data();
    float* dh_data = dh->flat<float>().data();
    float* partial_data = partial.data();
    const int64_t key = key_tensor.scalar<int64_t>()();
    const uint32_t threshold = threshold_;
    const float scale = scale_;
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(
        blocks, kRowsPerBlock * columns * 45, [=](int64_t first_block, int64_t end_block) {
          for (int64_t block = first_block; block < end_block; ++block) {
            const int64_t begin = block * kRowsPerBlock;
            const int64_t end = std::min(rows, begin + kRowsPerBlock);
            BackwardRows(dy_data, h_data, bias_data, dh_data, partial_data + block * columns,
                         begin, end, columns, key, threshold, scale);
          }
        });
    for (int64_t block = 0; block < blocks; ++block) {
      const float* block_sums = partial_data + block * columns;
      for (int64_t c = 0; c < columns; ++c) dbias_data[c] += block_sums[c];
    }
  }
};

class DropoutOp : public DropoutKernelBase {
 public:
  using DropoutKernelBase::DropoutKernelBase;

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& key_tensor = context->input(1);
    OP_REQUIRES(context, TensorShapeUtils::IsScalar(key_tensor.shape()),
                InvalidArgument("`key` must be a scalar, got shape ",
                                key_tensor.shape().DebugString()));
    if (threshold_ == 0) {  // rate 0: the input itself
      context->set_output(0, x);
      return;
    }
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const int64_t size = x.NumElements();
    if (size == 0) return;
    const int64_t chunks = (size + kDropoutChunk - 1) / kDropoutChunk;
    const float* x_data = x.flat<float>().data();
    float* y_data = y->flat<float>().data();
    const int64_t key = key_tensor.scalar<int64_t>()();
    const uint32_t threshold = threshold_;
    const float scale = scale_;
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(chunks, kDropoutChunk * 8, [=](int64_t begin, int64_t end) {
      DropoutChunks(x_data, y_data, begin, end, size, key, threshold, scale);
    });
  }
};

REGISTER_KERNEL_BUILDER(Name("TfrDropout").Device(DEVICE_CPU), DropoutOp);
REGISTER_KERNEL_BUILDER(Name("TfrBiasGeluDropout").Device(DEVICE_CPU), BiasGeluDropoutOp);
REGISTER_KERNEL_BUILDER(Name("TfrBiasGeluDropoutGrad").Device(DEVICE_CPU), BiasGeluDropoutGradOp);

// ---------------------------------------------------------------------------
// Layer normalisation over the last dimension, as Keras's LayerNormalization
// computes it: y = (x - mean) / sqrt(var + epsilon) * gamma + beta, with the
// population variance. The gradient recomputes each row's mean and variance.
//
// TfrLayerNorm:     y
// TfrLayerNormGrad: dx, dgamma = sum_rows dy * xhat, dbeta = sum_rows dy

// Rows per block of the dgamma and dbeta partial sums: a function of the width
// only, so the sums do not depend on threads.
int64_t LayerNormRowsPerBlock(int64_t columns) {
  return std::max<int64_t>(16, 8192 / std::max<int64_t>(columns, 1));
}

// Rows are narrow (the model's width is the feature count, e.g. 46), so they are
// copied into buffers padded with zeros to a multiple of kLanes and processed
// in whole blocks of kLanes: no scalar remainder loops, and sums taken lane by
// lane, then over the lanes in a fixed order.
constexpr int64_t kLanes = 16;

int64_t PaddedWidth(int64_t columns) { return (columns + kLanes - 1) / kLanes * kLanes; }

// A parameter vector padded with zeros.
std::vector<float> Padded(const float* values, int64_t columns) {
  std::vector<float> padded(static_cast<size_t>(PaddedWidth(columns)), 0.0f);
  std::copy(values, values + columns, padded.begin());
  return padded;
}

// 1 for the columns of a padded row, 0 for its padding.
std::vector<float> ValidLanes(int64_t columns) {
  std::vector<float> valid(static_cast<size_t>(PaddedWidth(columns)), 0.0f);
  std::fill(valid.begin(), valid.begin() + columns, 1.0f);
  return valid;
}

// The sum of kLanes partial sums, pairwise (a short dependency chain, fixed order).
TFR_INLINE float LaneSum(float* __restrict lanes) {
  for (int64_t half = kLanes / 2; half > 0; half /= 2)
    for (int64_t j = 0; j < half; ++j) lanes[j] += lanes[j + half];
  return lanes[0];
}

TFR_INLINE float PaddedSum(const float* __restrict v, int64_t padded) {
  float lanes[kLanes] = {};
  for (int64_t c = 0; c < padded; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += v[c + j];
  return LaneSum(lanes);
}

TFR_INLINE float PaddedDot(const float* __restrict u, const float* __restrict v, int64_t padded) {
  float lanes[kLanes] = {};
  for (int64_t c = 0; c < padded; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += u[c + j] * v[c + j];
  return LaneSum(lanes);
}

// Centres a padded row (its padding stays 0) and returns 1 / sqrt(var + epsilon).
TFR_INLINE float CentreRow(const float* __restrict row, const float* __restrict valid,
                           float* __restrict centred, int64_t columns, int64_t padded,
                           float epsilon) {
  const float mean = PaddedSum(row, padded) / static_cast<float>(columns);
  for (int64_t c = 0; c < padded; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) centred[c + j] = (row[c + j] - mean) * valid[c + j];
  const float variance = PaddedDot(centred, centred, padded) / static_cast<float>(columns);
  return 1.0f / std::sqrt(variance + epsilon);
}

// The buffers of one thread's rows: row, centred, result, upstream.
struct RowBuffers {
  explicit RowBuffers(int64_t padded) : data(static_cast<size_t>(4 * padded), 0.0f) {}
  float* part(int i, int64_t padded) { return data.data() + i * padded; }
  std::vector<float> data;
};

TFR_CLONES void LayerNormRows(const float* x, const float* gamma, const float* beta,
                              const float* valid, float* y, int64_t begin, int64_t end,
                              int64_t columns, float epsilon) {
  const int64_t padded = PaddedWidth(columns);
  RowBuffers buffers(padded);
  float* __restrict row = buffers.part(0, padded);
  float* __restrict centred = buffers.part(1, padded);
  float* __restrict result = buffers.part(2, padded);
  const size_t bytes = static_cast<size_t>(columns) * sizeof(float);
  for (int64_t r = begin; r < end; ++r) {
    std::memcpy(row, x + r * columns, bytes);
    const float rstd = CentreRow(row, valid, centred, columns, padded, epsilon);
    for (int64_t c = 0; c < padded; c += kLanes)
      for (int64_t j = 0; j < kLanes; ++j)
        result[c + j] = centred[c + j] * rstd * gamma[c + j] + beta[c + j];
    std::memcpy(y + r * columns, result, bytes);
  }
}

// Adds this block's rows' dgamma and dbeta terms to the padded partial sums.
TFR_CLONES void LayerNormGradRows(const float* dy, const float* x, const float* gamma,
                                  const float* valid, float* dx, float* dgamma_partial,
                                  float* dbeta_partial, int64_t begin, int64_t end,
                                  int64_t columns, float epsilon) {
  const int64_t padded = PaddedWidth(columns);
  RowBuffers buffers(padded);
  float* __restrict row = buffers.part(0, padded);
  float* __restrict centred = buffers.part(1, padded);
  float* __restrict result = buffers.part(2, padded);
  float* __restrict upstream = buffers.part(3, padded);
  float* __restrict dgamma = dgamma_partial;
  float* __restrict dbeta = dbeta_partial;
  const size_t bytes = static_cast<size_t>(columns) * sizeof(float);
  const float inverse_columns = 1.0f / static_cast<float>(columns);
  for (int64_t r = begin; r < end; ++r) {
    std::memcpy(row, x + r * columns, bytes);
    std::memcpy(upstream, dy + r * columns, bytes);
    const float rstd = CentreRow(row, valid, centred, columns, padded, epsilon);
    // With xhat = centred * rstd and dxhat = upstream * gamma (0 in the padding):
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    float sum_dxhat_lanes[kLanes] = {};
    float sum_dxhat_xhat_lanes[kLanes] = {};
    for (int64_t c = 0; c < padded; c += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) {
        const float dxhat = upstream[c + j] * gamma[c + j];
        sum_dxhat_lanes[j] += dxhat;
        sum_dxhat_xhat_lanes[j] += dxhat * centred[c + j];
      }
    }
    const float mean_dxhat = LaneSum(sum_dxhat_lanes) * inverse_columns;
    const float mean_dxhat_xhat = LaneSum(sum_dxhat_xhat_lanes) * rstd * inverse_columns;
    for (int64_t c = 0; c < padded; c += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) {
        const float xhat = centred[c + j] * rstd;
        const float dxhat = upstream[c + j] * gamma[c + j];
        result[c + j] = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
        dgamma[c + j] += upstream[c + j] * xhat;
        dbeta[c + j] += upstream[c + j];
      }
    }
    std::memcpy(dx + r * columns, result, bytes);
  }
}

Status LayerNormShapes(InferenceContext* c, int x_index) {
  ShapeHandle x, gamma;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(x_index), 1, &x));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(x_index + 1), 1, &gamma));
  DimensionHandle columns;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(x, -1), c->Dim(gamma, 0), &columns));
  return ::tensorflow::OkStatus();
}

REGISTER_OP("TfrLayerNorm")
    .Input("x: float")
    .Input("gamma: float")
    .Input("beta: float")
    .Output("y: float")
    .Attr("epsilon: float")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(LayerNormShapes(c, 0));
      ShapeHandle beta;
      TF_RETURN_IF_ERROR(c->Merge(c->input(1), c->input(2), &beta));
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    })
    .Doc("Layer normalisation over the last dimension with scale gamma and offset beta.");

REGISTER_OP("TfrLayerNormGrad")
    .Input("dy: float")
    .Input("x: float")
    .Input("gamma: float")
    .Output("dx: float")
    .Output("dgamma: float")
    .Output("dbeta: float")
    .Attr("epsilon: float")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(LayerNormShapes(c, 1));
      ShapeHandle dy;
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(1), &dy));
      c->set_output(0, dy);
      c->set_output(1, c->input(2));
      c->set_output(2, c->input(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("Gradients of TfrLayerNorm with respect to x, gamma and beta.");

class LayerNormKernelBase : public OpKernel {
 public:
  explicit LayerNormKernelBase(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("epsilon", &epsilon_));
    OP_REQUIRES(context, epsilon_ > 0.0f,
                InvalidArgument("`epsilon` must be positive, got ", epsilon_));
  }

 protected:
  // Checks x [..., D] and a vector parameter of size D.
  void CheckInputs(OpKernelContext* context, const Tensor& x, const Tensor& parameter) {
    OP_REQUIRES(context, x.dims() >= 1,
                InvalidArgument("`x` must have at least one dimension, got a scalar"));
    OP_REQUIRES(context,
                TensorShapeUtils::IsVector(parameter.shape()) &&
                    parameter.dim_size(0) == x.dim_size(x.dims() - 1),
                InvalidArgument("`gamma` and `beta` must have shape [", x.dim_size(x.dims() - 1),
                                "], got ", parameter.shape().DebugString()));
  }

  float epsilon_;
};

class LayerNormOp : public LayerNormKernelBase {
 public:
  using LayerNormKernelBase::LayerNormKernelBase;

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& gamma = context->input(1);
    const Tensor& beta = context->input(2);
    CheckInputs(context, x, gamma);
    if (!context->status().ok()) return;
    CheckInputs(context, x, beta);
    if (!context->status().ok()) return;
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const int64_t columns = x.dim_size(x.dims() - 1);
    if (x.NumElements() == 0) return;
    const int64_t rows = x.NumElements() / columns;
    const float* x_data = x.flat<float>().data();
    const std::vector<float> gamma_padded = Padded(gamma.flat<float>().data(), columns);
    const std::vector<float> beta_padded = Padded(beta.flat<float>().data(), columns);
    const std::vector<float> valid = ValidLanes(columns);
    const float* gamma_data = gamma_padded.data();
    const float* beta_data = beta_padded.data();
    const float* valid_data = valid.data();
    float* y_data = y->flat<float>().data();
    const float epsilon = epsilon_;
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(rows, columns * 8 + 40, [=](int64_t begin, int64_t end) {
      LayerNormRows(x_data, gamma_data, beta_data, valid_data, y_data, begin, end, columns,
                    epsilon);
    });
  }
};

class LayerNormGradOp : public LayerNormKernelBase {
 public:
  using LayerNormKernelBase::LayerNormKernelBase;

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    const Tensor& gamma = context->input(2);
    CheckInputs(context, x, gamma);
    if (!context->status().ok()) return;
    OP_REQUIRES(context, dy.shape() == x.shape(),
                InvalidArgument("`dy` and `x` differ in shape: ", dy.shape().DebugString(),
                                " and ", x.shape().DebugString()));
    Tensor* dx = nullptr;
    Tensor* dgamma = nullptr;
    Tensor* dbeta = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context, context->allocate_output(1, gamma.shape(), &dgamma));
    OP_REQUIRES_OK(context, context->allocate_output(2, gamma.shape(), &dbeta));
    const int64_t columns = x.dim_size(x.dims() - 1);
    float* dgamma_data = dgamma->flat<float>().data();
    float* dbeta_data = dbeta->flat<float>().data();
    for (int64_t c = 0; c < columns; ++c) dgamma_data[c] = dbeta_data[c] = 0.0f;
    if (x.NumElements() == 0) return;
    const int64_t rows = x.NumElements() / columns;
    const int64_t block_rows = LayerNormRowsPerBlock(columns);
    const int64_t blocks = (rows + block_rows - 1) / block_rows;
    // Per block: dgamma's partial sums, then dbeta's, each padded.
    const int64_t padded = PaddedWidth(columns);
    std::vector<float> partial(static_cast<size_t>(blocks * 2 * padded), 0.0f);
    const std::vector<float> gamma_padded = Padded(gamma.flat<float>().data(), columns);
    const std::vector<float> valid = ValidLanes(columns);
    const float* dy_data = dy.flat<float>().data();
    const float* x_data = x.flat<float>().data();
    const float* gamma_data = gamma_padded.data();
    const float* valid_data = valid.data();
    float* dx_data = dx->flat<float>().data();
    float* partial_data = partial.data();
    const float epsilon = epsilon_;
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(
        blocks, block_rows * (columns * 16 + 40), [=](int64_t first_block, int64_t end_block) {
          for (int64_t block = first_block; block < end_block; ++block) {
            const int64_t begin = block * block_rows;
            const int64_t end = std::min(rows, begin + block_rows);
            float* sums = partial_data + block * 2 * padded;
            LayerNormGradRows(dy_data, x_data, gamma_data, valid_data, dx_data, sums,
                              sums + padded, begin, end, columns, epsilon);
          }
        });
    for (int64_t block = 0; block < blocks; ++block) {
      const float* sums = partial_data + block * 2 * padded;
      for (int64_t c = 0; c < columns; ++c) {
        dgamma_data[c] += sums[c];
        dbeta_data[c] += sums[padded + c];
      }
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("TfrLayerNorm").Device(DEVICE_CPU), LayerNormOp);
REGISTER_KERNEL_BUILDER(Name("TfrLayerNormGrad").Device(DEVICE_CPU), LayerNormGradOp);

}  // namespace
}  // namespace tfr_rankformer
