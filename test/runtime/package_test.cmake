# Test of the ddpify CMake package: builds package_consumer/ against the build
# tree (MODE=build_tree) or against a fresh `cmake --install` prefix
# (MODE=install), then runs it alone and under the package's ddprun.
#   cmake -DMODE=... -DDDPIFY_BUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=...
#         -P package_test.cmake
cmake_minimum_required(VERSION 3.20)
foreach(var MODE DDPIFY_BUILD_DIR WORK_DIR SOURCE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(generator_args)
if(CONSUMER_GENERATOR)
  set(generator_args -G "${CONSUMER_GENERATOR}")
endif()

if(MODE STREQUAL "build_tree")
  set(find_args -Dddpify_DIR=${DDPIFY_BUILD_DIR})
elseif(MODE STREQUAL "install")
  run(${CMAKE_COMMAND} --install ${DDPIFY_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  foreach(file include/ddp/ddp.h include/ddp/distributed.h bin/ddprun)
    if(NOT EXISTS ${WORK_DIR}/prefix/${file})
      message(FATAL_ERROR "not installed: ${file}")
    endif()
  endforeach()
  set(find_args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  message(FATAL_ERROR "MODE must be build_tree or install")
endif()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/consumer
    ${generator_args} -DCMAKE_BUILD_TYPE=Release ${find_args})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
file(READ ${WORK_DIR}/consumer/ddprun_path.txt ddprun)
if(MODE STREQUAL "install" AND NOT ddprun MATCHES "^${WORK_DIR}/prefix/")
  message(FATAL_ERROR "the installed package points at ddprun '${ddprun}'")
endif()

# Alone: one process.
run(${WORK_DIR}/consumer/consumer)
if(NOT run_output MATCHES "consumer rank=0 world=1 sum=1")
  message(FATAL_ERROR "unexpected output alone:\n${run_output}")
endif()
# Under the package's ddprun: a job of two.
run(${ddprun} --nproc-per-node 2 --tee ${WORK_DIR}/consumer/consumer)
foreach(rank 0 1)
  if(NOT run_output MATCHES "\\[rank${rank}\\]: consumer rank=${rank} world=2 sum=2")
    message(FATAL_ERROR "unexpected output under ddprun:\n${run_output}")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "package test ${MODE}: ok")
