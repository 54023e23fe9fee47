# ctest runtime.package_refuses_other_libtorch (cmake -P): a project that
# finds another LibTorch than the one the ddp runtime was built against is
# stopped at configure time by find_package(ddpify), with a message naming
# both; with the runtime's own LibTorch it configures.
#   -DDDPIFY_BUILD_DIR= -DOWN_TORCH_DIR= -DOTHER_TORCH_DIR= -DWORK_DIR=
#   -DGENERATOR=
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/src")
file(WRITE "${WORK_DIR}/src/CMakeLists.txt" "
cmake_minimum_required(VERSION 3.20)
project(other_libtorch CXX)
find_package(Torch REQUIRED)
find_package(ddpify REQUIRED CONFIG)
")
function(configure name torch_dir result output)
  get_filename_component(caffe2 "${torch_dir}/../Caffe2" ABSOLUTE)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/src" -B "${WORK_DIR}/${name}"
      -G "${GENERATOR}" "-DTorch_DIR=${torch_dir}" "-DCaffe2_DIR=${caffe2}"
      "-Dddpify_DIR=${DDPIFY_BUILD_DIR}"
    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${result} "${code}" PARENT_SCOPE)
  set(${output} "${out}${err}" PARENT_SCOPE)
endfunction()

configure(other "${OTHER_TORCH_DIR}" code text)
if(code EQUAL 0)
  message(FATAL_ERROR "configured with the other LibTorch (${OTHER_TORCH_DIR}):\n${text}")
endif()
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${text}")
if(NOT flat MATCHES "ddpify: this project uses the LibTorch of .* but the ddp runtime of .* was built against the one of")
  message(FATAL_ERROR "no message naming both LibTorches:\n${text}")
endif()
configure(own "${OWN_TORCH_DIR}" code text)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "did not configure with the runtime's own LibTorch:\n${text}")
endif()
message(STATUS "other LibTorch refused, own accepted")
