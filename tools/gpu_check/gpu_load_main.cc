// gpu-load: keeps every GPU of this machine busy for the GPU check, so that
// nvidia-smi and the clients have something to read: it allocates --mib of
// memory on each GPU and fills it over and over (cuMemsetD8) until
// --seconds pass or it is stopped. Each GPU then lists it as a compute
// process, with its memory. It uses CUDA's driver API, loaded with dlopen
// from the driver's libcuda.so.1, so it builds without CUDA.
//
// Prints "ready" once the memory is held; exits 1 (naming why) when there
// is no CUDA or no GPU.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"

ABSL_FLAG(std::string, cuda_library, "libcuda.so.1", "CUDA's driver library.");
ABSL_FLAG(int64_t, mib, 1024, "MiB to hold on each GPU.");
ABSL_FLAG(int64_t, seconds, 120, "How long to keep the GPUs busy.");

namespace {

// The few entry points used, with the C types of NVIDIA's cuda.h (a stable
// ABI): CUresult is an int, CUdevice an int, CUcontext a pointer and
// CUdeviceptr a 64-bit integer.
struct Cuda {
  int (*init)(unsigned int);
  int (*device_count)(int*);
  int (*device_get)(int*, int);
  int (*primary_context)(void**, int);
  int (*set_current)(void*);
  int (*alloc)(uint64_t*, size_t);
  int (*memset)(uint64_t, unsigned char, size_t);
  int (*synchronize)();
};

template <typename F>
bool Bind(void* handle, const char* name, F*& f) {
  f = reinterpret_cast<F*>(dlsym(handle, name));
  return f != nullptr;
}

int Fail(const std::string& why) {
  std::cerr << "gpu-load: " << why << "\n";
  return 1;
}

int Run() {
  const std::string library = absl::GetFlag(FLAGS_cuda_library);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return Fail(absl::StrCat("cannot load ", library, ": ", dlerror()));
  Cuda cuda{};
  for (auto [name, ok] : {
           std::pair{"cuInit", Bind(handle, "cuInit", cuda.init)},
           {"cuDeviceGetCount", Bind(handle, "cuDeviceGetCount", cuda.device_count)},
           {"cuDeviceGet", Bind(handle, "cuDeviceGet", cuda.device_get)},
           {"cuDevicePrimaryCtxRetain",
            Bind(handle, "cuDevicePrimaryCtxRetain", cuda.primary_context)},
           {"cuCtxSetCurrent", Bind(handle, "cuCtxSetCurrent", cuda.set_current)},
           {"cuMemAlloc_v2", Bind(handle, "cuMemAlloc_v2", cuda.alloc)},
           {"cuMemsetD8_v2", Bind(handle, "cuMemsetD8_v2", cuda.memset)},
           {"cuCtxSynchronize", Bind(handle, "cuCtxSynchronize", cuda.synchronize)},
       }) {
    if (!ok) return Fail(absl::StrCat(library, " has no ", name));
  }
  int count = 0;
  if (int r = cuda.init(0); r != 0) return Fail(absl::StrCat("cuInit failed (", r, ")"));
  if (int r = cuda.device_count(&count); r != 0 || count == 0) {
    return Fail(absl::StrCat("no GPU (cuDeviceGetCount: ", r, ", ", count, ")"));
  }
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_mib)) << 20;
  std::vector<void*> contexts(count);
  std::vector<uint64_t> memory(count);
  for (int i = 0; i < count; ++i) {
    int device = 0;
    if (int r = cuda.device_get(&device, i); r != 0) {
      return Fail(absl::StrCat("GPU ", i, ": cuDeviceGet failed (", r, ")"));
    }
    if (int r = cuda.primary_context(&contexts[i], device); r != 0) {
      return Fail(absl::StrCat("GPU ", i, ": cuDevicePrimaryCtxRetain failed (", r, ")"));
    }
    if (int r = cuda.set_current(contexts[i]); r != 0) {
      return Fail(absl::StrCat("GPU ", i, ": cuCtxSetCurrent failed (", r, ")"));
    }
    if (int r = cuda.alloc(&memory[i], bytes); r != 0) {
      return Fail(absl::StrCat("GPU ", i, ": cuMemAlloc_v2 of ", bytes, " bytes failed (", r,
                               ")"));
    }
  }
  std::cout << "ready: " << absl::GetFlag(FLAGS_mib) << " MiB held on each of " << count
            << " GPU(s)" << std::endl;
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::seconds(absl::GetFlag(FLAGS_seconds));
  for (unsigned char round = 0; std::chrono::steady_clock::now() < end; ++round) {
    for (int i = 0; i < count; ++i) {
      cuda.set_current(contexts[i]);
      cuda.memset(memory[i], round, bytes);
    }
    for (int i = 0; i < count; ++i) {
      cuda.set_current(contexts[i]);
      cuda.synchronize();
    }
  }
  return 0;  // the driver frees what the process held
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "keeps every GPU busy for the GPU check: holds --mib on each and fills "
      "it until --seconds pass or it is stopped; prints \"ready\" once the "
      "memory is held.\n\nUsage: gpu-load [--mib 1024] [--seconds 120]");
  metrics::common::ListFlagsInHelp("tools/gpu_check/gpu_load_main.cc");
  std::vector<char*> args = metrics::common::DashedFlagsToUnderscores(argc, argv);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
