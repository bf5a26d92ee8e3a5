// libFuzzer target (FABPERF_FUZZ=ON, clang): the control protocol's frame decoder, message
// parsers and authentication text parsers. scripts/fuzz-smoke builds and runs it.
#include "fuzz/fuzz_one.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fabperf::fuzz::fuzz_one(data, size);
  return 0;
}
