#pragma once

// Paths the build knows (test/runtime/CMakeLists.txt generates their one
// unit): not -D options of the test units, whose commands would then name
// this checkout and miss ccache in every other clone.
namespace ddp_test::paths {
extern const char* const source_dir;
extern const char* const binary_dir;
extern const char* const ddprun;
extern const char* const init_probe;
extern const char* const train_probe;
extern const char* const python;
extern const char* const torchrun;
} // namespace ddp_test::paths

#define DDP_TEST_SOURCE_DIR (::ddp_test::paths::source_dir)
#define DDP_TEST_BINARY_DIR (::ddp_test::paths::binary_dir)
#define DDPRUN_PATH (::ddp_test::paths::ddprun)
#define DDP_INIT_PROBE_PATH (::ddp_test::paths::init_probe)
#define DDP_TRAIN_PROBE_PATH (::ddp_test::paths::train_probe)
#define DDP_TEST_PYTHON (::ddp_test::paths::python)
#define DDP_TEST_TORCHRUN (::ddp_test::paths::torchrun)
