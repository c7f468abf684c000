// The watchdog of the fooccl backend: one thread per process group that resolves every Work it
// is given, in the order they were issued, by the Work's deadline (the group's timeout after it
// was issued), as ProcessGroupNCCL's watchdog does on CUDA.
//
// A Work whose exchange has not finished by its deadline (a rank that never joins, a stream that
// never gets there) fails with a timeout error, and so does every Work after a failure of the group.
// The watchdog then completes the Work's future, if one was asked for, from its own thread: never
// from a stream's worker, where the future's callbacks could not launch device work. Only headers:
// Backend.cpp is its one user.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "Work.h"

namespace torch_foo::distributed {

class Watchdog {
 public:
  explicit Watchdog(std::shared_ptr<GroupFailure> failure) : failure_(std::move(failure)), thread_([this] { run(); }) {}

  // Fails the Works still pending ("the process group was destroyed") and joins the thread.
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(c10::intrusive_ptr<CclWork> work) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

 private:
  static constexpr std::chrono::milliseconds kPoll{100}; // how often a wait looks at failure and shutdown

  void run() {
    while (true) {
      c10::intrusive_ptr<CclWork> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
          return; // stopping, nothing left
        }
        work = queue_.front();
      }
      Outcome& outcome = work->outcome();
      while (!outcome.wait_until(std::min(work->deadline(), Clock::now() + kPoll))) {
        if (const std::exception_ptr reason = reason_to_give_up(outcome, work->deadline())) {
          outcome.settle(reason);
        }
      }
      if (const std::exception_ptr error = outcome.error()) {
        failure_->set(error);
      }
      work->watched();
      const std::lock_guard<std::mutex> lock(mutex_);
      queue_.pop_front();
    }
  }

  std::exception_ptr reason_to_give_up(const Outcome& outcome, Clock::time_point deadline) {
    bool stopping = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping = stopping_;
    }
    if (stopping) {
      return backend_error(outcome.call(), error("the process group was destroyed"));
    }
    if (const std::exception_ptr failure = failure_->get()) {
      return backend_error(outcome.call() + " (an earlier collective failed)", failure);
    }
    if (Clock::now() >= deadline) {
      return backend_error(
          outcome.call(),
          error(
              "timed out (the process group's timeout): a rank did not take part, or the ranks made different "
              "calls (FOO_CCL_CHECK_CALLS=all compares every call and names the difference)"));
    }
    return nullptr;
  }

  static std::exception_ptr error(const std::string& message) {
    return std::make_exception_ptr(std::runtime_error(message));
  }

  const std::shared_ptr<GroupFailure> failure_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<CclWork>> queue_;
  bool stopping_ = false;
  std::thread thread_; // last: starts after everything it uses
};

} // namespace torch_foo::distributed
