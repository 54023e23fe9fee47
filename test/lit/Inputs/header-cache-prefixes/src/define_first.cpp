#include "define_first.h"

torch::Tensor use_defined(torch::Tensor t) { return defined_first(t); }
