# The project's LibTorch macro, called where LibTorch is needed.
macro(use_libtorch)
  find_package(Torch REQUIRED)
endmacro()
