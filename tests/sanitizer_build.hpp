#pragma once
// Whether this build runs under AddressSanitizer, in gcc's spelling or
// clang's (clang 14, the sanitize preset's compiler, defines no
// __SANITIZE_ADDRESS__): tests that run the CLI many times shrink their work
// under it, where the reference runs several times slower.
namespace yoco_test {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif
}  // namespace yoco_test
