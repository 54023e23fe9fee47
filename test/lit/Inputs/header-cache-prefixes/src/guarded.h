#ifndef GUARDED_H
#define GUARDED_H

#include "umbrella.h"
#include <torch/optim.h>

inline torch::Tensor guarded(torch::Tensor t) { return t.cuda(); }

#endif // GUARDED_H
