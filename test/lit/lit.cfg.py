# lit configuration of the ddpify tool tests.
import os

import lit.formats

config.name = "ddpify"
# bash, so RUN lines may use $?, subshells and redirections freely.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.lit_binary_dir

torch_includes = " ".join("-I" + d for d in config.torch_include_dirs)
compile_args = "-std=c++17 " + torch_includes
runtime_include = os.path.join(config.project_source_dir, "runtime", "include")


config.substitutions.append(("%ddpify", config.ddpify))
config.substitutions.append(("%FileCheck", os.path.join(config.llvm_tools_dir, "FileCheck")))
config.substitutions.append(("%not", os.path.join(config.llvm_tools_dir, "not")))
# Compiler arguments for a fixed compilation database: `ddpify ... %torch_flags`.
config.substitutions.append(("%torch_flags", "-- " + compile_args + " -I" + runtime_include))
config.substitutions.append(("%torch_args", compile_args))
config.substitutions.append(("%runtime_include", runtime_include))
# Checks that the migrated program compiles against LibTorch and the runtime.
config.substitutions.append(
    ("%syntax_check", config.clangxx + " -fsyntax-only " + compile_args + " -I" + runtime_include))
# `%expect N cmd...`: runs cmd and fails unless its exit status is N.
config.substitutions.append(
    ("%expect", "bash " + os.path.join(config.test_source_root, "Inputs", "expect-exit.sh")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.environment["LC_ALL"] = "C"

# The immutable attribute (ext4 and friends) lets the root-run tests make a
# file that cannot be written: see bad-input-unwritable.test.
import subprocess
import tempfile
with tempfile.NamedTemporaryFile(dir=config.test_exec_root) as probe:
    if subprocess.call(["chattr", "+i", probe.name], stderr=subprocess.DEVNULL) == 0:
        subprocess.call(["chattr", "-i", probe.name])
        config.available_features.add("chattr")
