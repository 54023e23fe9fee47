# Included at the end of the migrated example's project() call through
# CMAKE_PROJECT_INCLUDE: links the end-to-end test's parameter-hash hook
# (param_hash_hook.cpp, compiled once by ddpify's own build) into every
# program of the example. It adds neither include directories nor libraries:
# the example must still find and link ddpify::runtime by itself (rule R10),
# so a missing R10 still fails the build.
if(NOT DDPIFY_E2E_HOOK_OBJECT OR NOT EXISTS "${DDPIFY_E2E_HOOK_OBJECT}")
  message(FATAL_ERROR
    "DDPIFY_E2E_HOOK_OBJECT='${DDPIFY_E2E_HOOK_OBJECT}' is not an object file")
endif()
link_libraries("${DDPIFY_E2E_HOOK_OBJECT}")
