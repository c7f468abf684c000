// The fooccl process-group backend: torch.distributed's collectives on foo tensors.
//
// torch.distributed calls a c10d::Backend for each collective on tensors of the device types it was
// registered for (torch_foo/distributed.py registers this one for "foo" and "cpu"). For
// device tensors this backend checks the arguments (one device per process, dtypes, sizes, layouts),
// turns each collective into Communicator calls (Communicator.h: the seam where a vendor's collective
// library goes), adds what a library lacks (ReduceOp.AVG and PREMUL_SUM as SUM and a scaling kernel,
// list-of-tensor variants through one flat buffer) and returns a Work (Work.h). CPU tensors go to a
// Gloo process group unchanged, as with "cpu:gloo".
//
// Group.h keeps the group's state in this process and issues the calls (streams, Works, the
// watchdog); Arguments.h has the checks, Staging.h the flat buffers; Work.h the Work objects.
//
// This file and GlooTransport.cpp include the c10d headers, which include all of ATen.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <mutex>
#include <optional>
#include <tuple>

#include "Arguments.h"
#include "Bindings.h"
#include "Communicator.h"
#include "Group.h"
#include "Staging.h"
#include "Transport.h"
#include "Work.h"

namespace torch_foo::distributed {
namespace {

// CPU tensors go to the host Gloo group as new tensor objects over the same memory. Gloo's worker
// thread drops its references to a finished operation's tensors after it has woken the caller; the
// last reference to a tensor that Python owns releases its Python object, which needs the
// interpreter, and an interpreter already shutting down (a script that ends right after a
// collective) ends that thread inside the destructor: the process aborted at exit ("terminate
// called without an active exception"). A detached tensor has no Python object to release.
at::Tensor unowned(const at::Tensor& t) {
  return t.detach();
}

std::vector<at::Tensor> unowned(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> result;
  result.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    result.push_back(unowned(t));
  }
  return result;
}

std::vector<std::vector<at::Tensor>> unowned(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> result;
  result.reserve(lists.size());
  for (const auto& list : lists) {
    result.push_back(unowned(list));
  }
  return result;
}

class CclBackend final : public c10d::Backend {
 public:
  CclBackend(
      int rank,
      int size,
      std::chrono::milliseconds timeout,
      CommunicatorFactory factory,
      c10::intrusive_ptr<c10d::Backend> host)
      : c10d::Backend(rank, size),
        args_(rank, size),
        host_(std::move(host)),
        group_(rank, timeout, std::move(factory)) {
    init();
  }

  const std::string getBackendName() const override {
    return kName;
  }

  bool supportsCoalescing() const override {
    return true;
  }

  void setTimeout(std::chrono::milliseconds timeout) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    group_.set_timeout(timeout);
    host_->setTimeout(timeout);
  }

  void eagerConnectSingleDevice(at::Device device) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    group_.bind(device, getBoundDeviceId());
  }

  void startCoalescing() override {
    const std::lock_guard<std::mutex> lock(mutex_);
    group_.start_coalescing();
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return group_.end_coalescing(getBoundDeviceId());
  }

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return allreduce_coalesced_as(
        tensors, opts.reduceOp, opts.timeout, c10d::OpType::ALLREDUCE, "all_reduce", [&](c10d::Backend& gloo, auto& t) {
          return gloo.allreduce(t, opts);
        });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce_coalesced_as(
        tensors,
        opts.reduceOp,
        opts.timeout,
        c10d::OpType::ALLREDUCE_COALESCED,
        "all_reduce_coalesced",
        [&](c10d::Backend& gloo, auto& t) { return gloo.allreduce_coalesced(t, opts); });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work =
            if_on_host(tensors, [&](c10d::Backend& gloo, auto& t) { return gloo.broadcast(t, opts); }, tensors)) {
      return work;
    }
    const at::Tensor& t = args_.single(tensors, "broadcast", /*elementwise=*/true);
    args_.check_root(opts.rootRank, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, kName, ": broadcast takes one tensor per process (rootTensor must be 0)");
    auto work = open(c10d::OpType::BROADCAST, "broadcast", t.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), {t});
    const Flat f = flat(t);
    group_.call(*work, [&](Done done) {
      group_.comm().broadcast(
          f.data, f.count, f.dtype, static_cast<int>(opts.rootRank), group_.collective_stream(), std::move(done));
    });
    work->add_outputs({t});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(tensors, [&](c10d::Backend& gloo, auto& t) { return gloo.reduce(t, opts); }, tensors)) {
      return work;
    }
    at::Tensor t = args_.single(tensors, "reduce", /*elementwise=*/true);
    args_.check_root(opts.rootRank, "reduce");
    const Reduction r = reduction(opts.reduceOp, t.scalar_type(), size_, "reduce");
    const bool is_root = opts.rootRank == rank_;
    auto work = open(c10d::OpType::REDUCE, "reduce", t.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), {t});
    const Flat f = flat(t);
    group_.call(*work, [&](Done done) {
      group_.comm().reduce(
          f.data,
          is_root ? f.data : nullptr,
          f.count,
          f.dtype,
          r.op,
          static_cast<int>(opts.rootRank),
          group_.collective_stream(),
          std::move(done));
    });
    if (is_root) {
      on_stream(group_.collective_stream(), [&] { finish_reduction(r, t); });
    }
    work->add_outputs({t});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return allgather_coalesced_as(outputs, inputs, opts, c10d::OpType::ALLGATHER, "all_gather");
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return allgather_coalesced_as(
        output_lists, inputs, opts, c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced");
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> outputs{output};
    std::vector<at::Tensor> inputs{input};
    return allgather_into_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor");
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override {
    return allgather_into_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced");
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(
            outputs,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.reduce_scatter(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs)) {
      return work;
    }
    at::Tensor out = args_.single(outputs, "reduce_scatter", /*elementwise=*/false);
    TORCH_CHECK(inputs.size() == 1, kName, ": reduce_scatter takes one input list per process");
    args_.check_list(inputs[0], out, "reduce_scatter", "input");
    const Reduction r = reduction(opts.reduceOp, out.scalar_type(), size_, "reduce_scatter");
    auto work = open(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", out.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), inputs[0]);
    group_.use(*work, group_.collective_stream(), {out});
    const at::Tensor staged = on_stream(group_.collective_stream(), [&] { return concatenated(inputs[0]); });
    enqueue_reduce_scatter(*work, out, staged, r);
    work->add_outputs({out});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outputs{output};
    std::vector<at::Tensor> inputs{input};
    return reduce_scatter_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor");
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced");
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(
            {output, input},
            [&](c10d::Backend& gloo, auto& host_output, auto& host_input) {
              return gloo.alltoall_base(host_output, host_input, output_splits, input_splits, opts);
            },
            output,
            input)) {
      return work;
    }
    args_.check_pair(output, input, "all_to_all_single");
    const std::vector<size_t> send_counts = args_.split_counts(input, input_splits, "input");
    const std::vector<size_t> recv_counts = args_.split_counts(output, output_splits, "output");
    auto work = open(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", output.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), {input, output});
    const Flat in = flat(input);
    const Flat out = flat(output);
    const size_t per = input.is_complex() ? 2 : 1;
    std::vector<size_t> send = send_counts;
    std::vector<size_t> recv = recv_counts;
    for (size_t i = 0; i < send.size(); ++i) {
      send[i] *= per;
      recv[i] *= per;
    }
    group_.call(*work, [&](Done done) {
      group_.comm().all_to_all(in.data, send, out.data, recv, in.dtype, group_.collective_stream(), std::move(done));
    });
    work->add_outputs({output});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(
            outputs,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.alltoall(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs)) {
      return work;
    }
    TORCH_CHECK(
        inputs.size() == static_cast<size_t>(size_) && outputs.size() == inputs.size(),
        kName,
        ": all_to_all takes one input and one output tensor per rank (",
        size_,
        "), got ",
        inputs.size(),
        " and ",
        outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      args_.check_pair(outputs[i], inputs[0], "all_to_all");
      args_.check_pair(inputs[i], inputs[0], "all_to_all");
    }
    auto work = open(c10d::OpType::ALLTOALL, "all_to_all", outputs[0].device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), inputs);
    group_.use(*work, group_.collective_stream(), outputs);
    std::vector<size_t> send;
    std::vector<size_t> recv;
    for (size_t i = 0; i < inputs.size(); ++i) {
      send.push_back(flat(inputs[i]).count);
      recv.push_back(flat(outputs[i]).count);
    }
    on_stream(group_.collective_stream(), [&] {
      const at::Tensor staged_in = concatenated(inputs);
      const at::Tensor staged_out = at::empty({args_.total_numel(outputs)}, outputs[0].options());
      const Flat in = flat(staged_in);
      const Flat out = flat(staged_out);
      group_.call(*work, [&](Done done) {
        group_.comm().all_to_all(in.data, send, out.data, recv, in.dtype, group_.collective_stream(), std::move(done));
      });
      split_into(staged_out, outputs);
    });
    work->add_outputs(outputs);
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(
            inputs,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.gather(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs)) {
      return work;
    }
    const at::Tensor& in = args_.single(inputs, "gather", /*elementwise=*/false);
    args_.check_root(opts.rootRank, "gather");
    const bool is_root = opts.rootRank == rank_;
    if (is_root) {
      TORCH_CHECK(outputs.size() == 1, kName, ": gather takes one output list on the root");
      args_.check_list(outputs[0], in, "gather", "output");
    }
    auto work = open(c10d::OpType::GATHER, "gather", in.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), {in});
    if (is_root) {
      group_.use(*work, group_.collective_stream(), outputs[0]);
    }
    on_stream(group_.collective_stream(), [&] {
      const at::Tensor staged = is_root ? at::empty({in.numel() * size_}, in.options()) : at::Tensor();
      const Flat f = flat(in);
      group_.call(*work, [&](Done done) {
        group_.comm().gather(
            f.data,
            is_root ? staged.data_ptr() : nullptr,
            f.count,
            f.dtype,
            static_cast<int>(opts.rootRank),
            group_.collective_stream(),
            std::move(done));
      });
      if (is_root) {
        split_into(staged, outputs[0]);
      }
    });
    if (is_root) {
      work->add_outputs(outputs[0]);
    }
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(
            outputs,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.scatter(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs)) {
      return work;
    }
    const at::Tensor& out = args_.single(outputs, "scatter", /*elementwise=*/false);
    args_.check_root(opts.rootRank, "scatter");
    const bool is_root = opts.rootRank == rank_;
    if (is_root) {
      TORCH_CHECK(inputs.size() == 1, kName, ": scatter takes one input list on the root");
      args_.check_list(inputs[0], out, "scatter", "input");
    }
    auto work = open(c10d::OpType::SCATTER, "scatter", out.device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), {out});
    if (is_root) {
      group_.use(*work, group_.collective_stream(), inputs[0]);
    }
    on_stream(group_.collective_stream(), [&] {
      const at::Tensor staged = is_root ? concatenated(inputs[0]) : at::Tensor();
      const Flat f = flat(out);
      group_.call(*work, [&](Done done) {
        group_.comm().scatter(
            is_root ? staged.data_ptr() : nullptr,
            f.data,
            f.count,
            f.dtype,
            static_cast<int>(opts.rootRank),
            group_.collective_stream(),
            std::move(done));
      });
    });
    work->add_outputs({out});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work =
            if_on_host(tensors, [&](c10d::Backend& gloo, auto& t) { return gloo.send(t, dst, tag); }, tensors)) {
      return work;
    }
    const at::Tensor& t = args_.single(tensors, "send", /*elementwise=*/false);
    args_.check_peer(dst, "send");
    auto work = open(c10d::OpType::SEND, "send", t.device(), c10d::kUnsetTimeout);
    group_.use(*work, group_.send_stream(), {t});
    const Flat f = flat(t);
    group_.call(*work, [&](Done done) {
      group_.comm().send(f.data, f.count, f.dtype, dst, tag, group_.send_stream(), std::move(done));
    });
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work =
            if_on_host(tensors, [&](c10d::Backend& gloo, auto& t) { return gloo.recv(t, src, tag); }, tensors)) {
      return work;
    }
    const at::Tensor& t = args_.single(tensors, "recv", /*elementwise=*/false);
    args_.check_peer(src, "recv");
    auto work = open(c10d::OpType::RECV, "recv", t.device(), c10d::kUnsetTimeout);
    group_.use(*work, group_.recv_stream(), {t});
    const Flat f = flat(t);
    group_.call(*work, [&](Done done) {
      group_.comm().recv(f.data, f.count, f.dtype, src, tag, group_.recv_stream(), std::move(done));
    });
    work->add_outputs({t});
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    TORCH_CHECK(false, kName, ": receiving from any source is not supported; name the sender (src=...)");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (opts.device && opts.device->is_cpu()) {
      return group_.host_call([&] { return host_->barrier(opts); });
    }
    const c10::Device device =
        opts.device && opts.device->has_index() ? *opts.device : group_.device(getBoundDeviceId());
    auto work = open(c10d::OpType::BARRIER, "barrier", device, opts.timeout);
    group_.use(*work, group_.collective_stream(), {});
    group_.call(*work, [&](Done done) { group_.comm().barrier(group_.collective_stream(), std::move(done)); });
    return group_.close(work);
  }

 private:
  // CPU tensors go to the host Gloo group: when `checked` are CPU tensors (Arguments::on_host, which
  // raises for a mix), the Work of host_call(gloo, unowned(tensors)...), run as the group runs host
  // calls; null for foo tensors, which the caller then handles.
  template <typename HostCall, typename... Tensors>
  c10::intrusive_ptr<c10d::Work> if_on_host(
      const std::vector<at::Tensor>& checked, const HostCall& host_call, const Tensors&... tensors) {
    if (!args_.on_host(checked)) {
      return {};
    }
    return group_.host_call([&] {
      auto held = std::make_tuple(unowned(tensors)...);
      return std::apply([&](auto&... host_tensors) { return host_call(*host_, host_tensors...); }, held);
    });
  }

  // ---- the variants that share an implementation ----

  template <typename HostCall>
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced_as(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOp& op,
      std::chrono::milliseconds timeout,
      c10d::OpType type,
      const char* call_name,
      HostCall&& host_call) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto work = if_on_host(tensors, host_call, tensors)) {
      return work;
    }
    TORCH_CHECK(!tensors.empty(), kName, ": ", call_name, " without tensors");
    if (type == c10d::OpType::ALLREDUCE) {
      args_.single(tensors, call_name, /*elementwise=*/true);
    }
    std::vector<Reduction> reductions;
    for (const at::Tensor& t : tensors) {
      args_.check_layout(t, call_name, /*elementwise=*/true);
      TORCH_CHECK(
          t.device() == tensors[0].device(),
          kName,
          ": ",
          call_name,
          ": tensors on ",
          tensors[0].device(),
          " and ",
          t.device());
      reductions.push_back(reduction(op, t.scalar_type(), size_, call_name));
    }
    auto work = open(type, call_name, tensors[0].device(), timeout);
    group_.use(*work, group_.collective_stream(), tensors);
    for (size_t i = 0; i < tensors.size(); ++i) {
      at::Tensor t = tensors[i];
      const Flat f = flat(t);
      const Reduction& r = reductions[i];
      group_.call(*work, [&](Done done) {
        group_.comm().all_reduce(f.data, f.data, f.count, f.dtype, r.op, group_.collective_stream(), std::move(done));
      });
      on_stream(group_.collective_stream(), [&] { finish_reduction(r, t); });
    }
    work->add_outputs(tensors);
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced_as(
      std::vector<std::vector<at::Tensor>>& output_lists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      return type == c10d::OpType::ALLGATHER ? gloo.allgather(host_outputs, host_inputs, opts)
                                             : gloo.allgather_coalesced(host_outputs, host_inputs, opts);
    };
    if (auto work = if_on_host(inputs, host_call, output_lists, inputs)) {
      return work;
    }
    TORCH_CHECK(
        !inputs.empty() && output_lists.size() == inputs.size(),
        kName,
        ": ",
        call_name,
        " takes one output list per input tensor");
    if (type == c10d::OpType::ALLGATHER) {
      args_.single(inputs, call_name, /*elementwise=*/false);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      args_.check_layout(inputs[i], call_name, /*elementwise=*/false);
      args_.check_list(output_lists[i], inputs[i], call_name, "output");
    }
    auto work = open(type, call_name, inputs[0].device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      group_.use(*work, group_.collective_stream(), output_lists[i]);
      on_stream(group_.collective_stream(), [&] {
        const at::Tensor staged = at::empty({inputs[i].numel() * size_}, inputs[i].options());
        enqueue_all_gather(*work, staged, inputs[i]);
        split_into(staged, output_lists[i]);
      });
      work->add_outputs(output_lists[i]);
    }
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced_as(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      if (type == c10d::OpType::_ALLGATHER_BASE) {
        return gloo._allgather_base(host_outputs[0], host_inputs[0], opts);
      }
      return gloo.allgather_into_tensor_coalesced(host_outputs, host_inputs, opts);
    };
    if (auto work = if_on_host(outputs, host_call, outputs, inputs)) {
      return work;
    }
    TORCH_CHECK(
        !inputs.empty() && outputs.size() == inputs.size(), kName, ": ", call_name, " takes one output per input");
    for (size_t i = 0; i < inputs.size(); ++i) {
      args_.check_pair(outputs[i], inputs[i], call_name);
      args_.check_layout(inputs[i], call_name, /*elementwise=*/false);
      args_.check_world_size_times(outputs[i], inputs[i], call_name, "output", "input");
    }
    auto work = open(type, call_name, inputs[0].device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), inputs);
    group_.use(*work, group_.collective_stream(), outputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      enqueue_all_gather(*work, outputs[i], inputs[i]);
    }
    work->add_outputs(outputs);
    return group_.close(work);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced_as(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      if (type == c10d::OpType::_REDUCE_SCATTER_BASE) {
        return gloo._reduce_scatter_base(host_outputs[0], host_inputs[0], opts);
      }
      return gloo.reduce_scatter_tensor_coalesced(host_outputs, host_inputs, opts);
    };
    if (auto work = if_on_host(outputs, host_call, outputs, inputs)) {
      return work;
    }
    TORCH_CHECK(
        !inputs.empty() && outputs.size() == inputs.size(), kName, ": ", call_name, " takes one output per input");
    std::vector<Reduction> reductions;
    for (size_t i = 0; i < inputs.size(); ++i) {
      args_.check_pair(inputs[i], outputs[i], call_name);
      args_.check_layout(outputs[i], call_name, /*elementwise=*/false);
      args_.check_world_size_times(inputs[i], outputs[i], call_name, "input", "output");
      reductions.push_back(reduction(opts.reduceOp, outputs[i].scalar_type(), size_, call_name));
    }
    auto work = open(type, call_name, inputs[0].device(), opts.timeout);
    group_.use(*work, group_.collective_stream(), inputs);
    group_.use(*work, group_.collective_stream(), outputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      enqueue_reduce_scatter(*work, outputs[i], inputs[i], reductions[i]);
    }
    work->add_outputs(outputs);
    return group_.close(work);
  }

  void enqueue_all_gather(CclWork& work, const at::Tensor& output, const at::Tensor& input) {
    const Flat in = flat(input);
    void* out = output.data_ptr();
    group_.call(work, [&](Done done) {
      group_.comm().all_gather(in.data, out, in.count, in.dtype, group_.collective_stream(), std::move(done));
    });
  }

  void enqueue_reduce_scatter(CclWork& work, at::Tensor output, const at::Tensor& input, const Reduction& r) {
    const Flat out = flat(output);
    const void* in = input.data_ptr();
    group_.call(work, [&](Done done) {
      group_.comm().reduce_scatter(
          in, out.data, out.count, out.dtype, r.op, group_.collective_stream(), std::move(done));
    });
    on_stream(group_.collective_stream(), [&] { finish_reduction(r, output); });
  }

  c10::intrusive_ptr<CclWork> open(
      c10d::OpType type, const char* call_name, c10::Device device, std::chrono::milliseconds timeout) {
    return group_.open(getBoundDeviceId(), type, call_name, device, timeout);
  }

  const Arguments args_;
  const c10::intrusive_ptr<c10d::Backend> host_;
  std::mutex mutex_; // one collective call at a time
  Group group_;
};

} // namespace

// torch.distributed's creator (see torch_foo/distributed.py): the three Gloo groups carry
// collectives, point-to-point calls (for the staged communicator) and CPU tensors.
void add_bindings(_object* module) {
  auto m = py::reinterpret_borrow<py::module_>(module);
  m.def(
      "_ccl_backend",
      [](const c10::intrusive_ptr<c10d::Backend>& collectives,
         const c10::intrusive_ptr<c10d::Backend>& p2p,
         const c10::intrusive_ptr<c10d::Backend>& host,
         int rank,
         int size,
         int64_t timeout_ms,
         const std::string& check_calls) -> c10::intrusive_ptr<c10d::Backend> {
        TORCH_CHECK(
            check_calls == "all" || check_calls == "changes" || check_calls == "off",
            "check_calls must be 'all', 'changes' or 'off', not '",
            check_calls,
            "'");
        const CheckCalls mode = check_calls == "all" ? CheckCalls::All
            : check_calls == "off"                   ? CheckCalls::Off
                                                     : CheckCalls::Changes;
        std::shared_ptr<Transport> collective_transport = make_gloo_transport(collectives);
        std::shared_ptr<Transport> p2p_transport = make_gloo_transport(p2p);
        auto factory = [collective_transport, p2p_transport, mode](c10::Device device) {
          return make_staged_communicator(collective_transport, p2p_transport, device, mode);
        };
        return c10::make_intrusive<CclBackend>(rank, size, std::chrono::milliseconds(timeout_ms), factory, host);
      },
      py::arg("collectives"),
      py::arg("p2p"),
      py::arg("host"),
      py::arg("rank"),
      py::arg("size"),
      py::arg("timeout_ms"),
      py::arg("check_calls"));
}

} // namespace torch_foo::distributed
