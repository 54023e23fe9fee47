#include <ddp/distributed.h>

#include <iostream>

int main(int argc, char** argv) {
  ddp::init(argc, argv);
  const auto sum = ddp::all_reduce(static_cast<int64_t>(1));
  std::cout << "consumer rank=" << ddp::rank() << " world=" << ddp::world_size()
            << " sum=" << sum << std::endl;
  return 0;
}
