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
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <mutex>
#include <optional>
#include <tuple>

#include "../compat/PythonBindings.h"
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

// What the host Gloo group `gloo` runs for CPU tensors: host_call(gloo, tensors...), with new
// tensor objects over the same memory (unowned()).
template <typename HostCall, typename... Tensors>
auto gloo_call(c10d::Backend& gloo, HostCall host_call, const Tensors&... tensors) {
  return [&gloo, host_call, &tensors...] {
    auto held = std::make_tuple(unowned(tensors)...);
    return std::apply([&](auto&... host_tensors) { return host_call(gloo, host_tensors...); }, held);
  };
}

// A collective on foo tensors as its method describes it to CclBackend::collective(), once
// the arguments are checked: the Work to open, the tensors it reads and those it writes (all
// recorded on its stream; the written ones are the Work's result).
struct Issue {
  c10d::OpType type = c10d::OpType::UNKNOWN;
  const char* call_name = "";
  c10::Device device = c10::Device(c10::DeviceType::PrivateUse1);
  std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
  std::vector<at::Tensor> reads;
  std::vector<at::Tensor> writes;
};

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

  // The collectives. Each is called on the caller's thread, one at a time (mutex_), and returns at
  // once. CPU tensors go to the host Gloo group. For foo tensors an argument error raises here,
  // before anything is enqueued; the communicator's calls are enqueued on the group's collective
  // stream (point-to-point calls on their own streams) after the work queued on the current stream,
  // and the Work completes when this rank's result is there. A peer that fails or leaves, or the
  // timeout, fails the Work and every later collective of the group (Work.h, Watchdog.h).

  // Each tensor = the reduction over ranks of that tensor.
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return allreduce_coalesced_as(
        tensors, opts.reduceOp, opts.timeout, c10d::OpType::ALLREDUCE, "all_reduce", [&](c10d::Backend& gloo, auto& t) {
          return gloo.allreduce(t, opts);
        });
  }

  // The same for several tensors in one Work.
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

  // The tensor on every rank = the tensor on the root.
  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    return collective(
        args_.on_host(tensors),
        gloo_call(
            *host_, [&](c10d::Backend& gloo, auto& t) { return gloo.broadcast(t, opts); }, tensors),
        [&](Issue& issue) {
          const at::Tensor& t = args_.single(tensors, "broadcast", /*elementwise=*/true);
          args_.check_root(opts.rootRank, "broadcast");
          TORCH_CHECK(opts.rootTensor == 0, kName, ": broadcast takes one tensor per process (rootTensor must be 0)");
          const Flat f = flat(t);
          const int root = static_cast<int>(opts.rootRank);
          issue = {c10d::OpType::BROADCAST, "broadcast", t.device(), opts.timeout, {}, {t}};
          return [=, this](CclWork& work, c10::Stream stream) {
            group_.call(work, [&](Done done) {
              group_.comm().broadcast(f.data, f.count, f.dtype, root, stream, std::move(done));
            });
          };
        });
  }

  // The tensor on the root = the reduction over ranks; other ranks' tensors are left as they are.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return collective(
        args_.on_host(tensors),
        gloo_call(
            *host_, [&](c10d::Backend& gloo, auto& t) { return gloo.reduce(t, opts); }, tensors),
        [&](Issue& issue) {
          const at::Tensor& t = args_.single(tensors, "reduce", /*elementwise=*/true);
          args_.check_root(opts.rootRank, "reduce");
          const Reduction r = reduction(opts.reduceOp, t.scalar_type(), size_, "reduce");
          const bool is_root = opts.rootRank == rank_;
          const int root = static_cast<int>(opts.rootRank);
          issue = {c10d::OpType::REDUCE, "reduce", t.device(), opts.timeout, {}, {t}};
          return [=, this](CclWork& work, c10::Stream stream) {
            const Flat f = flat(t);
            group_.call(work, [&](Done done) {
              group_.comm().reduce(
                  f.data, is_root ? f.data : nullptr, f.count, f.dtype, r.op, root, stream, std::move(done));
            });
            if (is_root) {
              at::Tensor result = t;
              on_stream(stream, [&] { finish_reduction(r, result); });
            }
          };
        });
  }

  // outputs[0][r] on every rank = the input of rank r.
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return allgather_coalesced_as(outputs, inputs, opts, c10d::OpType::ALLGATHER, "all_gather");
  }

  // The same for several inputs (one output list each) in one Work.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return allgather_coalesced_as(
        output_lists, inputs, opts, c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced");
  }

  // output (world size times input) = the inputs of all ranks, in rank order.
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> outputs{output};
    std::vector<at::Tensor> inputs{input};
    return allgather_into_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor");
  }

  // The same for several pairs in one Work.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override {
    return allgather_into_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced");
  }

  // The output of rank r = the reduction over ranks of their inputs[0][r].
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return collective(
        args_.on_host(outputs),
        gloo_call(
            *host_,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.reduce_scatter(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs),
        [&](Issue& issue) {
          const at::Tensor& out = args_.single(outputs, "reduce_scatter", /*elementwise=*/false);
          TORCH_CHECK(inputs.size() == 1, kName, ": reduce_scatter takes one input list per process");
          args_.check_list(inputs[0], out, "reduce_scatter", "input");
          const Reduction r = reduction(opts.reduceOp, out.scalar_type(), size_, "reduce_scatter");
          issue = {c10d::OpType::REDUCE_SCATTER, "reduce_scatter", out.device(), opts.timeout, inputs[0], {out}};
          return [=, this](CclWork& work, c10::Stream stream) {
            const at::Tensor staged = on_stream(stream, [&] { return concatenated(inputs[0]); });
            enqueue_reduce_scatter(work, stream, out, staged, r);
          };
        });
  }

  // output = block `rank` of the reduction over ranks of input (world size times output).
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outputs{output};
    std::vector<at::Tensor> inputs{input};
    return reduce_scatter_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor");
  }

  // The same for several pairs in one Work.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_tensor_coalesced_as(
        outputs, inputs, opts, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced");
  }

  // Block r of output = block `rank` of rank r's input; blocks along dim 0, by the splits (empty: equal).
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override {
    return collective(
        args_.on_host({output, input}),
        gloo_call(
            *host_,
            [&](c10d::Backend& gloo, auto& host_output, auto& host_input) {
              return gloo.alltoall_base(host_output, host_input, output_splits, input_splits, opts);
            },
            output,
            input),
        [&](Issue& issue) {
          args_.check_pair(output, input, "all_to_all_single");
          std::vector<size_t> send = args_.split_counts(input, input_splits, "input");
          std::vector<size_t> recv = args_.split_counts(output, output_splits, "output");
          const size_t per = input.is_complex() ? 2 : 1;
          for (size_t i = 0; i < send.size(); ++i) {
            send[i] *= per;
            recv[i] *= per;
          }
          const Flat in = flat(input);
          const Flat out = flat(output);
          issue = {c10d::OpType::ALLTOALL_BASE, "all_to_all_single", output.device(), opts.timeout, {input}, {output}};
          return [=, this](CclWork& work, c10::Stream stream) {
            group_.call(work, [&](Done done) {
              group_.comm().all_to_all(in.data, send, out.data, recv, in.dtype, stream, std::move(done));
            });
          };
        });
  }

  // outputs[r] = inputs[rank] of rank r.
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts) override {
    return collective(
        args_.on_host(outputs),
        gloo_call(
            *host_,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.alltoall(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs),
        [&](Issue& issue) {
          TORCH_CHECK(
              inputs.size() == static_cast<size_t>(size_) && outputs.size() == inputs.size(),
              kName,
              ": all_to_all takes one input and one output tensor per rank (",
              size_,
              "), got ",
              inputs.size(),
              " and ",
              outputs.size());
          std::vector<size_t> send;
          std::vector<size_t> recv;
          for (size_t i = 0; i < inputs.size(); ++i) {
            args_.check_pair(outputs[i], inputs[0], "all_to_all");
            args_.check_pair(inputs[i], inputs[0], "all_to_all");
            send.push_back(flat(inputs[i]).count);
            recv.push_back(flat(outputs[i]).count);
          }
          issue = {c10d::OpType::ALLTOALL, "all_to_all", outputs[0].device(), opts.timeout, inputs, outputs};
          return [=, this](CclWork& work, c10::Stream stream) {
            on_stream(stream, [&] {
              const at::Tensor staged_in = concatenated(inputs);
              const at::Tensor staged_out = at::empty({args_.total_numel(outputs)}, outputs[0].options());
              const Flat in = flat(staged_in);
              const Flat out = flat(staged_out);
              group_.call(work, [&](Done done) {
                group_.comm().all_to_all(in.data, send, out.data, recv, in.dtype, stream, std::move(done));
              });
              split_into(staged_out, outputs);
            });
          };
        });
  }

  // outputs[0][r] on the root = the input of rank r; outputs are not used elsewhere.
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override {
    return collective(
        args_.on_host(inputs),
        gloo_call(
            *host_,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.gather(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs),
        [&](Issue& issue) {
          const at::Tensor& in = args_.single(inputs, "gather", /*elementwise=*/false);
          args_.check_root(opts.rootRank, "gather");
          const bool is_root = opts.rootRank == rank_;
          if (is_root) {
            TORCH_CHECK(outputs.size() == 1, kName, ": gather takes one output list on the root");
            args_.check_list(outputs[0], in, "gather", "output");
          }
          const int root = static_cast<int>(opts.rootRank);
          issue = {
              c10d::OpType::GATHER,
              "gather",
              in.device(),
              opts.timeout,
              {in},
              is_root ? outputs[0] : std::vector<at::Tensor>{}};
          return [=, this](CclWork& work, c10::Stream stream) {
            on_stream(stream, [&] {
              const at::Tensor staged = is_root ? at::empty({in.numel() * size_}, in.options()) : at::Tensor();
              const Flat f = flat(in);
              group_.call(work, [&](Done done) {
                group_.comm().gather(
                    f.data, is_root ? staged.data_ptr() : nullptr, f.count, f.dtype, root, stream, std::move(done));
              });
              if (is_root) {
                split_into(staged, outputs[0]);
              }
            });
          };
        });
  }

  // The output of rank r = inputs[0][r] on the root; inputs are not used elsewhere.
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override {
    return collective(
        args_.on_host(outputs),
        gloo_call(
            *host_,
            [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
              return gloo.scatter(host_outputs, host_inputs, opts);
            },
            outputs,
            inputs),
        [&](Issue& issue) {
          const at::Tensor& out = args_.single(outputs, "scatter", /*elementwise=*/false);
          args_.check_root(opts.rootRank, "scatter");
          const bool is_root = opts.rootRank == rank_;
          if (is_root) {
            TORCH_CHECK(inputs.size() == 1, kName, ": scatter takes one input list on the root");
            args_.check_list(inputs[0], out, "scatter", "input");
          }
          const int root = static_cast<int>(opts.rootRank);
          issue = {
              c10d::OpType::SCATTER,
              "scatter",
              out.device(),
              opts.timeout,
              is_root ? inputs[0] : std::vector<at::Tensor>{},
              {out}};
          return [=, this](CclWork& work, c10::Stream stream) {
            on_stream(stream, [&] {
              const at::Tensor staged = is_root ? concatenated(inputs[0]) : at::Tensor();
              const Flat f = flat(out);
              group_.call(work, [&](Done done) {
                group_.comm().scatter(
                    is_root ? staged.data_ptr() : nullptr, f.data, f.count, f.dtype, root, stream, std::move(done));
              });
            });
          };
        });
  }

  // The tensor to rank `dst`, matched by its recv with the same tag, on the group's send stream.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return collective(
        args_.on_host(tensors),
        gloo_call(
            *host_, [&](c10d::Backend& gloo, auto& t) { return gloo.send(t, dst, tag); }, tensors),
        [&](Issue& issue) {
          const at::Tensor& t = args_.single(tensors, "send", /*elementwise=*/false);
          args_.check_peer(dst, "send");
          const Flat f = flat(t);
          issue = {c10d::OpType::SEND, "send", t.device(), c10d::kUnsetTimeout, {t}, {}};
          return [=, this](CclWork& work, c10::Stream stream) {
            group_.call(work, [&](Done done) {
              group_.comm().send(f.data, f.count, f.dtype, dst, tag, stream, std::move(done));
            });
          };
        });
  }

  // The tensor = what rank `src` sends with the same tag, on the group's receive stream.
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return collective(
        args_.on_host(tensors),
        gloo_call(
            *host_, [&](c10d::Backend& gloo, auto& t) { return gloo.recv(t, src, tag); }, tensors),
        [&](Issue& issue) {
          const at::Tensor& t = args_.single(tensors, "recv", /*elementwise=*/false);
          args_.check_peer(src, "recv");
          const Flat f = flat(t);
          issue = {c10d::OpType::RECV, "recv", t.device(), c10d::kUnsetTimeout, {}, {t}};
          return [=, this](CclWork& work, c10::Stream stream) {
            group_.call(work, [&](Done done) {
              group_.comm().recv(f.data, f.count, f.dtype, src, tag, stream, std::move(done));
            });
          };
        });
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    TORCH_CHECK(false, kName, ": receiving from any source is not supported; name the sender (src=...)");
  }

  // Completes when every rank has reached the barrier on its collective stream; a CPU device
  // (barrier(device_ids=...) of a CPU group) waits in the host Gloo group.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    return collective(
        opts.device && opts.device->is_cpu(),
        [&] { return host_->barrier(opts); },
        [&](Issue& issue) {
          const c10::Device device =
              opts.device && opts.device->has_index() ? *opts.device : group_.device(getBoundDeviceId());
          issue = {c10d::OpType::BARRIER, "barrier", device, opts.timeout, {}, {}};
          return [this](CclWork& work, c10::Stream stream) {
            group_.call(work, [&](Done done) { group_.comm().barrier(stream, std::move(done)); });
          };
        });
  }

 private:
  // The skeleton of every collective: one at a time; when `on_host`, the Work of `host()`, run as
  // the group runs host calls (while coalescing, part of its Work). Otherwise `describe(issue)`
  // checks the arguments, fills in the Issue and returns its calls, `calls(work, stream)`, which
  // make the communicator's calls through Group::call; this opens the Work, records the tensors on
  // its stream (sends and receives on their own, the rest on the collective stream), makes the
  // calls and closes the Work.
  template <typename Host, typename Describe>
  c10::intrusive_ptr<c10d::Work> collective(bool on_host, Host&& host, Describe&& describe) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (on_host) {
      return group_.host_call(host);
    }
    Issue issue;
    auto calls = describe(issue);
    const c10::intrusive_ptr<CclWork> work =
        group_.open(getBoundDeviceId(), issue.type, issue.call_name, issue.device, issue.timeout);
    const c10::Stream stream = issue.type == c10d::OpType::SEND ? group_.send_stream()
        : issue.type == c10d::OpType::RECV                      ? group_.recv_stream()
                                                                : group_.collective_stream();
    group_.use(*work, stream, issue.reads);
    group_.use(*work, stream, issue.writes);
    calls(*work, stream);
    work->add_outputs(issue.writes);
    return group_.close(work);
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
    return collective(args_.on_host(tensors), gloo_call(*host_, host_call, tensors), [&](Issue& issue) {
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
      issue = {type, call_name, tensors[0].device(), timeout, {}, tensors};
      return [=, this](CclWork& work, c10::Stream stream) {
        for (size_t i = 0; i < tensors.size(); ++i) {
          at::Tensor t = tensors[i];
          const Flat f = flat(t);
          const Reduction& r = reductions[i];
          group_.call(work, [&](Done done) {
            group_.comm().all_reduce(f.data, f.data, f.count, f.dtype, r.op, stream, std::move(done));
          });
          on_stream(stream, [&] { finish_reduction(r, t); });
        }
      };
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced_as(
      std::vector<std::vector<at::Tensor>>& output_lists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      return type == c10d::OpType::ALLGATHER ? gloo.allgather(host_outputs, host_inputs, opts)
                                             : gloo.allgather_coalesced(host_outputs, host_inputs, opts);
    };
    return collective(args_.on_host(inputs), gloo_call(*host_, host_call, output_lists, inputs), [&](Issue& issue) {
      TORCH_CHECK(
          !inputs.empty() && output_lists.size() == inputs.size(),
          kName,
          ": ",
          call_name,
          " takes one output list per input tensor");
      if (type == c10d::OpType::ALLGATHER) {
        args_.single(inputs, call_name, /*elementwise=*/false);
      }
      std::vector<at::Tensor> outputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        args_.check_layout(inputs[i], call_name, /*elementwise=*/false);
        args_.check_list(output_lists[i], inputs[i], call_name, "output");
        outputs.insert(outputs.end(), output_lists[i].begin(), output_lists[i].end());
      }
      issue = {type, call_name, inputs[0].device(), opts.timeout, inputs, std::move(outputs)};
      return [=, this](CclWork& work, c10::Stream stream) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          on_stream(stream, [&] {
            const at::Tensor staged = at::empty({inputs[i].numel() * size_}, inputs[i].options());
            enqueue_all_gather(work, stream, staged, inputs[i]);
            split_into(staged, output_lists[i]);
          });
        }
      };
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced_as(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      if (type == c10d::OpType::_ALLGATHER_BASE) {
        return gloo._allgather_base(host_outputs[0], host_inputs[0], opts);
      }
      return gloo.allgather_into_tensor_coalesced(host_outputs, host_inputs, opts);
    };
    return collective(args_.on_host(outputs), gloo_call(*host_, host_call, outputs, inputs), [&](Issue& issue) {
      TORCH_CHECK(
          !inputs.empty() && outputs.size() == inputs.size(), kName, ": ", call_name, " takes one output per input");
      for (size_t i = 0; i < inputs.size(); ++i) {
        args_.check_pair(outputs[i], inputs[i], call_name);
        args_.check_layout(inputs[i], call_name, /*elementwise=*/false);
        args_.check_world_size_times(outputs[i], inputs[i], call_name, "output", "input");
      }
      issue = {type, call_name, inputs[0].device(), opts.timeout, inputs, outputs};
      return [=, this](CclWork& work, c10::Stream stream) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          enqueue_all_gather(work, stream, outputs[i], inputs[i]);
        }
      };
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced_as(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts,
      c10d::OpType type,
      const char* call_name) {
    const auto host_call = [&](c10d::Backend& gloo, auto& host_outputs, auto& host_inputs) {
      if (type == c10d::OpType::_REDUCE_SCATTER_BASE) {
        return gloo._reduce_scatter_base(host_outputs[0], host_inputs[0], opts);
      }
      return gloo.reduce_scatter_tensor_coalesced(host_outputs, host_inputs, opts);
    };
    return collective(args_.on_host(outputs), gloo_call(*host_, host_call, outputs, inputs), [&](Issue& issue) {
      TORCH_CHECK(
          !inputs.empty() && outputs.size() == inputs.size(), kName, ": ", call_name, " takes one output per input");
      std::vector<Reduction> reductions;
      for (size_t i = 0; i < inputs.size(); ++i) {
        args_.check_pair(inputs[i], outputs[i], call_name);
        args_.check_layout(outputs[i], call_name, /*elementwise=*/false);
        args_.check_world_size_times(inputs[i], outputs[i], call_name, "input", "output");
        reductions.push_back(reduction(opts.reduceOp, outputs[i].scalar_type(), size_, call_name));
      }
      issue = {type, call_name, inputs[0].device(), opts.timeout, inputs, outputs};
      return [=, this](CclWork& work, c10::Stream stream) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          enqueue_reduce_scatter(work, stream, outputs[i], inputs[i], reductions[i]);
        }
      };
    });
  }

  void enqueue_all_gather(CclWork& work, c10::Stream stream, const at::Tensor& output, const at::Tensor& input) {
    const Flat in = flat(input);
    void* out = output.data_ptr();
    group_.call(
        work, [&](Done done) { group_.comm().all_gather(in.data, out, in.count, in.dtype, stream, std::move(done)); });
  }

  void enqueue_reduce_scatter(
      CclWork& work, c10::Stream stream, at::Tensor output, const at::Tensor& input, const Reduction& r) {
    const Flat out = flat(output);
    const void* in = input.data_ptr();
    group_.call(work, [&](Done done) {
      group_.comm().reduce_scatter(in, out.data, out.count, out.dtype, r.op, stream, std::move(done));
    });
    on_stream(stream, [&] { finish_reduction(r, output); });
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
