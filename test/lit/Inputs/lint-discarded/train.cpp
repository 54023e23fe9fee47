// Input of lint-ddp-discarded-move.test.
#include <ddp/ddp.h>
#include <torch/torch.h>

struct Batch {
  torch::Tensor data, target;
};

struct Holder {
  torch::Tensor weight;
  void place(torch::Device device) {
    weight.to(device); // positive: a member, assigned back
    this->weight.cuda(); // positive
  }
};

torch::Tensor moved(torch::Tensor t) { return t; }

void step(Batch &batch, const Batch &fixed, torch::Device device,
          torch::nn::Linear &fc) {
  batch.data.to(device);           // positive: assigned back
  batch.target.to(device, torch::kLong); // positive
  fixed.data.to(device);           // positive: const, no fix-it
  moved(batch.data).cpu();         // positive: not an lvalue, no fix-it
  if (batch.data.dim() == 1)
    batch.data.cuda();             // positive: the body of an if
  batch.data.to(device); // NOLINT(ddp-discarded-move)
  // Negatives: results used, a module moved in place, in-place ops.
  batch.data = batch.data.to(device);
  auto on_device = batch.target.to(device);
  fc->to(device);
  batch.data.mul_(2);
  (void)on_device;
}
