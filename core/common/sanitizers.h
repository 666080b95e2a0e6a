// Which sanitizer compiles this code, for the few places that must act
// differently under one. gcc says so with __SANITIZE_THREAD__ and
// __SANITIZE_ADDRESS__; clang (the ASan + UBSan and fuzz build) only
// through __has_feature.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define MDDP_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MDDP_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MDDP_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define MDDP_ASAN 1
#endif
#endif
