// The Work objects of the fooccl backend: what torch.distributed returns from a collective
// (async_op=True) and waits on (async_op=False, DDP's buckets, FSDP2, DTensor's wait_tensor).
//
// A Work covers the communicator calls of one collective (several for the coalesced variants) on
// the backend's streams. Semantics, as for CUDA tensors with NCCL:
//  - wait() returns once the exchange has finished on this rank (the host waits for that, so that
//    a failure or timeout is raised here), then makes the current stream wait for the copy of the
//    result into device memory: device work queued after wait() sees the result, the host does not
//    wait for it;
//  - is_completed() is true once the result is in device memory (or the call failed);
//  - synchronize() makes the current stream wait for the result, without any host wait;
//  - get_future() completes (in the backend's watchdog thread) when the exchange has finished; its
//    value is the output tensors, and waiting on it orders the current stream after the result.
// Only headers: Backend.cpp is its one user (the c10d headers are costly to compile twice).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../core/Stream.h"
#include "Communicator.h"

namespace torch_foo::distributed {

using Clock = std::chrono::steady_clock;

// `cause` as a DistBackendError (torch.distributed.DistBackendError in Python) that names the call.
inline std::exception_ptr backend_error(const std::string& call, std::exception_ptr cause) {
  std::string message = "unknown error";
  try {
    std::rethrow_exception(std::move(cause));
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  try {
    TORCH_CHECK_WITH(DistBackendError, false, "fooccl: ", call, " failed: ", message);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// The first failure of a process group: after it, the ranks are out of step and the group refuses
// new collectives. Set by whoever sees the failure first (a Done callback, the watchdog).
class GroupFailure {
 public:
  void set(std::exception_ptr error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) {
      error_ = std::move(error);
    }
  }

  std::exception_ptr get() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  mutable std::mutex mutex_;
  std::exception_ptr error_;
};

// How the communicator calls of one Work ended: counted down by the Done callbacks (from stream
// workers), or settled at once by the watchdog (timeout, an earlier failure, shutdown). Holds no
// tensor, event or stream, so that the callbacks never release runtime resources on a stream worker.
class Outcome : public std::enable_shared_from_this<Outcome> {
 public:
  Outcome(std::string call, std::shared_ptr<GroupFailure> group) : call_(std::move(call)), group_(std::move(group)) {}

  // A Done for one more communicator call.
  Done expect() {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++pending_;
    auto reported = std::make_shared<std::atomic<bool>>(false); // each Done counts once
    return [self = shared_from_this(), reported](std::exception_ptr error) {
      if (!reported->exchange(true)) {
        self->report(std::move(error));
      }
    };
  }

  // No more calls: resolved once the pending ones have reported.
  void seal() {
    const std::lock_guard<std::mutex> lock(mutex_);
    sealed_ = true;
    resolve_if_done();
  }

  // Resolves with `error` now, unless already resolved.
  void settle(std::exception_ptr error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!resolved_) {
      error_ = std::move(error);
      resolved_ = true;
      cv_.notify_all();
    }
  }

  // Waits until resolved or `deadline`; true if resolved.
  bool wait_until(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_until(lock, deadline, [this] { return resolved_; });
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return resolved_; });
  }

  bool resolved() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return resolved_;
  }

  std::exception_ptr error() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

  const std::string& call() const {
    return call_;
  }

 private:
  void report(std::exception_ptr error) {
    std::exception_ptr described = error ? backend_error(call_, std::move(error)) : nullptr;
    if (described) {
      group_->set(described);
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    --pending_;
    if (described && !error_ && !resolved_) {
      error_ = std::move(described);
    }
    resolve_if_done();
  }

  void resolve_if_done() {
    if (sealed_ && pending_ == 0 && !resolved_) {
      resolved_ = true;
      cv_.notify_all();
    }
  }

  const std::string call_;
  const std::shared_ptr<GroupFailure> group_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int pending_ = 0;
  bool sealed_ = false;
  bool resolved_ = false;
  std::exception_ptr error_;
};

class CclWork final : public c10d::Work {
 public:
  CclWork(
      int rank,
      c10d::OpType type,
      std::string call,
      c10::Device device,
      std::chrono::milliseconds timeout,
      std::shared_ptr<GroupFailure> group)
      : c10d::Work(rank, type),
        outcome_(std::make_shared<Outcome>(std::move(call), std::move(group))),
        device_(device),
        timeout_(timeout) {}

  Outcome& outcome() {
    return *outcome_;
  }

  c10::Device device() const {
    return device_;
  }

  Clock::time_point deadline() const {
    return deadline_;
  }

  // Runs part of this Work on `stream`: the first time, `stream` waits for the work already queued
  // on the current stream, so that the collective sees its inputs.
  void run_on(c10::Stream stream) {
    for (const c10::Stream& s : streams_) {
      if (s == stream) {
        return;
      }
    }
    const c10::Stream current = current_stream(device_.index());
    if (current != stream) {
      c10::Event ready(c10::DeviceType::PrivateUse1);
      ready.record(current);
      ready.block(stream);
    }
    streams_.push_back(stream);
  }

  // Kept as new tensor objects over the caller's memory (result() and the future's value see the
  // same data): the watchdog thread may drop the last reference to this Work after the caller has
  // moved on, and releasing a tensor that Python owns there needs the interpreter; one already
  // finalizing (a script ending right after a collective) ends that thread inside the destructor,
  // and the process aborts ("terminate called without an active exception"; torchrun's rank 1 of
  // examples/ddp.py in CI).
  void add_outputs(const std::vector<at::Tensor>& tensors) {
    for (const at::Tensor& t : tensors) {
      outputs_.push_back(t.defined() ? t.detach() : t);
    }
  }

  // Collectives on CPU tensors that joined this Work during coalescing (run by the host Gloo group).
  void add_host_work(c10::intrusive_ptr<c10d::Work> work) {
    host_works_.push_back(std::move(work));
  }

  // All calls are enqueued: marks where the result is complete on each stream.
  void seal() {
    for (const c10::Stream& stream : streams_) {
      c10::Event& done = done_.emplace_back(c10::DeviceType::PrivateUse1);
      done.record(stream);
    }
    deadline_ = Clock::now() + timeout_;
    outcome_->seal();
  }

  bool isCompleted() override {
    if (!outcome_->resolved()) {
      return false;
    }
    if (outcome_->error()) {
      return true;
    }
    for (c10::Event& done : done_) {
      if (!done.query()) {
        return false;
      }
    }
    for (auto& work : host_works_) {
      if (!work->isCompleted()) {
        return false;
      }
    }
    return true;
  }

  bool isSuccess() const override {
    return outcome_->resolved() && outcome_->error() == nullptr;
  }

  std::exception_ptr exception() const override {
    return outcome_->error();
  }

  std::vector<at::Tensor> result() override {
    return outputs_;
  }

  void synchronize() override {
    for (c10::Event& done : done_) {
      done.block(current_stream(device_.index()));
    }
  }

  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout) {
      outcome_->wait(); // the watchdog resolves every Work within the group's timeout
    } else if (!outcome_->wait_until(Clock::now() + timeout)) {
      TORCH_CHECK_WITH(
          DistBackendError,
          false,
          "fooccl: ",
          outcome_->call(),
          " did not finish within the ",
          timeout.count(),
          " ms given to wait()");
    }
    if (const std::exception_ptr error = outcome_->error()) {
      std::rethrow_exception(error);
    }
    for (auto& work : host_works_) {
      work->wait(timeout);
    }
    synchronize();
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    const std::lock_guard<std::mutex> lock(future_mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device_});
      if (watched_) {
        complete_future();
      }
    }
    return future_;
  }

  // Called by the watchdog once the outcome is resolved.
  void watched() {
    const std::lock_guard<std::mutex> lock(future_mutex_);
    watched_ = true;
    if (future_) {
      complete_future();
    }
  }

 private:
  // The future's events are recorded on the current stream of this thread: make it a stream that
  // has passed the result (the Work's only stream, or a pool stream that waits for all of them).
  void complete_future() {
    if (const std::exception_ptr error = outcome_->error()) {
      future_->setError(error);
      return;
    }
    const c10::Stream stream =
        streams_.size() == 1 ? streams_.front() : stream_from_pool(device_.index(), /*priority=*/0);
    if (streams_.size() != 1) {
      for (c10::Event& done : done_) {
        done.block(stream);
      }
    }
    const c10::StreamGuard guard(stream);
    future_->markCompleted(c10::IValue(outputs_));
  }

  std::shared_ptr<Outcome> outcome_;
  const c10::Device device_;
  const std::chrono::milliseconds timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::vector<c10::Stream> streams_;
  std::vector<c10::Event> done_;
  std::vector<at::Tensor> outputs_;
  std::vector<c10::intrusive_ptr<c10d::Work>> host_works_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool watched_ = false;
};

} // namespace torch_foo::distributed
