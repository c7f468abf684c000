// Host transport: collectives on host memory, what the staged communicator exchanges its pinned
// buffers with.
//
// The emulated device has no collective library of its own, so StagedCommunicator.cpp copies device
// memory into pinned host buffers and hands them to a Transport. The one implementation is
// GlooTransport.cpp, over PyTorch's own Gloo process group (TCP; the engine behind torch.distributed's
// "gloo" backend). A port that has a network library but no device collective library (MPI, UCC,
// its own) implements this interface instead of Communicator.h and keeps the staging.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "Communicator.h"

namespace c10d {
class Backend;
} // namespace c10d

namespace torch_foo::distributed {

// Every call blocks until this rank's part is done and throws on failure (a peer that left, the
// group's timeout). Collective calls are made in the same order on every rank, from one thread at
// a time; send and recv may be called from two other threads meanwhile. Buffers are host memory,
// laid out as in Communicator.h. Reductions count elements of `dtype`; calls that only move data
// count bytes, so that they carry every dtype.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void all_reduce(void* data, size_t count, c10::ScalarType dtype, ReduceOp op) = 0;
  // The result lands in `data` on `root`; elsewhere `data` may be overwritten.
  virtual void reduce(void* data, size_t count, c10::ScalarType dtype, ReduceOp op, int root) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t count, c10::ScalarType dtype, ReduceOp op) = 0;

  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void all_gather(const void* send, void* recv, size_t bytes) = 0;
  virtual void all_to_all(
      const void* send, const std::vector<size_t>& send_bytes, void* recv, const std::vector<size_t>& recv_bytes) = 0;
  // recv is used on `root` only (size() * bytes), and so is send for scatter.
  virtual void gather(const void* send, void* recv, size_t bytes, int root) = 0;
  virtual void scatter(const void* send, void* recv, size_t bytes, int root) = 0;
  virtual void send(const void* data, size_t bytes, int peer, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int peer, int tag) = 0;
  virtual void barrier() = 0;
};

// A Transport over a Gloo process group (torch.distributed.ProcessGroupGloo, created in Python by
// torch_foo/distributed.py) that this Transport alone uses.
std::shared_ptr<Transport> make_gloo_transport(c10::intrusive_ptr<c10d::Backend> gloo);

} // namespace torch_foo::distributed
