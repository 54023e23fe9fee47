// Input of R2.test: the usual ways a program chooses a CUDA device.
#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <string>

// A global options struct whose fields start as CUDA.
struct Options {
  torch::DeviceType device_type = torch::kCUDA;
  torch::Device device = torch::kCUDA;
  int64_t batch_size = 64;
};
static Options options;

// Class members holding a CUDA device.
class Trainer {
public:
  explicit Trainer(int gpu_id) : device_(torch::kCUDA, gpu_id) {}
  torch::Tensor step(torch::Tensor x) { return x.cuda() * 2; }

private:
  torch::Device device_;
};

struct Holder {
  torch::Device device{torch::kCUDA};
};

torch::Device global_device(torch::kCUDA);

torch::Tensor uses_global(torch::Tensor t) { return t.cuda(); }

void pointer_device() {
  auto *device = new torch::Device(torch::kCUDA);
  auto t = torch::ones({1}).cuda();
  std::cout << t << '\n';
  delete device;
}

int main(int argc, char **argv) {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::Device copy_initialised =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  bool use_cuda = torch::cuda::is_available();
  torch::Device named_bool(use_cuda ? torch::kCUDA : torch::kCPU);
  const bool cpu_only = !torch::cuda::is_available();
  torch::Device negated(cpu_only ? torch::kCPU : torch::kCUDA);

  // A user's flag keeps deciding; only the CUDA branch changes.
  bool no_cuda = argc > 1;
  torch::Device flagged(!no_cuda && torch::cuda::is_available() ? torch::kCUDA
                                                                : torch::kCPU);

  auto *heap_device = new torch::Device(
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  std::unique_ptr<torch::Device> owned(new torch::Device(torch::kCUDA));

  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    std::cout << "CUDA available! Training on GPU." << std::endl;
    device_type = torch::kCUDA;
  } else {
    std::cout << "Training on CPU." << std::endl;
    device_type = torch::kCPU;
  }
  torch::Device from_if_else(device_type);

  int gpu_id = 0;
  torch::Device with_index(torch::kCUDA, gpu_id);
  auto temporary = torch::Device(torch::kCUDA, gpu_id);
  torch::Device from_string("cuda:0");
  auto temporary_from_string = torch::Device("cuda:1");

  auto options1 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  auto options2 = torch::TensorOptions().device(torch::kCUDA, 1);
  auto options3 = torch::dtype(torch::kFloat).device(torch::kCUDA);
  auto input = torch::rand({2, 784}, torch::kCUDA);
  auto zeros = torch::zeros({3}, torch::TensorOptions(torch::kCUDA));

  torch::Device from_options(options.device_type);

  // Negatives: CPU devices, strings, devices already chosen.
  torch::Device cpu_device(torch::kCPU);
  auto cpu_tensor = torch::rand({2}, torch::kCPU);
  torch::DeviceType cpu_type = torch::kCPU;
  torch::Device from_cpu_type(cpu_type);
  std::string note = "torch::Device(\"cuda:0\") and torch::kCUDA";
  auto moved = cpu_tensor.to(device);

  Trainer trainer(gpu_id);
  Holder holder;
  std::cout << copy_initialised << named_bool << negated << flagged
            << *heap_device << *owned << from_if_else << with_index
            << temporary << from_string << temporary_from_string
            << options1 << options2 << options3 << input.sizes()
            << zeros.sizes() << from_options << from_cpu_type << note
            << moved.sizes() << holder.device << options.device
            << trainer.step(input).sizes() << uses_global(input).sizes()
            << '\n';
  pointer_device();
  delete heap_device;
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}

// Ternaries of Devices no Device is constructed from: on CUDA's
// availability itself, exactly ddp::device(); on a variable, only the CUDA
// branch changes (the variable stays read).
torch::Device pick_device() {
  return torch::cuda::is_available() ? torch::Device("cuda:0")
                                     : torch::Device("cpu");
}
torch::Device pick_indexed() {
  auto chosen = !torch::cuda::is_available() ? torch::Device(torch::kCPU)
                                             : torch::Device(torch::kCUDA, 0);
  return chosen;
}
torch::Device pick_by_flag(bool use_gpu) {
  return use_gpu ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}
