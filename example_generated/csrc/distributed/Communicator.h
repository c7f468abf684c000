// The collective library seam: how the fooccl process-group backend moves device memory between ranks.
//
// Backend.cpp turns each torch.distributed call into calls on a Communicator: validation, reduce
// operations the library lacks (AVG, PREMUL_SUM), stream ordering, Work objects and futures stay
// there. A Communicator is what a vendor's collective library provides (NCCL, HCCL, CNCL, oneCCL
// all have this shape): one per process group, working on device pointers of one device, every
// call enqueued on a stream after the work already there and returning at once.
//
// The emulated device's communicator (StagedCommunicator.cpp) stages device memory through pinned
// host buffers with the runtime's asynchronous copies and runs the exchange on those buffers with a
// Transport (Transport.h, Gloo), in stream order. A port to hardware replaces
// make_staged_communicator() in Backend.cpp's factory with its own Communicator over the vendor
// library, and keeps everything else; a port without a collective library keeps the staged one.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

namespace torch_foo::distributed {

class Transport;

// Reductions a library provides natively; Backend.cpp builds AVG and PREMUL_SUM from SUM.
enum class ReduceOp : uint8_t { Sum, Product, Min, Max, BitwiseAnd, BitwiseOr, BitwiseXor };

// Called exactly once per call, when this rank's part of the exchange has finished: with nullptr,
// or with the error (a peer that left, a timeout, ranks that disagree about the call). It may run
// on a stream's worker thread, like a host function: it must not call the runtime.
using Done = std::function<void(std::exception_ptr)>;

// The ranks of one process group. Every rank makes the same calls in the same order (point-to-point
// calls excepted); counts are elements of `dtype`; buffers are device memory of device(). Calls are
// made from one host thread at a time. A library that can, fails a call whose ranks disagree
// (different collective, dtype or count) instead of exchanging garbage or waiting for the timeout.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual c10::Device device() const = 0;

  // recv = reduction over ranks of send (send == recv allowed).
  virtual void all_reduce(
      const void* send,
      void* recv,
      size_t count,
      c10::ScalarType dtype,
      ReduceOp op,
      c10::Stream stream,
      Done done) = 0;
  // buffer on every rank = buffer on `root`.
  virtual void broadcast(
      void* buffer, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done) = 0;
  // recv on `root` = reduction of send over ranks; recv is not written elsewhere (it may be null).
  virtual void reduce(
      const void* send,
      void* recv,
      size_t count,
      c10::ScalarType dtype,
      ReduceOp op,
      int root,
      c10::Stream stream,
      Done done) = 0;
  // recv (size() * count elements) = the send buffers of all ranks, in rank order.
  virtual void all_gather(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, c10::Stream stream, Done done) = 0;
  // recv (count elements) = block rank() of the reduction over ranks of send (size() * count elements).
  virtual void reduce_scatter(
      const void* send,
      void* recv,
      size_t count,
      c10::ScalarType dtype,
      ReduceOp op,
      c10::Stream stream,
      Done done) = 0;
  // send holds send_counts[r] elements for each rank r, back to back in rank order; recv receives
  // recv_counts[r] elements from each rank r, in the same layout.
  virtual void all_to_all(
      const void* send,
      const std::vector<size_t>& send_counts,
      void* recv,
      const std::vector<size_t>& recv_counts,
      c10::ScalarType dtype,
      c10::Stream stream,
      Done done) = 0;
  // recv on `root` (size() * count elements) = the send buffers of all ranks, in rank order.
  virtual void gather(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done) = 0;
  // recv (count elements) = block rank() of send (size() * count elements) on `root`.
  virtual void scatter(
      const void* send, void* recv, size_t count, c10::ScalarType dtype, int root, c10::Stream stream, Done done) = 0;
  // Point to point: a send matches the recv of the peer with the same tag, in order. Put sends and
  // receives on different streams than collectives: a receive waits for its sender, and a stream
  // it blocks must not hold back work the sender waits for.
  virtual void send(
      const void* buffer, size_t count, c10::ScalarType dtype, int peer, int tag, c10::Stream stream, Done done) = 0;
  virtual void recv(
      void* buffer, size_t count, c10::ScalarType dtype, int peer, int tag, c10::Stream stream, Done done) = 0;
  // Done once every rank has reached the barrier on its stream.
  virtual void barrier(c10::Stream stream, Done done) = 0;
};

// Which collectives first check that every rank made the same call (StagedCommunicator.cpp says
// how): all of them, the ones the calls before do not predict, or none. The names are those of
// FOO_CCL_CHECK_CALLS (torch_foo/distributed.py), which passes the mode by name.
enum class CheckCalls { All, Changes, Off };

// The emulated device's communicator (StagedCommunicator.cpp): device memory staged through pinned
// host buffers, exchanged with `collectives` (collective calls, on one stream's worker) and `p2p`
// (sends and receives, from two other streams' workers, and the checks of `check_calls`).
std::shared_ptr<Communicator> make_staged_communicator(
    std::shared_ptr<Transport> collectives, std::shared_ptr<Transport> p2p, c10::Device device, CheckCalls check_calls);

} // namespace torch_foo::distributed
