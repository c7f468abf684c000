// The graph part of the runtime's contract (stream capture, runtime.h), linked into contract_test:
// what csrc/core/Graph.cpp relies on. Work submitted to a capturing stream is recorded, not run;
// a launch of the instantiated graph runs all of it in order, with the parameters captured; streams
// join a capture through events and must join back; calls that conflict with a capture fail with
// fooErrorStreamCaptureUnsupported and invalidate it, by capture mode for the "unsafe" ones; the
// streams work normally after the capture ended.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "test_kernels.h"

namespace {

const fooDim3 kUnit{1, 1, 1};

fooError_t stamp(int* counter, int* slot, fooStream_t stream) {
  return test_launch_stamp(counter, slot, stream);
}

std::vector<int> read_ints(const int* device, size_t n) {
  std::vector<int> host(n);
  OK(fooMemcpy(host.data(), device, n * sizeof(int), fooMemcpyDeviceToHost));
  return host;
}

void count_call(void* data) {
  ++*static_cast<int*>(data);
}

// Begins a capture on `s`, makes `call` (which must fail with fooErrorStreamCaptureUnsupported),
// and checks that the capture is invalidated and the stream works afterwards.
template <typename Call>
void expect_conflict(const char* what, fooStream_t s, fooStreamCaptureMode mode, Call call) {
  int* counter = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), 2 * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, 2 * sizeof(int), s));
  OK(fooStreamSynchronize(s));
  OK(fooStreamBeginCapture(s, mode));
  OK(stamp(counter, counter + 1, s));
  const fooError_t error = call();
  if (error != fooErrorStreamCaptureUnsupported) {
    std::fprintf(stderr, "%s during capture returned %d, expected fooErrorStreamCaptureUnsupported\n", what, error);
    ++failures;
  }
  fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
  OK(fooStreamIsCapturing(s, &status));
  EXPECT(status == fooStreamCaptureStatusInvalidated);
  EXPECT_CODE(stamp(counter, counter + 1, s), fooErrorStreamCaptureInvalidated);
  fooGraph_t graph = nullptr;
  EXPECT_CODE(fooStreamEndCapture(s, &graph), fooErrorStreamCaptureInvalidated);
  EXPECT(graph == nullptr);
  OK(fooStreamIsCapturing(s, &status));
  EXPECT(status == fooStreamCaptureStatusNone);
  OK(stamp(counter, counter + 1, s)); // runs now
  OK(fooStreamSynchronize(s));
  EXPECT(read_ints(counter, 2)[0] == 1); // the captured launches never ran
  OK(fooFree(counter));
}

void test_capture_and_replay() {
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  constexpr int kLaunches = 5;
  int* counter = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), (kLaunches + 1) * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, (kLaunches + 1) * sizeof(int), s));
  OK(fooStreamSynchronize(s));
  int calls = 0;
  fooStreamCaptureStatus status = fooStreamCaptureStatusActive;
  unsigned long long id = 0;
  OK(fooStreamGetCaptureInfo(s, &status, &id));
  EXPECT(status == fooStreamCaptureStatusNone && id == 0);
  EXPECT_CODE(fooStreamBeginCapture(s, static_cast<fooStreamCaptureMode>(7)), fooErrorInvalidValue);
  OK(fooStreamBeginCapture(s, fooStreamCaptureModeGlobal));
  EXPECT_CODE(fooStreamBeginCapture(s, fooStreamCaptureModeGlobal), fooErrorStreamCaptureUnsupported);
  OK(fooStreamGetCaptureInfo(s, &status, &id));
  EXPECT(status == fooStreamCaptureStatusActive && id != 0);
  for (int i = 0; i < kLaunches; ++i) {
    OK(stamp(counter, counter + 1 + i, s));
  }
  OK(fooLaunchHostFunc(s, &count_call, &calls));
  fooGraph_t graph = nullptr;
  OK(fooStreamEndCapture(s, &graph));
  EXPECT(graph != nullptr);
  fooGraph_t none = nullptr;
  EXPECT_CODE(fooStreamEndCapture(s, &none), fooErrorInvalidValue); // no longer captures
  size_t nodes = 0;
  OK(fooGraphGetNodeCount(graph, &nodes));
  EXPECT(nodes == kLaunches + 1);
  OK(fooStreamSynchronize(s));
  EXPECT(read_ints(counter, 1)[0] == 0 && calls == 0); // recorded, not run
  // An executable graph outlives its graph; each launch runs all the work, in order.
  fooGraphExec_t exec = nullptr;
  OK(fooGraphInstantiate(&exec, graph));
  const std::string dot = "/tmp/foo_graphs_contract_" + std::to_string(getpid()) + ".dot";
  OK(fooGraphDebugDotPrint(graph, dot.c_str()));
  OK(fooGraphDestroy(graph));
  EXPECT_CODE(fooGraphDestroy(graph), fooErrorInvalidResourceHandle);
  for (int replay = 0; replay < 3; ++replay) {
    OK(fooGraphLaunch(exec, s));
  }
  OK(fooStreamSynchronize(s));
  const auto values = read_ints(counter, kLaunches + 1);
  EXPECT(values[0] == 3 * kLaunches && calls == 3);
  for (int i = 0; i < kLaunches; ++i) {
    EXPECT(values[1 + i] == 2 * kLaunches + i); // the last replay's stamps, in launch order
  }
  OK(fooGraphLaunch(exec, nullptr)); // on another stream of the device too
  OK(fooStreamSynchronize(nullptr));
  EXPECT(read_ints(counter, 1)[0] == 4 * kLaunches);
  OK(fooGraphExecDestroy(exec));
  EXPECT_CODE(fooGraphLaunch(nullptr, s), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooGraphInstantiate(nullptr, graph), fooErrorInvalidValue);
  EXPECT_CODE(fooStreamEndCapture(s, nullptr), fooErrorInvalidValue);
  // The dot file has a node per work item and an edge between consecutive ones.
  FILE* file = std::fopen(dot.c_str(), "r");
  EXPECT(file != nullptr);
  if (file != nullptr) {
    std::string text(1 << 16, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), file));
    std::fclose(file);
    std::remove(dot.c_str());
    EXPECT(text.rfind("digraph", 0) == 0 && text.find("n4 -> n5") != std::string::npos);
  }
  OK(fooFree(counter));
  OK(fooStreamDestroy(s));
}

// Native work (a vendor library's, fooLaunchNative) is captured like a kernel: each replay makes the
// call again, in order with the captured kernels, with the arguments copied at capture.
void test_captured_native_work() {
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  int* counter = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), 4 * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, 4 * sizeof(int), s));
  OK(fooStreamSynchronize(s));
  TestNativeStamp native{};
  OK(fooPointerGetNativeHandle(counter, &native.counter_buffer, &native.counter_offset));
  OK(fooPointerGetNativeHandle(counter + 2, &native.slot_buffer, &native.slot_offset));
  OK(fooStreamBeginCapture(s, fooStreamCaptureModeThreadLocal));
  OK(stamp(counter, counter + 1, s));
  OK(fooLaunchNative(s, "test native stamp", &test_native_stamp, &native, sizeof(native)));
  native.slot_offset = native.counter_offset; // changes nothing: the capture copied the arguments
  OK(stamp(counter, counter + 3, s));
  fooGraph_t graph = nullptr;
  OK(fooStreamEndCapture(s, &graph));
  size_t nodes = 0;
  OK(fooGraphGetNodeCount(graph, &nodes));
  EXPECT(nodes == 3);
  OK(fooStreamSynchronize(s));
  EXPECT(read_ints(counter, 1)[0] == 0); // recorded, not run
  fooGraphExec_t exec = nullptr;
  OK(fooGraphInstantiate(&exec, graph));
  OK(fooGraphDestroy(graph));
  for (int replay = 0; replay < 2; ++replay) {
    OK(fooGraphLaunch(exec, s));
  }
  OK(fooStreamSynchronize(s));
  const auto values = read_ints(counter, 4);
  EXPECT(values[0] == 6 && values[1] == 3 && values[2] == 4 && values[3] == 5); // the last replay, in order
  OK(fooGraphExecDestroy(exec));
  OK(fooFree(counter));
  OK(fooStreamDestroy(s));
}

// Parameter blocks are copied when captured, as at launch: a replay uses the captured values.
void test_captured_parameters_and_copies() {
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  constexpr size_t n = 4096;
  unsigned char* data = nullptr;
  unsigned char* pinned = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&data), n));
  OK(fooMallocHost(reinterpret_cast<void**>(&pinned), n));
  std::memset(pinned, 0, n);
  OK(fooStreamBeginCapture(s, fooStreamCaptureModeThreadLocal));
  unsigned char value = 7;
  const fooKernelArg fill[] = {
      test_arg(fooKernelArgBuffer, data, 0),
      test_arg(fooKernelArgValue, &value, sizeof(value)),
      test_arg(fooKernelArgValue, &n, sizeof(n))};
  OK(fooLaunchKernelArgs(test_kernels()->fill, fooDim3{4, 1, 1}, fooDim3{64, 1, 1}, fill, 3, s));
  value = 1;
  OK(fooMemcpyAsync(pinned, data, n, fooMemcpyDeviceToHost, s)); // pinned: captured
  fooGraph_t graph = nullptr;
  OK(fooStreamEndCapture(s, &graph));
  fooGraphExec_t exec = nullptr;
  OK(fooGraphInstantiate(&exec, graph));
  OK(fooGraphDestroy(graph));
  OK(fooStreamSynchronize(s));
  EXPECT(pinned[0] == 0 && pinned[n - 1] == 0);
  OK(fooGraphLaunch(exec, s));
  OK(fooStreamSynchronize(s));
  EXPECT(pinned[0] == 7 && pinned[n - 1] == 7);
  OK(fooGraphExecDestroy(exec));
  OK(fooFreeHost(pinned));
  OK(fooFree(data));
  OK(fooStreamDestroy(s));
}

// Streams that wait for an event recorded in a capture join it, and must join back.
void test_streams_join_a_capture() {
  fooStream_t origin = nullptr;
  fooStream_t side = nullptr;
  OK(fooStreamCreate(&origin));
  OK(fooStreamCreate(&side));
  fooEvent_t fork = nullptr;
  fooEvent_t join = nullptr;
  OK(fooEventCreateWithFlags(&fork, fooEventDisableTiming));
  OK(fooEventCreate(&join));
  int* counter = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), 4 * sizeof(int)));
  OK(fooMemsetAsync(counter, 0, 4 * sizeof(int), origin));
  OK(fooStreamSynchronize(origin));
  for (const bool join_back : {true, false}) {
    OK(fooStreamBeginCapture(origin, fooStreamCaptureModeGlobal));
    OK(stamp(counter, counter + 1, origin));
    OK(fooEventRecord(fork, origin));
    OK(fooStreamWaitEvent(side, fork, 0));
    unsigned long long origin_id = 0;
    unsigned long long side_id = 0;
    fooStreamCaptureStatus status = fooStreamCaptureStatusNone;
    OK(fooStreamGetCaptureInfo(origin, &status, &origin_id));
    OK(fooStreamGetCaptureInfo(side, &status, &side_id));
    EXPECT(status == fooStreamCaptureStatusActive && side_id == origin_id);
    OK(stamp(counter, counter + 2, side));
    OK(fooEventRecord(join, side));
    if (join_back) {
      OK(fooStreamWaitEvent(origin, join, 0));
    }
    OK(stamp(counter, counter + 3, origin));
    fooGraph_t graph = nullptr;
    if (!join_back) {
      EXPECT_CODE(fooStreamEndCapture(side, &graph), fooErrorStreamCaptureUnjoined); // not its origin
      EXPECT_CODE(fooStreamEndCapture(origin, &graph), fooErrorStreamCaptureUnjoined);
      OK(fooStreamIsCapturing(side, &status));
      EXPECT(status == fooStreamCaptureStatusNone);
      continue;
    }
    OK(fooStreamEndCapture(origin, &graph));
    size_t nodes = 0;
    OK(fooGraphGetNodeCount(graph, &nodes));
    EXPECT(nodes == 3);
    fooGraphExec_t exec = nullptr;
    OK(fooGraphInstantiate(&exec, graph));
    OK(fooGraphDestroy(graph));
    OK(fooEventQuery(join)); // recorded in an ended capture: complete
    OK(fooGraphLaunch(exec, origin));
    OK(fooStreamSynchronize(origin));
    const auto values = read_ints(counter, 4);
    EXPECT(values[0] == 3 && values[1] == 0 && values[2] == 1 && values[3] == 2);
    OK(fooGraphExecDestroy(exec));
  }
  // A capture cannot wait for work outside it that has not completed.
  fooEvent_t outside = nullptr;
  OK(fooEventCreate(&outside));
  SleepParams sleep{200000};
  OK(fooLaunchKernel(test_kernels()->sleep, kUnit, kUnit, &sleep, sizeof(sleep), 0, side));
  OK(fooEventRecord(outside, side));
  OK(fooStreamBeginCapture(origin, fooStreamCaptureModeGlobal));
  EXPECT_CODE(fooStreamWaitEvent(origin, outside, 0), fooErrorStreamCaptureIsolation);
  fooGraph_t graph = nullptr;
  EXPECT_CODE(fooStreamEndCapture(origin, &graph), fooErrorStreamCaptureInvalidated);
  OK(fooStreamSynchronize(side));
  OK(fooEventDestroy(outside));
  OK(fooEventDestroy(fork));
  OK(fooEventDestroy(join));
  OK(fooFree(counter));
  OK(fooStreamDestroy(side));
  OK(fooStreamDestroy(origin));
}

void test_conflicting_calls() {
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  const auto global = fooStreamCaptureModeGlobal;
  expect_conflict("fooStreamSynchronize", s, global, [&] { return fooStreamSynchronize(s); });
  expect_conflict("fooStreamQuery", s, global, [&] { return fooStreamQuery(s); });
  expect_conflict("fooDeviceSynchronize", s, global, [] { return fooDeviceSynchronize(); });
  expect_conflict("fooStreamDestroy", s, global, [&] { return fooStreamDestroy(s); });
  fooEvent_t event = nullptr;
  OK(fooEventCreate(&event));
  expect_conflict("fooEventQuery", s, global, [&] {
    OK(fooEventRecord(event, s));
    return fooEventQuery(event);
  });
  expect_conflict("fooEventSynchronize", s, global, [&] {
    OK(fooEventRecord(event, s));
    return fooEventSynchronize(event);
  });
  OK(fooEventDestroy(event));
  int* device = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&device), sizeof(int)));
  int host = 0;
  const auto to_host = fooMemcpyDeviceToHost;
  const auto pageable_copy = [&] { return fooMemcpyAsync(&host, device, sizeof(int), to_host, s); };
  const auto relaxed = fooStreamCaptureModeRelaxed;
  expect_conflict("a pageable fooMemcpyAsync", s, relaxed, pageable_copy); // in every mode
  // The "potentially unsafe" calls, by mode: the capturing thread unless relaxed; others in global mode.
  const auto blocking_copy = [&] { return fooMemcpy(&host, device, sizeof(int), fooMemcpyDeviceToHost); };
  const auto from_another_thread = [&] {
    fooError_t error = fooSuccess;
    std::thread([&] { error = blocking_copy(); }).join();
    return error;
  };
  expect_conflict("fooMemcpy (global)", s, global, blocking_copy);
  expect_conflict("fooMemcpy on another thread (global)", s, global, from_another_thread);
  expect_conflict("fooMemcpy (thread_local)", s, fooStreamCaptureModeThreadLocal, blocking_copy);
  const auto thread_local_mode = fooStreamCaptureModeThreadLocal;
  for (const auto mode : {thread_local_mode, relaxed}) {
    OK(fooStreamBeginCapture(s, mode));
    OK(from_another_thread());
    if (mode == relaxed) {
      OK(blocking_copy());
    }
    fooGraph_t graph = nullptr;
    OK(fooStreamEndCapture(s, &graph));
    OK(fooGraphDestroy(graph));
  }
  OK(fooFree(device));
  OK(fooStreamDestroy(s));
}

// Graph handles follow the rule of every handle (runtime.h): a destroyed graph or executable graph is
// refused by every call, a second destroy included, also after new graphs were made.
void test_stale_graph_handles() {
  fooStream_t s = nullptr;
  OK(fooStreamCreate(&s));
  int calls = 0;
  const auto capture = [&] {
    fooGraph_t graph = nullptr;
    OK(fooStreamBeginCapture(s, fooStreamCaptureModeGlobal));
    OK(fooLaunchHostFunc(s, &count_call, &calls));
    OK(fooStreamEndCapture(s, &graph));
    return graph;
  };
  fooGraph_t old_graph = nullptr;
  fooGraphExec_t old_exec = nullptr;
  for (int round = 0; round < 2; ++round) { // create, destroy, create and destroy again
    old_graph = capture();
    OK(fooGraphInstantiate(&old_exec, old_graph));
    OK(fooGraphDestroy(old_graph));
    OK(fooGraphExecDestroy(old_exec));
    EXPECT_CODE(fooGraphDestroy(old_graph), fooErrorInvalidResourceHandle);
    EXPECT_CODE(fooGraphExecDestroy(old_exec), fooErrorInvalidResourceHandle);
  }
  fooGraph_t graph = capture();
  fooGraphExec_t exec = nullptr;
  OK(fooGraphInstantiate(&exec, graph));
  EXPECT(graph != old_graph && exec != old_exec);
  size_t nodes = 0;
  EXPECT_CODE(fooGraphGetNodeCount(old_graph, &nodes), fooErrorInvalidResourceHandle);
  fooGraphExec_t none = nullptr;
  EXPECT_CODE(fooGraphInstantiate(&none, old_graph), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooGraphLaunch(old_exec, s), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooGraphDestroy(old_graph), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooGraphExecDestroy(old_exec), fooErrorInvalidResourceHandle);
  // A graph is no executable graph, nor the other way round.
  const auto graph_as_exec = reinterpret_cast<fooGraphExec_t>(graph);
  const auto exec_as_graph = reinterpret_cast<fooGraph_t>(exec);
  EXPECT_CODE(fooGraphLaunch(graph_as_exec, s), fooErrorInvalidResourceHandle);
  EXPECT_CODE(fooGraphGetNodeCount(exec_as_graph, &nodes), fooErrorInvalidResourceHandle);
  OK(fooGraphGetNodeCount(graph, &nodes));
  EXPECT(nodes == 1);
  OK(fooGraphLaunch(exec, s));
  OK(fooStreamSynchronize(s));
  EXPECT(calls == 1); // only the live executable graph ran
  OK(fooGraphDestroy(graph));
  OK(fooGraphExecDestroy(exec));
  OK(fooStreamDestroy(s));
}

// A graph of only kernels, device-to-device copies and fills, captured on one stream (what a driver
// may run as one device-side command list, as the OpenCL driver does on cl_khr_command_buffer):
// each launch runs all of it in order with the captured parameters, on the stream it is given and on
// others; a raised ErrorFlag fails the synchronisation after every launch that raises it.
void test_kernel_only_graph() {
  fooStream_t s = nullptr;
  fooStream_t other = nullptr;
  OK(fooStreamCreate(&s));
  OK(fooStreamCreate(&other));
  constexpr int kStamps = 20;
  constexpr size_t n = 1000;
  int* counter = nullptr;
  unsigned char* a = nullptr;
  unsigned char* b = nullptr;
  OK(fooMalloc(reinterpret_cast<void**>(&counter), (kStamps + 1) * sizeof(int)));
  OK(fooMalloc(reinterpret_cast<void**>(&a), 2 * n));
  OK(fooMalloc(reinterpret_cast<void**>(&b), n));
  OK(fooMemsetAsync(counter, 0, (kStamps + 1) * sizeof(int), s));
  OK(fooMemsetAsync(a, 0, 2 * n, s));
  OK(fooStreamSynchronize(s));
  OK(fooStreamBeginCapture(s, fooStreamCaptureModeThreadLocal));
  for (int i = 0; i < kStamps; ++i) {
    OK(stamp(counter, counter + 1 + i, s));
  }
  unsigned char value = 5;
  OK(test_launch_fill(fooDim3{4, 1, 1}, fooDim3{64, 1, 1}, a, value, n, s));
  value = 9; // changes nothing: the capture copied the arguments
  OK(fooMemcpyAsync(a + n, a, n, fooMemcpyDeviceToDevice, s)); // the fill's bytes
  OK(fooMemsetAsync(a + 10, 3, 20, s)); // after the copy: only the first half
  OK(fooMemcpyAsync(b, a, n, fooMemcpyDeviceToDevice, s));
  OK(test_launch_trap(fooDim3{2, 1, 1}, 0, "never raised", s));
  fooGraph_t graph = nullptr;
  OK(fooStreamEndCapture(s, &graph));
  size_t nodes = 0;
  OK(fooGraphGetNodeCount(graph, &nodes));
  EXPECT(nodes == kStamps + 5);
  fooGraphExec_t exec = nullptr;
  OK(fooGraphInstantiate(&exec, graph));
  OK(fooGraphDestroy(graph));
  OK(fooStreamSynchronize(s));
  EXPECT(read_ints(counter, 1)[0] == 0); // recorded, not run
  for (int launch = 0; launch < 3; ++launch) {
    OK(fooGraphLaunch(exec, s));
  }
  OK(fooStreamSynchronize(s));
  auto values = read_ints(counter, kStamps + 1);
  EXPECT(values[0] == 3 * kStamps);
  for (int i = 0; i < kStamps; ++i) {
    EXPECT(values[1 + i] == 2 * kStamps + i); // the last launch's stamps, in order
  }
  std::vector<unsigned char> bytes(2 * n);
  std::vector<unsigned char> copied(n);
  OK(fooMemcpy(bytes.data(), a, 2 * n, fooMemcpyDeviceToHost));
  OK(fooMemcpy(copied.data(), b, n, fooMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    const unsigned char first = i >= 10 && i < 30 ? 3 : 5;
    if (bytes[i] != first || bytes[n + i] != 5 || copied[i] != first) {
      std::fprintf(
          stderr, "byte %zu: %d %d %d, expected %d 5 %d\n", i, bytes[i], bytes[n + i], copied[i], first, first);
      ++failures;
      break;
    }
  }
  // On two other streams in turn: launches of one executable graph are serialised (one at a time, in
  // an order the contract does not fix between streams), so the last stamp is the last count.
  OK(fooGraphLaunch(exec, other));
  OK(fooGraphLaunch(exec, nullptr));
  OK(fooGraphLaunch(exec, other));
  OK(fooStreamSynchronize(other));
  OK(fooStreamSynchronize(nullptr));
  values = read_ints(counter, kStamps + 1);
  EXPECT(values[0] == 6 * kStamps && values[kStamps] == 6 * kStamps - 1);
  OK(fooGraphExecDestroy(exec));

  // A graph whose kernel raises its ErrorFlag: every launch's failure is reported, with its message.
  OK(fooStreamBeginCapture(s, fooStreamCaptureModeThreadLocal));
  OK(stamp(counter, counter + 1, s));
  OK(stamp(counter, counter + 2, s));
  OK(test_launch_trap(fooDim3{2, 1, 1}, 1, "graph trap 31", s));
  OK(fooStreamEndCapture(s, &graph));
  OK(fooGraphInstantiate(&exec, graph));
  OK(fooGraphDestroy(graph));
  OK(fooMemsetAsync(counter, 0, sizeof(int), s));
  for (int launch = 0; launch < 2; ++launch) {
    OK(fooGraphLaunch(exec, s));
    EXPECT_CODE(fooStreamSynchronize(s), fooErrorLaunchFailure);
    EXPECT(std::strstr(fooGetLastErrorMessage(), "graph trap 31") != nullptr);
    OK(fooStreamSynchronize(s));
  }
  values = read_ints(counter, 3);
  EXPECT(values[0] == 4 && values[1] == 2 && values[2] == 3); // the last launch's stamps
  OK(fooGraphExecDestroy(exec));

  OK(fooFree(b));
  OK(fooFree(a));
  OK(fooFree(counter));
  OK(fooStreamDestroy(other));
  OK(fooStreamDestroy(s));
}

void test_graphs() {
  test_capture_and_replay();
  test_kernel_only_graph();
  test_stale_graph_handles();
  test_captured_parameters_and_copies();
  test_captured_native_work();
  test_streams_join_a_capture();
  test_conflicting_calls();
}

const RegisterCheck registered(&test_graphs);

} // namespace
