#pragma once
// Nothing but includes: the prefix reads on after it.
#include <torch/nn.h>
