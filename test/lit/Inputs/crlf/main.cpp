// Input of crlf.test (turned into CRLF line endings by the test).
#include <torch/torch.h>

#include <iostream>

double evaluate(torch::nn::Linear &fc) {
  return fc->forward(torch::ones({1, 2})).sum().item<double>();
}

int main() {
	auto fc = torch::nn::Linear(2, 1);
	torch::optim::SGD opt(fc->parameters(), 0.1);
	for (int epoch = 0; epoch < 2; ++epoch) {
		std::cout << "epoch "
		          << epoch << std::endl;
		std::cout << "eval " << evaluate(fc) << std::endl;
	}
	torch::save(fc, "fc.pt");
	std::cout << "saved" << std::endl;
}
