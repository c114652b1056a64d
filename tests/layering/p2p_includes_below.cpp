// Must compile: p2p may use every layer below it (the control case of the probes beside it).
#include "common/net.h"
#include "p2p/request.h"
#include "platform/ibv_loader.h"
#include "topo/selector.h"
