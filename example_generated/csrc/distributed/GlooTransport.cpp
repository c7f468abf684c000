// The host transport over Gloo: PyTorch's own Gloo process group, given CPU tensors that view the
// staged host buffers.
//
// torch ships Gloo compiled into libtorch but not its headers, so this file drives Gloo through the
// c10d::Backend interface of a ProcessGroupGloo that Python created (torch_foo/distributed.py);
// each call starts Gloo's work and waits for it, so Gloo's errors (a peer that left, the group's
// timeout) surface here as exceptions. The c10d headers include all of ATen: this is one of the two
// files that pay for them (Backend.cpp is the other).
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <numeric>
#include <utility>

#include "Transport.h"

namespace torch_foo::distributed {
namespace {

at::Tensor host_view(const void* data, size_t count, c10::ScalarType dtype) {
  return at::from_blob(
      const_cast<void*>(data), {static_cast<int64_t>(count)}, at::TensorOptions().dtype(dtype).device(at::kCPU));
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Product: return c10d::ReduceOp::PRODUCT;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::BitwiseAnd: return c10d::ReduceOp::BAND;
    case ReduceOp::BitwiseOr: return c10d::ReduceOp::BOR;
    case ReduceOp::BitwiseXor: return c10d::ReduceOp::BXOR;
  }
  TORCH_CHECK(false, "unknown reduce op ", static_cast<int>(op));
}

at::Tensor bytes_view(const void* data, size_t bytes) {
  return host_view(data, bytes, c10::ScalarType::Byte);
}

class GlooTransport final : public Transport {
 public:
  explicit GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo) : gloo_(std::move(gloo)) {}

  int rank() const override {
    return gloo_->getRank();
  }

  int size() const override {
    return gloo_->getSize();
  }

  void all_reduce(void* data, size_t count, c10::ScalarType dtype, ReduceOp op) override {
    std::vector<at::Tensor> tensors{host_view(data, count, dtype)};
    c10d::AllreduceOptions options;
    options.reduceOp = to_c10d(op);
    gloo_->allreduce(tensors, options)->wait();
  }

  void reduce(void* data, size_t count, c10::ScalarType dtype, ReduceOp op, int root) override {
    std::vector<at::Tensor> tensors{host_view(data, count, dtype)};
    c10d::ReduceOptions options;
    options.reduceOp = to_c10d(op);
    options.rootRank = root;
    gloo_->reduce(tensors, options)->wait();
  }

  void reduce_scatter(const void* send, void* recv, size_t count, c10::ScalarType dtype, ReduceOp op) override {
    at::Tensor input = host_view(send, count * size(), dtype);
    at::Tensor output = host_view(recv, count, dtype);
    c10d::ReduceScatterOptions options;
    options.reduceOp = to_c10d(op);
    gloo_->_reduce_scatter_base(output, input, options)->wait();
  }

  void broadcast(void* data, size_t bytes, int root) override {
    std::vector<at::Tensor> tensors{bytes_view(data, bytes)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    gloo_->broadcast(tensors, options)->wait();
  }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    at::Tensor input = bytes_view(send, bytes);
    at::Tensor output = bytes_view(recv, bytes * size());
    gloo_->_allgather_base(output, input)->wait();
  }

  void all_to_all(
      const void* send,
      const std::vector<size_t>& send_bytes,
      void* recv,
      const std::vector<size_t>& recv_bytes) override {
    std::vector<int64_t> input_splits(send_bytes.begin(), send_bytes.end());
    std::vector<int64_t> output_splits(recv_bytes.begin(), recv_bytes.end());
    at::Tensor input = bytes_view(send, std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0}));
    at::Tensor output = bytes_view(recv, std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0}));
    gloo_->alltoall_base(output, input, output_splits, input_splits)->wait();
  }

  void gather(const void* send, void* recv, size_t bytes, int root) override {
    std::vector<at::Tensor> inputs{bytes_view(send, bytes)};
    std::vector<std::vector<at::Tensor>> outputs;
    if (rank() == root) {
      outputs.push_back(parts(recv, bytes));
    }
    c10d::GatherOptions options;
    options.rootRank = root;
    gloo_->gather(outputs, inputs, options)->wait();
  }

  void scatter(const void* send, void* recv, size_t bytes, int root) override {
    std::vector<at::Tensor> outputs{bytes_view(recv, bytes)};
    std::vector<std::vector<at::Tensor>> inputs;
    if (rank() == root) {
      inputs.push_back(parts(send, bytes));
    }
    c10d::ScatterOptions options;
    options.rootRank = root;
    gloo_->scatter(outputs, inputs, options)->wait();
  }

  void send(const void* data, size_t bytes, int peer, int tag) override {
    std::vector<at::Tensor> tensors{bytes_view(data, bytes)};
    gloo_->send(tensors, peer, tag)->wait();
  }

  void recv(void* data, size_t bytes, int peer, int tag) override {
    std::vector<at::Tensor> tensors{bytes_view(data, bytes)};
    gloo_->recv(tensors, peer, tag)->wait();
  }

  void barrier() override {
    gloo_->barrier()->wait();
  }

 private:
  // `bytes` bytes for each rank at `data`, as one tensor per rank.
  std::vector<at::Tensor> parts(const void* data, size_t bytes) const {
    const at::Tensor whole = bytes_view(data, bytes * size());
    std::vector<at::Tensor> views;
    for (int i = 0; i < size(); ++i) {
      views.push_back(whole.narrow(0, static_cast<int64_t>(i * bytes), static_cast<int64_t>(bytes)));
    }
    return views;
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
};

} // namespace

std::shared_ptr<Transport> make_gloo_transport(c10::intrusive_ptr<c10d::Backend> gloo) {
  TORCH_CHECK(gloo, "make_gloo_transport: expected a Gloo process group");
  return std::make_shared<GlooTransport>(std::move(gloo));
}

} // namespace torch_foo::distributed
