# Asserts that each of BINARIES loads LibTorch's libraries (libtorch*,
# libc10*) from TORCH_LIB_DIR only, each once: two LibTorch versions in one
# process (TorchConfig.cmake can hand out another LibTorch's libc10.so; see
# cmake/ddpifyTorchLibrary.cmake) must fail here, not at run time.
#   cmake -DBINARIES=a;b -DTORCH_LIB_DIR=dir -P one_libtorch.cmake
cmake_policy(SET CMP0057 NEW)
get_filename_component(want "${TORCH_LIB_DIR}" REALPATH)
foreach(binary IN LISTS BINARIES)
  execute_process(COMMAND ldd "${binary}" OUTPUT_VARIABLE out
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ldd ${binary} failed (${rc})")
  endif()
  string(REGEX MATCHALL "lib(torch|c10)[A-Za-z0-9_.]* => [^ \n]+" loaded "${out}")
  if(NOT loaded)
    message(FATAL_ERROR "${binary} loads no LibTorch library:\n${out}")
  endif()
  set(seen)
  foreach(entry IN LISTS loaded)
    string(REGEX REPLACE " => .*" "" soname "${entry}")
    string(REGEX REPLACE ".* => " "" path "${entry}")
    string(REGEX REPLACE "\\.so.*" "" stem "${soname}")
    if(stem IN_LIST seen)
      message(FATAL_ERROR "${binary} loads ${stem} twice:\n${out}")
    endif()
    list(APPEND seen "${stem}")
    get_filename_component(dir "${path}" DIRECTORY)
    get_filename_component(dir "${dir}" REALPATH)
    if(NOT dir STREQUAL want)
      message(FATAL_ERROR "${binary} loads ${soname} from ${dir}, not from "
        "${want}:\n${out}")
    endif()
  endforeach()
  message(STATUS "${binary}: ${seen} from ${want}")
endforeach()
