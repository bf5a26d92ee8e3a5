// libFuzzer target (FABPERF_FUZZ=ON, clang): the TCP data connections' challenge-response codec
// on both ends. scripts/fuzz-smoke builds and runs it.
#include "fuzz/fuzz_data_hello_one.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fabperf::fuzz::fuzz_data_hello_one(data, size);
  return 0;
}
