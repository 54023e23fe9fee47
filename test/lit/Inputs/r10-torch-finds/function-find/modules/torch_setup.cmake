# LibTorch, found inside a function.
function(setup_torch)
  find_package(Torch REQUIRED)
  set(TORCH_INCLUDE_DIRS "${TORCH_INCLUDE_DIRS}" PARENT_SCOPE)
  set(TORCH_LIBRARY "${TORCH_LIBRARY}" PARENT_SCOPE)
endfunction()
