// Must not compile: common is the bottom layer.
#include "p2p/request.h"
