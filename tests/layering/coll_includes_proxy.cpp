// Must not compile: the collectives reach the data path through p2p's request state only.
#include "proxy/engine_core.h"
