// A tiny program that uses the runtime the way a migrated program does, for
// the tests of ddp::init and ddprun. It prints what init() found; a mode
// argument (after --local_rank stripping) selects what it does next:
//   (none)              print and exit 0
//   sum                 all-reduce rank+1 and print "sum=..."
//   fail R CODE         barrier; rank R exits CODE, the others sleep
//   fail-train R CODE   barrier; rank R exits CODE, the others all-reduce
//                       in a loop (a collective must fail, not hang)
//   ready-sleep DIR     write DIR/ready<rank> holding the pid, then sleep
// Uncaught exceptions (bad environment) end it as they would end any program.

#include <ddp/distributed.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>

int main(int argc, char** argv) {
  ddp::init(argc, argv);
  std::cout << "rank=" << ddp::rank() << " world=" << ddp::world_size()
            << " local_rank=" << ddp::local_rank()
            << " local_world=" << ddp::local_world_size()
            << " distributed=" << ddp::is_distributed()
            << " backend=" << ddp::backend_name()
            << " launcher=" << static_cast<int>(ddp::launcher())
            << " main=" << ddp::is_main_process() << " args=";
  for (int i = 1; i < argc; ++i) {
    std::cout << argv[i] << (i + 1 < argc ? "," : "");
  }
  std::cout << " argv_terminated=" << (argv[argc] == nullptr) << std::endl;

  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sum") {
    const auto sum = ddp::all_reduce(static_cast<int64_t>(ddp::rank() + 1));
    std::cout << "rank " << ddp::rank() << " sum=" << sum << std::endl;
  } else if ((mode == "fail" || mode == "fail-train") && argc > 3) {
    const int failing = std::stoi(argv[2]);
    const int code = std::stoi(argv[3]);
    ddp::barrier();
    if (ddp::rank() == failing) {
      std::cerr << "rank " << failing << " fails with " << code << std::endl;
      std::_Exit(code);
    }
    if (mode == "fail") {
      std::this_thread::sleep_for(std::chrono::minutes(10));
    } else {
      auto t = torch::ones({1000});
      for (;;) {
        ddp::all_reduce(t); // throws once the peer is gone
      }
    }
  } else if (mode == "ready-sleep" && argc > 2) {
    {
      std::ofstream(std::string(argv[2]) + "/ready" +
                    std::to_string(ddp::rank()))
          << ::getpid() << "\n";
    }
    std::this_thread::sleep_for(std::chrono::minutes(10));
  }
  return 0;
}
