# TorchConfig.cmake finds libtorch, libc10 (and, in static builds, the rest)
# with find_library(... PATHS <prefix>/lib), which searches the system
# folders before PATHS: where Debian's LibTorch is installed, a wheel's
# TorchConfig hands out Debian's libtorch.so and libc10.so beside the wheel's
# libtorch_cpu.so, two LibTorch versions in one process (it aborts in c10's
# dispatcher, or worse, runs). Included right after find_package(Torch), by
# ddpify's build and by its package: every library of TORCH_LIBRARIES (and
# TORCH_LIBRARY) that the found Torch has in its own lib/ becomes that one.
if(TORCH_INSTALL_PREFIX)
  set(_ddpify_torch_libs)
  foreach(_ddpify_lib IN LISTS TORCH_LIBRARIES)
    if(IS_ABSOLUTE "${_ddpify_lib}" AND EXISTS "${_ddpify_lib}")
      get_filename_component(_ddpify_name "${_ddpify_lib}" NAME)
      set(_ddpify_own "${TORCH_INSTALL_PREFIX}/lib/${_ddpify_name}")
      if(EXISTS "${_ddpify_own}" AND NOT _ddpify_lib STREQUAL _ddpify_own)
        message(STATUS "ddpify: ${_ddpify_own}, not ${_ddpify_lib} "
          "(another LibTorch's, found by TorchConfig)")
        set(_ddpify_lib "${_ddpify_own}")
      endif()
    endif()
    list(APPEND _ddpify_torch_libs "${_ddpify_lib}")
  endforeach()
  set(TORCH_LIBRARIES "${_ddpify_torch_libs}")
  set(_ddpify_own
    "${TORCH_INSTALL_PREFIX}/lib/${CMAKE_SHARED_LIBRARY_PREFIX}torch${CMAKE_SHARED_LIBRARY_SUFFIX}")
  if(EXISTS "${_ddpify_own}")
    set(TORCH_LIBRARY "${_ddpify_own}")
  endif()
  unset(_ddpify_torch_libs)
  unset(_ddpify_lib)
  unset(_ddpify_name)
  unset(_ddpify_own)
endif()
