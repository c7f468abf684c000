// The emulated device's collective library: device memory staged through pinned host buffers and
// exchanged by a host Transport (Gloo), all in stream order.
//
// Each call enqueues on its stream, after the work already there: an asynchronous copy of the
// device input into a pinned buffer, a host function that runs the exchange on the pinned buffers
// (the stream waits for it, as it would for a collective kernel), and an asynchronous copy of the
// result back into device memory. The host returns at once. Pinned buffers come from the caching
// host allocator and go back to it as soon as everything is enqueued: the allocator does not hand
// a block out again before the stream has passed its last use. Transport.h says where a port
// replaces Gloo; Communicator.h where it replaces all of this.
//
// A device whose memory the host may access directly (fooDeviceProp::hostAccessesDeviceMemory:
// the emulated device outside strict memory mode, hardware with coherent host-mapped memory) skips
// the staging for all_reduce and broadcast, the collectives that work in place: the host function
// hands the transport the device memory itself. It runs in the same place on the stream as the
// staged exchange, after the work queued before the call and before the work queued after it, so
// the ordering is the same. The other collectives stage on every device (they are not in place,
// and their buffers may overlap: FSDP2 gathers from a slice of the output).
//
// Before exchanging, a collective may compare what every rank called (collective, dtype, count,
// root, reduction) with one small all_gather, and fail on every rank with a message naming the
// difference. Without it, ranks that disagree exchange garbage (another dtype of the same size) or
// abort the process (Gloo terminates a process that receives more bytes than it expects). Which
// calls compare is the CheckCalls mode:
// - All: each collective compares (one more small exchange per call; the template's
//   docs/integration/distributed.md has its cost).
// - Changes (the default): a collective compares unless it is the call that followed the previous
//   call the last time that call was made ("predicted"). Every rank predicts from the same history
//   (the calls the ranks agreed on so far), so ranks that make the same call either all compare or
//   all skip: a training loop that repeats its collectives compares each distinct transition once.
//   Ranks that disagree where some of them repeat the pattern do not all compare: the ones that
//   compare wait in the check, the others in the exchange, and all of them fail when the group's
//   timeout expires. The check runs on the point-to-point transport, not the collectives', so that
//   a rank in the check and a rank in an exchange never meet in one Gloo operation of different
//   sizes (which would abort the process).
// - Off: no comparison; disagreeing ranks are Gloo's problem.
// all_to_all's split sizes are compared on every call, in every mode (they may change from call to
// call, and Gloo aborts on a mismatch), over the collectives' transport. After a failure the communicator fails every
// later call at once: the ranks are out of step.
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "../core/Exception.h"
#include "../core/HostAllocator.h"
#include "../core/Stream.h"
#include "Communicator.h"
#include "Transport.h"

namespace torch_foo::distributed {
namespace {

// Runs `fn` in order on `stream`, as a host function (fooLaunchHostFunc, CUDA's
// cudaLaunchHostFunc): later work on the stream waits for it, as it would for a collective kernel.
// `fn` reports its own errors (run() catches everything); an exception that still escapes is
// printed rather than thrown into the runtime's worker thread.
void enqueue_host_function(c10::Stream stream, std::function<void()> fn) {
  const fooHostFn_t entry = [](void* data) {
    const std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(data)); // freed after the run
    try {
      (*body)();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fooccl: a collective's host function failed: %s\n", e.what());
    }
  };
  auto* body = new std::function<void()>(std::move(fn));
  const fooError_t error = fooLaunchHostFunc(native_stream(stream), entry, body);
  if (error != fooSuccess) {
    delete body; // not enqueued
    FOO_CHECK(error);
  }
}

// What a rank called, compared across ranks before a collective exchanges anything.
enum class Call : int64_t {
  AllReduce = 1,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  Barrier
};

struct Signature {
  Call call;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int64_t count = -1; // -1: not compared (all_to_all compares its splits instead)
  int64_t root = -1;
  int64_t op = -1;
};

constexpr size_t kSignatureWords = 5;
using Words = std::array<int64_t, kSignatureWords>;

Words to_words(const Signature& s) {
  return {static_cast<int64_t>(s.call), static_cast<int64_t>(s.dtype), s.count, s.root, s.op};
}

struct WordsHash {
  size_t operator()(const Words& words) const {
    size_t h = 0;
    for (const int64_t w : words) {
      h = h * 1000003u ^ std::hash<int64_t>()(w);
    }
    return h;
  }
};

// The calls a communicator's ranks agreed on, as far as predicting the next one needs: the last
// call, and for each call the one that followed it the last time. Every rank holds the same
// history, so every rank predicts the same call.
class CallHistory {
 public:
  bool predicts(const Words& call) const {
    if (!last_) {
      return false;
    }
    const auto next = next_.find(*last_);
    return next != next_.end() && next->second == call;
  }

  // `call` was agreed on (compared, or predicted by every rank).
  void agreed(const Words& call) {
    if (last_) {
      if (next_.size() >= kMaxCalls && next_.find(*last_) == next_.end()) {
        next_.clear(); // every rank forgets at the same call: the histories stay equal
      }
      next_[*last_] = call;
    }
    last_ = call;
  }

 private:
  static constexpr size_t kMaxCalls = 4096; // distinct calls remembered (sizes that keep changing)
  std::optional<Words> last_;
  std::unordered_map<Words, Words, WordsHash> next_;
};

const char* call_name(int64_t call) {
  switch (static_cast<Call>(call)) {
    case Call::AllReduce: return "all_reduce";
    case Call::Broadcast: return "broadcast";
    case Call::Reduce: return "reduce";
    case Call::AllGather: return "all_gather";
    case Call::ReduceScatter: return "reduce_scatter";
    case Call::AllToAll: return "all_to_all";
    case Call::Gather: return "gather";
    case Call::Scatter: return "scatter";
    case Call::Barrier: return "barrier";
  }
  return "an unknown collective";
}

const char* op_name(int64_t op) {
  constexpr const char* names[] = {"sum", "product", "min", "max", "bitwise and", "bitwise or", "bitwise xor"};
  return op >= 0 && op < 7 ? names[op] : "";
}

std::string describe(const int64_t* words) {
  std::ostringstream out;
  out << call_name(words[0]);
  if (words[0] == static_cast<int64_t>(Call::Barrier)) {
    return out.str();
  }
  out << " of " << (words[2] >= 0 ? std::to_string(words[2]) + " " : "")
      << c10::toString(static_cast<c10::ScalarType>(words[1])) << " elements";
  if (words[3] >= 0) {
    out << " from root " << words[3];
  }
  if (words[4] >= 0) {
    out << " with " << op_name(words[4]);
  }
  return out.str();
}

class StagedCommunicator final : public Communicator, public std::enable_shared_from_this<StagedCommunicator> {
 public:
  StagedCommunicator(
      std::shared_ptr<Transport> collectives,
      std::shared_ptr<Transport> p2p,
      c10::Device device,
      CheckCalls check_calls)
      : collectives_(std::move(collectives)),
        p2p_(std::move(p2p)),
        device_(device),
        check_calls_(check_calls),
        in_place_(host_accesses_memory(device)) {}

  int rank() const override {
    return collectives_->rank();
  }

  int size() const override {
    return collectives_->size();
  }

  c10::Device device() const override {
    return device_;
  }

  void all_reduce(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, ReduceOp op, c10::Stream stream, Done done)
      override {
    const c10::DeviceGuard guard(device_);
    const Signature signature{Call::AllReduce, dtype, to_i64(count), -1, static_cast<int64_t>(op)};
    if (in_place_) {
      if (send != recv && count > 0) {
        const auto kind = fooMemcpyDeviceToDevice;
        FOO_CHECK(fooMemcpyAsync(recv, send, bytes(count, dtype), kind, native_stream(stream)));
      }
      run(stream, std::move(done), signature, [this, recv, count, dtype, op] {
        collectives_->all_reduce(recv, count, dtype, op);
      });
      return;
    }
    const c10::DataPtr buffer = stage_in(send, count, dtype, stream);
    run(stream, std::move(done), signature, [this, data = buffer.get(), count, dtype, op] {
      collectives_->all_reduce(data, count, dtype, op);
    });
    stage_out(buffer, recv, count, dtype, stream);
  }

  void broadcast(void* buffer, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done) override {
    const c10::DeviceGuard guard(device_);
    const Signature signature{Call::Broadcast, dtype, to_i64(count), root};
    if (in_place_) {
      run(stream, std::move(done), signature, [this, buffer, count, dtype, root] {
        collectives_->broadcast(buffer, bytes(count, dtype), root);
      });
      return;
    }
    const bool is_root = rank() == root;
    const c10::DataPtr host = is_root ? stage_in(buffer, count, dtype, stream) : pinned(count, dtype);
    run(stream, std::move(done), signature, [this, data = host.get(), count, dtype, root] {
      collectives_->broadcast(data, bytes(count, dtype), root);
    });
    if (!is_root) {
      stage_out(host, buffer, count, dtype, stream);
    }
  }

  void reduce(
      const void* send,
      void* recv,
      size_t count,
      c10::ScalarType dtype,
      ReduceOp op,
      int root,
      c10::Stream stream,
      Done done) override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr buffer = stage_in(send, count, dtype, stream);
    run(stream,
        std::move(done),
        Signature{Call::Reduce, dtype, to_i64(count), root, static_cast<int64_t>(op)},
        [this, data = buffer.get(), count, dtype, op, root] { collectives_->reduce(data, count, dtype, op, root); });
    if (rank() == root && recv != nullptr) {
      stage_out(buffer, recv, count, dtype, stream);
    }
  }

  void all_gather(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, c10::Stream stream, Done done) override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr input = stage_in(send, count, dtype, stream);
    const c10::DataPtr output = pinned(count * size(), dtype);
    run(stream,
        std::move(done),
        Signature{Call::AllGather, dtype, to_i64(count)},
        [this, in = input.get(), out = output.get(), count, dtype] {
          collectives_->all_gather(in, out, bytes(count, dtype));
        });
    stage_out(output, recv, count * size(), dtype, stream);
  }

  void reduce_scatter(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, ReduceOp op, c10::Stream stream, Done done)
      override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr input = stage_in(send, count * size(), dtype, stream);
    const c10::DataPtr output = pinned(count, dtype);
    run(stream,
        std::move(done),
        Signature{Call::ReduceScatter, dtype, to_i64(count), -1, static_cast<int64_t>(op)},
        [this, in = input.get(), out = output.get(), count, dtype, op] {
          collectives_->reduce_scatter(in, out, count, dtype, op);
        });
    stage_out(output, recv, count, dtype, stream);
  }

  void all_to_all(
      const void* send,
      const std::vector<size_t>& send_counts,
      void* recv,
      const std::vector<size_t>& recv_counts,
      c10::ScalarType dtype,
      c10::Stream stream,
      Done done) override {
    TORCH_CHECK(
        send_counts.size() == static_cast<size_t>(size()) && recv_counts.size() == send_counts.size(),
        "all_to_all: expected one split size per rank (",
        size(),
        ")");
    const c10::DeviceGuard guard(device_);
    size_t sent = 0;
    size_t received = 0;
    for (size_t i = 0; i < send_counts.size(); ++i) {
      sent += send_counts[i];
      received += recv_counts[i];
    }
    const c10::DataPtr input = stage_in(send, sent, dtype, stream);
    const c10::DataPtr output = pinned(received, dtype);
    std::vector<size_t> send_bytes;
    std::vector<size_t> recv_bytes;
    for (size_t i = 0; i < send_counts.size(); ++i) {
      send_bytes.push_back(bytes(send_counts[i], dtype));
      recv_bytes.push_back(bytes(recv_counts[i], dtype));
    }
    run(stream,
        std::move(done),
        Signature{Call::AllToAll, dtype},
        [this, in = input.get(), out = output.get(), send_counts, recv_counts, send_bytes, recv_bytes] {
          check_splits(send_counts, recv_counts);
          collectives_->all_to_all(in, send_bytes, out, recv_bytes);
        });
    stage_out(output, recv, received, dtype, stream);
  }

  void gather(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done)
      override {
    const c10::DeviceGuard guard(device_);
    const bool is_root = rank() == root;
    const c10::DataPtr input = stage_in(send, count, dtype, stream);
    const c10::DataPtr output = is_root ? pinned(count * size(), dtype) : c10::DataPtr();
    run(stream,
        std::move(done),
        Signature{Call::Gather, dtype, to_i64(count), root},
        [this, in = input.get(), out = output.get(), count, dtype, root] {
          collectives_->gather(in, out, bytes(count, dtype), root);
        });
    if (is_root) {
      stage_out(output, recv, count * size(), dtype, stream);
    }
  }

  void scatter(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done)
      override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr input = rank() == root ? stage_in(send, count * size(), dtype, stream) : c10::DataPtr();
    const c10::DataPtr output = pinned(count, dtype);
    run(stream,
        std::move(done),
        Signature{Call::Scatter, dtype, to_i64(count), root},
        [this, in = input.get(), out = output.get(), count, dtype, root] {
          collectives_->scatter(in, out, bytes(count, dtype), root);
        });
    stage_out(output, recv, count, dtype, stream);
  }

  void send(const void* buffer, size_t count, c10::ScalarType dtype, int peer, int tag, c10::Stream stream, Done done)
      override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr host = stage_in(buffer, count, dtype, stream);
    run(stream, std::move(done), std::nullopt, [this, data = host.get(), count, dtype, peer, tag] {
      p2p_->send(data, bytes(count, dtype), peer, tag);
    });
    keep_until_passed(host, stream);
  }

  void recv(
      void* buffer, size_t count, c10::ScalarType dtype, int peer, int tag, c10::Stream stream, Done done) override {
    const c10::DeviceGuard guard(device_);
    const c10::DataPtr host = pinned(count, dtype);
    run(stream, std::move(done), std::nullopt, [this, data = host.get(), count, dtype, peer, tag] {
      p2p_->recv(data, bytes(count, dtype), peer, tag);
    });
    stage_out(host, buffer, count, dtype, stream);
  }

  void barrier(c10::Stream stream, Done done) override {
    const c10::DeviceGuard guard(device_);
    run(stream, std::move(done), Signature{Call::Barrier}, [this] { collectives_->barrier(); });
  }

 private:
  static int64_t to_i64(size_t n) {
    return static_cast<int64_t>(n);
  }

  static size_t bytes(size_t count, c10::ScalarType dtype) {
    return count * c10::elementSize(dtype);
  }

  // Whether the transport may work on `device`'s memory itself (the runtime's answer).
  static bool host_accesses_memory(c10::Device device) {
    fooDeviceProp prop;
    FOO_CHECK(fooGetDeviceProperties(&prop, device.index()));
    return prop.hostAccessesDeviceMemory != 0;
  }

  static c10::DataPtr pinned(size_t count, c10::ScalarType dtype) {
    return host_allocator()->allocate(bytes(count, dtype));
  }

  // A pinned copy of `count` elements of device memory, made on `stream`.
  c10::DataPtr stage_in(const void* device_data, size_t count, c10::ScalarType dtype, c10::Stream stream) {
    c10::DataPtr host = pinned(count, dtype);
    const size_t n_bytes = bytes(count, dtype);
    if (n_bytes > 0) {
      const auto kind = fooMemcpyDeviceToHost;
      FOO_CHECK(fooMemcpyAsync(host.get(), device_data, n_bytes, kind, native_stream(stream)));
    }
    return host;
  }

  // Copies the pinned `host` back into device memory on `stream`, after the exchange.
  void stage_out(const c10::DataPtr& host, void* device_data, size_t count, c10::ScalarType dtype, c10::Stream stream) {
    const size_t n_bytes = bytes(count, dtype);
    if (n_bytes > 0) {
      const auto kind = fooMemcpyHostToDevice;
      FOO_CHECK(fooMemcpyAsync(device_data, host.get(), n_bytes, kind, native_stream(stream)));
    }
    keep_until_passed(host, stream);
  }

  // The pinned block goes back to the cache when the caller drops it, but is not reused before
  // `stream` has passed the work enqueued so far (the last use of the block).
  static void keep_until_passed(const c10::DataPtr& host, c10::Stream stream) {
    if (host.get() != nullptr) {
      record_host_use(host, stream);
    }
  }

  // Enqueues the exchange: first the signature check (collectives), then `exchange`; reports to
  // `done`. The host function holds the communicator, never a tensor or an event.
  void run(c10::Stream stream, Done done, std::optional<Signature> signature, std::function<void()> exchange) {
    enqueue_host_function(
        stream, [self = shared_from_this(), done = std::move(done), signature, exchange = std::move(exchange)] {
          std::exception_ptr error = self->failure();
          if (error == nullptr) {
            try {
              self->run_now(signature, exchange);
            } catch (...) {
              error = std::current_exception();
              self->fail(error);
            }
          }
          done(error);
        });
  }

  // On the collectives' stream worker (sends and receives: on theirs, without a signature).
  void run_now(const std::optional<Signature>& signature, const std::function<void()>& exchange) {
    if (!signature || check_calls_ == CheckCalls::Off) {
      exchange();
      return;
    }
    const Words call = to_words(*signature);
    const bool predicted = check_calls_ == CheckCalls::Changes && history_.predicts(call);
    if (!predicted) {
      check_signature(call);
    }
    history_.agreed(call);
    if (!predicted) {
      exchange();
      return;
    }
    try {
      exchange();
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          e.what(),
          " (this rank did not compare the call with the other ranks: it repeated the calls before it. If the "
          "ranks made different calls, FOO_CCL_CHECK_CALLS=all names the difference)");
    }
  }

  std::exception_ptr failure() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

  void fail(std::exception_ptr error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ == nullptr) {
      failure_ = std::move(error);
    }
  }

  // Runs on the collectives' stream worker, before the exchange. The comparison goes over the
  // point-to-point transport: see the file's comment.
  void check_signature(const Words& mine) {
    std::vector<int64_t> all(kSignatureWords * size());
    try {
      p2p_->all_gather(mine.data(), all.data(), sizeof(int64_t) * kSignatureWords);
    } catch (const std::exception& e) {
      TORCH_CHECK(
          false,
          "fooccl: rank ",
          rank(),
          " could not compare its call (",
          describe(mine.data()),
          ") with the other ranks': ",
          e.what(),
          ". A rank left, or the ranks made different calls and some of them did not compare theirs ("
          "FOO_CCL_CHECK_CALLS=all compares every call)");
    }
    for (int r = 0; r < size(); ++r) {
      const int64_t* theirs = all.data() + r * kSignatureWords;
      if (!std::equal(mine.begin(), mine.end(), theirs)) {
        TORCH_CHECK(
            false,
            "fooccl: ranks called different collectives: rank ",
            rank(),
            " called ",
            describe(mine.data()),
            ", rank ",
            r,
            " called ",
            describe(theirs),
            ". Every rank of a process group must make the same collective calls in the same order, with "
            "tensors of the same dtype and size.");
      }
    }
  }

  // all_to_all: what each rank sends to this one must be what this one expects from it.
  void check_splits(const std::vector<size_t>& send_counts, const std::vector<size_t>& recv_counts) {
    const int n = size();
    std::vector<int64_t> mine(send_counts.begin(), send_counts.end());
    std::vector<int64_t> all(static_cast<size_t>(n) * n);
    collectives_->all_gather(mine.data(), all.data(), n * sizeof(int64_t));
    for (int r = 0; r < n; ++r) {
      const int64_t sent = all[static_cast<size_t>(r) * n + rank()];
      TORCH_CHECK(
          sent == static_cast<int64_t>(recv_counts[r]),
          "fooccl: all_to_all split sizes disagree: rank ",
          r,
          " sends ",
          sent,
          " elements to rank ",
          rank(),
          ", which expects ",
          recv_counts[r],
          " from it");
    }
  }

  const std::shared_ptr<Transport> collectives_;
  const std::shared_ptr<Transport> p2p_;
  const c10::Device device_;
  const CheckCalls check_calls_;
  CallHistory history_; // used on the collectives' stream worker only
  const bool in_place_; // all_reduce and broadcast work on device memory, unstaged
  std::mutex mutex_;
  std::exception_ptr failure_;
};

} // namespace

std::shared_ptr<Communicator> make_staged_communicator(
    std::shared_ptr<Transport> collectives,
    std::shared_ptr<Transport> p2p,
    c10::Device device,
    CheckCalls check_calls) {
  return std::make_shared<StagedCommunicator>(std::move(collectives), std::move(p2p), device, check_calls);
}

} // namespace torch_foo::distributed
