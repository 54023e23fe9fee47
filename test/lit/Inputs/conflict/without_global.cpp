#include "helper.h"

torch::Tensor twice(torch::Tensor t) { return place(t) * 2; }
