// One process group of the fooccl backend in this process: its device, communicator and
// streams, the Work being coalesced, its first failure and its watchdog; and how Backend.cpp issues
// a collective with them: open() a Work, use() a stream, call() the communicator, close().
//
// Streams, as ProcessGroupNCCL does it on CUDA: collectives run on a dedicated stream of the
// device, sends and receives on two more (a receive blocks its stream until the sender sends, and
// must not hold back the collectives or the sends). Each first waits for the work queued on the
// current stream; Work.wait() makes the current stream wait for the result. Tensors used on these
// streams are recorded with the caching allocator, so that freeing them early cannot hand their
// memory to other work before the collective ran. Only headers: Backend.cpp is its one user.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../core/Device.h"
#include "../core/DeviceAllocator.h"
#include "../core/Stream.h"
#include "Arguments.h"
#include "Communicator.h"
#include "Watchdog.h"
#include "Work.h"

namespace torch_foo::distributed {

using CommunicatorFactory = std::function<std::shared_ptr<Communicator>(c10::Device)>;

class Group {
 public:
  Group(int rank, std::chrono::milliseconds timeout, CommunicatorFactory factory)
      : rank_(rank), timeout_(timeout), factory_(std::move(factory)) {}

  ~Group() {
    watchdog_.reset(); // fails what is still pending
    for (const auto& stream : {collective_stream_, send_stream_, recv_stream_}) {
      if (stream) {
        release_dedicated_stream(*stream);
      }
    }
  }

  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  void set_timeout(std::chrono::milliseconds timeout) {
    timeout_ = timeout;
  }

  // The device this group uses, bound on first use: one device per process, as with NCCL.
  // `bound` is init_process_group(device_id=...), if given.
  void bind(c10::Device device, std::optional<c10::Device> bound) {
    TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1 && device.has_index(), kName, ": cannot use ", device);
    if (!device_) {
      if (bound && bound->type() == c10::DeviceType::PrivateUse1) {
        TORCH_CHECK(
            *bound == device,
            kName,
            ": this process group is bound to ",
            *bound,
            " (init_process_group(device_id=...)), got a tensor on ",
            device);
      }
      communicator_ = factory_(device);
      collective_stream_ = acquire_dedicated_stream(device.index(), /*priority=*/0);
      device_ = device;
      return;
    }
    TORCH_CHECK(
        *device_ == device,
        kName,
        ": this process group uses ",
        *device_,
        " in this process, got a tensor on ",
        device,
        ". Use one device per process: torch.foo.set_device(local_rank) before the first collective, "
        "or init_process_group(device_id=...)");
  }

  // The device bound, or that of device_id, or the current device.
  c10::Device device(std::optional<c10::Device> bound) const {
    if (device_) {
      return *device_;
    }
    if (bound && bound->type() == c10::DeviceType::PrivateUse1) {
      return *bound;
    }
    return c10::Device(c10::DeviceType::PrivateUse1, current_device());
  }

  // These three need a bound device (open() binds it).
  Communicator& comm() {
    return *communicator_;
  }

  c10::Stream collective_stream() const {
    return *collective_stream_;
  }

  c10::Stream send_stream() {
    if (!send_stream_) {
      send_stream_ = acquire_dedicated_stream(device_->index(), /*priority=*/-1);
    }
    return *send_stream_;
  }

  c10::Stream recv_stream() {
    if (!recv_stream_) {
      recv_stream_ = acquire_dedicated_stream(device_->index(), /*priority=*/-1);
    }
    return *recv_stream_;
  }

  void start_coalescing() {
    TORCH_CHECK(!coalescing_, kName, ": startCoalescing called twice without endCoalescing");
    coalescing_ = true;
  }

  c10::intrusive_ptr<c10d::Work> end_coalescing(std::optional<c10::Device> bound) {
    TORCH_CHECK(coalescing_, kName, ": endCoalescing without startCoalescing");
    coalescing_ = false;
    c10::intrusive_ptr<CclWork> work = std::move(coalesced_);
    if (!work) { // nothing was issued
      work = coalesced_work(device(bound));
    }
    return submit(work);
  }

  // The Work a collective adds to: a new one, or the open coalesced one. Raises if the group failed.
  c10::intrusive_ptr<CclWork> open(
      std::optional<c10::Device> bound,
      c10d::OpType type,
      const char* call_name,
      c10::Device device,
      std::chrono::milliseconds timeout) {
    if (const std::exception_ptr failure = failure_->get()) {
      std::rethrow_exception(
          backend_error(std::string(call_name) + " (not run: an earlier collective failed)", failure));
    }
    bind(device, bound);
    if (coalescing_) {
      if (!coalesced_) {
        coalesced_ = coalesced_work(device);
      }
      return coalesced_;
    }
    return c10::make_intrusive<CclWork>(
        rank_, type, call_name, device, timeout == c10d::kUnsetTimeout ? timeout_ : timeout, failure_);
  }

  // Runs the Work on `stream` (after the current stream's work) and records `tensors` there.
  void use(CclWork& work, c10::Stream stream, const std::vector<at::Tensor>& tensors) {
    work.run_on(stream);
    for (const at::Tensor& t : tensors) {
      if (t.defined() && t.storage().data_ptr().get() != nullptr) {
        device_allocator()->recordStream(t.storage().data_ptr(), stream);
      }
    }
  }

  // One communicator call for `work`. A call that fails before it is enqueued leaves the ranks
  // out of step: the group fails.
  template <typename Enqueue>
  void call(CclWork& work, Enqueue&& enqueue) {
    Done done = work.outcome().expect();
    try {
      enqueue(done);
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      done(error);
      failure_->set(backend_error(work.outcome().call(), error));
      throw;
    }
  }

  // The Work of a collective whose calls are all made (unless coalescing: endCoalescing closes it).
  c10::intrusive_ptr<c10d::Work> close(const c10::intrusive_ptr<CclWork>& work) {
    if (coalescing_) {
      return work;
    }
    return submit(work);
  }

  // A collective on CPU tensors, run by the host Gloo group; while coalescing, part of its Work.
  template <typename Fn>
  c10::intrusive_ptr<c10d::Work> host_call(Fn&& fn) {
    c10::intrusive_ptr<c10d::Work> work = fn();
    if (coalescing_) {
      if (!coalesced_) {
        coalesced_ = coalesced_work(device(std::nullopt));
      }
      coalesced_->add_host_work(work);
    }
    return work;
  }

 private:
  c10::intrusive_ptr<CclWork> coalesced_work(c10::Device device) const {
    return c10::make_intrusive<CclWork>(
        rank_, c10d::OpType::COALESCED, "coalesced collectives", device, timeout_, failure_);
  }

  c10::intrusive_ptr<c10d::Work> submit(const c10::intrusive_ptr<CclWork>& work) {
    work->seal();
    watchdog_->watch(work);
    return work;
  }

  const int rank_;
  std::chrono::milliseconds timeout_;
  const CommunicatorFactory factory_;
  std::optional<c10::Device> device_;
  std::shared_ptr<Communicator> communicator_;
  std::optional<c10::Stream> collective_stream_;
  std::optional<c10::Stream> send_stream_;
  std::optional<c10::Stream> recv_stream_;
  bool coalescing_ = false;
  c10::intrusive_ptr<CclWork> coalesced_;
  const std::shared_ptr<GroupFailure> failure_ = std::make_shared<GroupFailure>();
  std::unique_ptr<Watchdog> watchdog_ = std::make_unique<Watchdog>(failure_);
};

} // namespace torch_foo::distributed
