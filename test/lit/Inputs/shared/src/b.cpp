#include <ddp/ddp.h>
#include "model.h"

torch::Tensor twice(torch::Tensor t) { return to_gpu(t) * 2 + t.cuda(); }
