// An autoencoder over synthetic 8-d readings that lie near a 3-d subspace,
// spread over three files: the trainer (one optimizer over the encoder's
// and the decoder's parameters, batches cut by hand in a while loop), a
// logger constructed here with std::cout, and this driver.
// Usage: autoencoder [batch_size]
#include "logger.h"
#include "trainer.h"

#include <cstdlib>
#include <iostream>

int main(int argc, char **argv) {
  const int64_t batch = argc > 1 ? std::atol(argv[1]) : 32;
  torch::manual_seed(11);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  const int64_t n = 384;
  auto basis = torch::randn({3, 8});
  auto data = (torch::randn({n, 3}).matmul(basis) + 0.05 * torch::randn({n, 8}))
                  .to(device);

  Logger log(std::cout);
  Encoder encoder;
  Decoder decoder;
  encoder->to(device);
  decoder->to(device);
  Trainer trainer(encoder, decoder, log);
  for (int epoch = 1; epoch <= 6; ++epoch)
    log.metric("epoch", epoch, "train_loss", trainer.epoch(data, batch));
  log.metric("final", 0, "mse", trainer.evaluate(data));
  return EXIT_SUCCESS;
}
