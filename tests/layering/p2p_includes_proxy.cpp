// Must not compile: p2p sits below the proxy (tests/layering/CMakeLists.txt expects the error).
#include "proxy/engine_core.h"
