// Symbol visibility for the public API. The library is built with hidden visibility; only
// declarations marked ORBITE_API are exported from liborbite.so.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define ORBITE_API __attribute__((visibility("default")))
#else
#define ORBITE_API
#endif
