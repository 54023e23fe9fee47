# The Debian package of ddpify (cpack -G DEB in the build folder, or the
# `package` target): what `cmake --install` installs (the ddpify tool,
# ddprun, the ddp runtime library and its headers, the CMake package and
# pkg-config file), with its dependencies. Its shared libraries' packages
# come from dpkg-shlibdeps (LLVM 19 and Clang 19's for the tool, LibTorch's
# for ddprun); listed by hand are what the installed files use without
# linking it: Clang's builtin headers (the tool parses with them), LibTorch's
# headers and CMake package (a migrated program builds against them and the
# runtime library, built against this LibTorch).
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "ddpify")
set(CPACK_PACKAGE_VENDOR "ddpify")
set(CPACK_PACKAGE_CONTACT "ddpify maintainers <ddpify@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "LibTorch single-GPU programs to multi-GPU DDP: rewriter, lint and runtime")
set(CPACK_PACKAGE_DESCRIPTION
  "ddpify migrates LibTorch (PyTorch C++) training programs written for one GPU
to data-parallel programs (ddpify migrate, diff, lint), and provides the ddp
runtime they link to (NCCL on GPUs, Gloo on CPUs) and its launcher, ddprun.")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(ddpify_deb_depends)
if(DDPIFY_BUILD_TOOL)
  list(APPEND ddpify_deb_depends "libclang-common-19-dev")
endif()
if(DDPIFY_BUILD_RUNTIME)
  if(Torch_DIR MATCHES "^/usr/")
    list(APPEND ddpify_deb_depends "libtorch-dev (>= 1.13)")
  else()
    # A runtime built against a LibTorch outside the system's packages (the
    # PyPI wheel): the package cannot declare it; docs/install.md says how.
    message(STATUS "ddpify package: the runtime is built against the "
      "LibTorch at ${Torch_DIR}, which no Debian package provides")
  endif()
endif()
string(JOIN ", " CPACK_DEBIAN_PACKAGE_DEPENDS ${ddpify_deb_depends})
# The ddp-* checks inside clang-tidy (lib/ddpify/libddpifyTidy.so).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "clang-tidy-19")
include(CPack)
