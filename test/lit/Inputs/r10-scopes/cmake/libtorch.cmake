# Where this project finds LibTorch.
find_package(Torch REQUIRED)
