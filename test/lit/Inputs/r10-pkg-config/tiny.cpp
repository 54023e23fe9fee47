// R10-pkg-config.test: built with nothing but `pkg-config --cflags --libs
// ddpify`.
#include <ddp/ddp.h>

#include <cstdio>

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  std::printf("world %d main %d\n", ddp::world_size(),
              ddp::is_main_process() ? 1 : 0);
  return 0;
}
