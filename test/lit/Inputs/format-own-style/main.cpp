// Input of format-own-style.test: indented four spaces, lines up to 98
// columns wide, no .clang-format above it (the test copies it out of the repository).
#include <torch/torch.h>

#include <iostream>

int main() {
    auto model = torch::nn::Linear(4, 1);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int epoch = 0; epoch < 2; ++epoch) {
        auto loss = model->forward(torch::ones({8, 4})).pow(2).mean();
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        std::cout << "epoch " << epoch << " training loss " << loss.item<float>() << '\n';
        std::cout << "epoch " << epoch << " done" << '\n';
    }
}
