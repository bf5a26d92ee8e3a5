#pragma once
// What a test must know about the sanitizer runtime it runs under: some things a test measures
// (resident memory, descriptors) are also spent by the runtime itself.
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define FABPERF_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FABPERF_TEST_ASAN 1
#endif
#endif

#ifdef FABPERF_TEST_ASAN
// From the sanitizer runtime (sanitizer/allocator_interface.h, which GCC 12 does not ship).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();  // NOLINT(bugprone-reserved-identifier)
#endif

namespace fabperf::test {

// ASan and UBSan (built together here) need descriptors of their own: UBSan's vptr check probes
// memory through a pipe, so a process held at its descriptor limit reports a false "invalid vptr"
// and halts. Tests that exhaust descriptors on purpose skip there.
inline constexpr bool kUnderAsan =
#ifdef FABPERF_TEST_ASAN
    true;
#else
    false;
#endif

}  // namespace fabperf::test
