#!/usr/bin/env python3
"""End-to-end test of one idiom program of test/e2e/idioms/: migrate, build, train.

    run_idiom.py IDIOM --source-root DIR --build-dir DIR --hook-object FILE
                 --work-dir DIR [--cache-dir DIR] [--generator G]

Each idiom is a small single-GPU LibTorch program written in one of the ways
public programs are written (../shared/IDIOMS.md). The original is only
configured (its compilation database), never built: the migrated program run
without a launcher is the reference. Steps, each a named check (every check
that can still run is run; the summary names each one that failed):
  1. `ddpify migrate --out-dir` of the whole program (-p the original's
     configured build, its sources; no source at all for a `whole` code
     base) exits as IDIOMS says; the report (JSON) names what IDIOMS says
     it must, stderr the notes, the migrated files the edits. For a program that trains nothing, the
     migrated tree is the original tree, byte for byte, and that ends the test.
  2. The migrated tree configures and builds against the ddpify build tree
     (find_package(ddpify) through CMAKE_PREFIX_PATH) with the parameter-hash
     hook linked in (link_hook.cmake, as run_example.py), and finds the
     ddpify it was given (CMake's user package registry is that of a HOME
     of the test's own: empty); `ddpify migrate` of the migrated tree
     changes nothing. For a `whole` code base, also the user's second run:
     a copy configured as the migration guide says, `migrate --in-place`
     (the out-dir tree again), then `ddpify diff` with that same database,
     which predates the runtime: no change, no item.
  3. `ddprun --nproc-per-node 2` at batch B, each rank in its own working
     directory, and in parallel the reference: the migrated program alone
     (world size 1) at batch REF_BATCH (2B: two ranks at B see, step by step,
     the samples one process sees at 2B; B where the data cannot be sharded
     and every rank trains on all of it). Checks: exit 0 (both); every rank
     ends with the same parameter hashes, with the expected number of wrapped
     models (and the reference built as many, inactive); none of the
     runtime's safety nets spoke (unwrapped training, parameters replaced
     under a wrapper, ranks out of sync); rank 1 printed nothing; rank 0's stdout is the
     reference's stdout (see "Output convention"): each line once, every
     count equal, every other number within tolerance; rank 0 wrote the
     expected files, rank 1 none, and the text files rank 0 wrote equal the
     reference's by the same rule.

Output convention of the idiom programs: metrics are printed one epoch (or
one table row) per line as `<tag> [<index>] <name> <value> <name> <value>
...`, e.g. `epoch 2 train_loss 0.123456 train_correct 417 test_acc 0.803213`.
Counts are printed as integers (no decimal point) and must be EXACTLY equal to
the reference's; rates, losses and other reals are printed with a decimal
point (%.6f) and must agree within |a - b| <= ATOL + RTOL * |b| (ATOL 1e-4,
RTOL 1e-3, or the idiom's own). The comparison is token by token over whole
lines, so any other line (e.g. `checkpoint 1 after epoch 2`) must be printed
exactly as the reference prints it, and a line printed twice, lost or
printed by another rank fails it. Dropping a sample or counting one twice, a
metric of one rank's shard instead of the global one (half the count), a
padded evaluation set (one sample more) all break the exact counts.

Why the reference matches: the training loaders of the idioms are sequential
or random; random ones are reseeded by the program with torch::manual_seed(e)
before the pass of epoch e (0-based), which is the permutation ddp's
DistributedSampler draws at world size > 1 (default generator seeded with
ShardOptions::seed() (0) + epoch), and the sampler at world size 1 draws from
the program's generator: both runs then see one permutation, rank r taking
positions r, r+2, ... of it. Training sets are divisible by 2B (no padding).
No idiom program uses dropout or other randomness inside the training loop,
except the GAN (its noise is drawn per rank: only its output structure is
compared).

Exit status 0 when every check passed, 1 otherwise.
"""
import argparse
import concurrent.futures
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_example as rx  # noqa: E402  (the shared helpers)

ATOL = 1e-4
RTOL = 1e-3
BATCH = 16  # per rank under ddprun; REF_BATCH is 2 * BATCH unless unsharded

# Per idiom: the executable, its arguments at a batch size, how many models
# each rank must wrap, what rank 0 writes, what the report must say, and how
# its output is compared with the reference.
#   exe:      the target's file name in the migrated build folder
#   args:     lambda(batch, inputs) -> program arguments
#   models:   ddp::DistributedDataParallel per rank (hash hook lines)
#   files:    files rank 0 must write (relative to its working directory);
#             `text` ones are also compared with the reference's numerically
#   exit:     the expected exit status of `ddpify migrate` (0; 3 for an
#             error-level item)
#   report:   regex the report's items and notes (JSON) must match, if any
#   compare:  "exact" (counts equal, reals within tolerance) or "structure"
#             (every number masked: only the lines and their words)
#   ref_batch: the reference's batch (2 * BATCH; BATCH where the data are not
#             sharded and every rank trains on all of it)
#   untouched: migrate must not edit anything (programs that train nothing)
#   prepare:  lambda(exe, work) -> (argv, inputs): a run of the migrated
#             program without a launcher that makes the program's input
#   whole:    the whole code base: `ddpify migrate -p BUILD` (and the
#             migration of the migrated tree) with no source argument; and
#             the user's second run: a copy of the original, configured as
#             the migration guide says, `migrate --in-place` with its
#             database, which must give the out-dir tree, then `ddpify diff`
#             with that same database (which predates the runtime), which
#             must change nothing and name no item
#   notes:    regexes migrate's stderr must each match (its notes)
#   database: {source of the tree: regexes its command in the original's
#             compilation database must match}: what the program is meant
#             to make ddpify cope with (-Werror, a standard) is really there
#   edited:   {file of the tree: regex (or list of them) its migrated text
#             must match}
#   one_folder: both ranks run in one working directory (a file rank 0
#             writes and every rank reads back); the files of that folder
#             must be the reference's
#   apart:    a file name, one that rank 0 writes and every rank reads
#             back: the same run with each rank in a folder of its own
#             (other hosts without a shared filesystem) must exit 0, with
#             rank 0's stdout that of the run in one folder, the file in
#             rank 0's folder only
#   source:   the idiom folder of the program when it is another idiom's
#   migrate_args: options given to every `ddpify migrate` of the test
#             (e.g. --shard-optimizer)
#   same_without_migrate_args: the program migrated without migrate_args,
#             built and trained on 2 ranks the same way, must end with the
#             same parameter hashes on rank 0
#   progress: progress lines a batch loop prints by its counter (pattern: a
#             regex), which after sharding are rank 0's batches, not the
#             reference's: taken out of the comparison and checked against
#             expect(batch, world_size) (their last number masked as `#`)
def manual_slices_progress(batch, world_size):
    """The progress lines of manual_slices that rank 0 of world_size prints
    at a batch (numbers after the counter masked): for its own batches only,
    the ones whose numbers the program's conditions pick."""
    n = 448
    batches = range(0, -(-n // batch))
    own = [b for b in batches if b % world_size == 0]
    lines = [f"progress epoch {epoch} batch {b} loss #"
             for epoch in range(1, 6) for b in own if b % 4 == 0]
    lines += [f"progress fine-tune batch {b + 1} average #"
              for b in own if b < n // batch and b % 7 == 6]
    return lines


IDIOMS = {
    # C++14 tutorial-style convnet, TORCH_MODULE, RandomSampler train +
    # SequentialSampler test (203 samples: padding shows), train/test metrics.
    "cxx14": dict(
        exe="cxx14_digits", args=lambda b, i: [str(b)], models=1),
    # CPU only, `Net net;` by value with no device code at all, a copy of
    # the data set passed by lvalue, DataLoaderOptions().workers(0).
    "cpu_value_model": dict(
        exe="cpu_value_model", args=lambda b, i: [str(b)], models=1),
    # std::make_shared<Net>() placed in main, trained in
    # `void train(std::shared_ptr<Net>, ...)` that builds the optimizer and
    # the loader; clip_grad_norm_; evaluation in another helper.
    "make_shared_helper": dict(
        exe="shared_helper", args=lambda b, i: [str(b)], models=1),
    # A bare Linear, a value-held Module (`auto m = Perceptron(16);`) and a
    # local Sequential, trained one after another on one loader, each with
    # its own optimizer (SGD, SGD with lr decay through param_groups, Adam).
    # A global options object whose constructor prints the settings before
    # main (and so before ddp::init): guarded, it must print on rank 0 only,
    # which ddp::is_main_process() answers from the launcher's environment.
    "global_options": dict(
        exe="global_options", args=lambda b, i: [str(b)], models=1,
        edited={"main.cpp": [r"if \(ddp::is_main_process\(\)\) \{\n\s*std::cout << \"data folder"]}),
    "three_models": dict(
        exe="three_models", args=lambda b, i: [str(b)], models=3),
    # The same program migrated with --shard-optimizer (R14): its three
    # optimizers (SGD made from a learning rate, SGD with momentum whose lr
    # the program halves through param_groups, Adam) become
    # ddp::ZeroRedundancyOptimizer; on 2 ranks it ends with the parameters
    # of the migration without the option, bit for bit.
    "three_models_sharded": dict(
        source="three_models", exe="three_models",
        args=lambda b, i: [str(b)], models=3,
        migrate_args=["--shard-optimizer"], same_without_migrate_args=True,
        edited={"main.cpp": [
            r"ddp::ZeroRedundancyOptimizer<torch::optim::SGD> linear_opt\(",
            r"ddp::ZeroRedundancyOptimizer<torch::optim::SGD> perceptron_opt\(",
            r"ddp::ZeroRedundancyOptimizer<torch::optim::Adam> wide_opt\("]}),
    # Generator holder + discriminator Sequential, both with BatchNorm1d
    # (SyncBatchNorm), two Adams, two backward passes before D's step. Noise
    # is drawn per rank, so a 2-rank run is not the 1-process run at 2B.
    "gan_batchnorm": dict(
        exe="gan", args=lambda b, i: [str(b)], models=2, compare="structure"),
    # A TorchScript backbone (made by the program itself with
    # torch::jit::Module::define + save, loaded with torch::jit::load), frozen
    # and on the device; only the Linear head is trained and wrapped.
    "frozen_backbone": dict(
        exe="linear_probe", args=lambda b, i: [i["backbone"], str(b)],
        models=1,
        prepare=lambda exe, work: (
            [exe, "--make-backbone", os.path.join(work, "backbone.pt")],
            {"backbone": os.path.join(work, "backbone.pt")})),
    # Loaders returned by functions whose return type is written out:
    # std::unique_ptr<StatelessDataLoader<MapDataset<...>, RandomSampler>>,
    # and through an alias for the test loader.
    "loader_returned_type": dict(
        exe="returned_loader", args=lambda b, i: [str(b)], models=1),
    # The training loader in a struct member whose type is written out
    # (std::unique_ptr<StatelessDataLoader<...>>), made in the constructor;
    # the test loader rebuilt every epoch inside `evaluate()` over a dataset
    # passed by lvalue (301 samples: exact shards).
    "loaders_in_struct": dict(
        exe="struct_loaders", args=lambda b, i: [str(b)], models=1),
    # `template <typename Loader> double train(Ball&, Loader&, ...)` and
    # `template <typename Loader> void test(Ball&, Loader&, ...)`; the train
    # loss is the mean of batch means (sum / batch_idx); clip_grad_value_.
    "loaders_in_templates": dict(
        exe="template_loops", args=lambda b, i: [str(b)], models=1),
    # Training running_loss / dataset_size and correct / dataset_size per
    # epoch, a std::array and a std::vector of per-class counts over the test
    # loader (251 samples), DataLoaderOptions().workers(2).
    "per_class_accuracy": dict(
        exe="per_class", args=lambda b, i: [str(b)], models=1),
    # `std::cout << ++checkpoint ...` (the counter decides a learning-rate
    # change later) and a forward pass of a BatchNorm model inside `<<`
    # (train mode: a collective forward once migrated); checkpoints.
    "side_effect_print": dict(
        exe="side_effects", args=lambda b, i: [str(b)], models=1,
        files=["regressor-1.pt", "regressor-2.pt"]),
    # std::filesystem::create_directory, an std::ofstream CSV log, a summary
    # written by the program's own function, torch::save into the folder.
    "csv_and_dirs": dict(
        exe="csv_logger", args=lambda b, i: [str(b)], models=1,
        files=["runs/train_log.csv", "runs/summary.txt", "runs/moons.pt"],
        text=["runs/train_log.csv", "runs/summary.txt"]),
    # Tensors and autograd, a Linear's gradient never applied, a torch::save:
    # no optimizer, so migrate leaves every file alone and says why.
    "non_training_demo": dict(
        untouched=True, report=r"(?i)no optimi|trains? nothing|not train"),
    # No loader: whole data set in tensors, the program's own randperm
    # shuffle (the same on every rank: one seed), batches by narrow/slice in
    # an index loop. Sharded by R4 over ddp::batch_starts (each rank every
    # 2nd batch: the reference at 2B sees their union), the epoch's loss sum
    # all-reduced by R11; the last loop, on the full set, sharded by rows
    # (R15). Built with -Wall -Wextra -Werror.
    "manual_slices": dict(
        exe="manual_slices", args=lambda b, i: [str(b)], models=1,
        progress=dict(pattern=r"^progress ", expect=manual_slices_progress),
        edited={"main.cpp": [
            r"for \(int64_t start : ddp::batch_starts\(0, n, batch\)\)",
            r"epoch_loss = ddp::all_reduce\(epoch_loss\);",
            r"for \(int64_t b : ddp::batch_starts\(0, batches, 1\)\)",
            r"for \(size_t k : ddp::batch_starts\(0, input_pieces.size\(\), "
            r"1\)\)",
            r"for \(const auto ddp_from : ddp::batch_starts\(from, n, "
            r"batch\)\) \{\n *from = ddp_from;",
            r"while_loss = ddp::all_reduce\(while_loss\);",
            r"for \(const auto &picked :\n? *ddp::rank_batches\(",
            # The full-set loop, its tensors read again by the final mse:
            # R15's, the loop's shard under names of its own, the final
            # mse made global by an evaluation shard (issue 58, 2a).
            r"full-batch-sharded: .*\n *ddp::RowShard rows\(inputs.size\(0\)\);"
            r"\n *const torch::Tensor inputs_rows = rows.of\(inputs\);",
            r"eval_rows\.global_mean\(torch::mse_loss\(model->forward\(inputs\), "
            r"targets\)\)"]}),
    # Two trainings whose data ddpify must not share out: a policy learned
    # from its own rollouts (REINFORCE; an episode ends early when the agent
    # leaves the corridor: a rollout that takes part in no collective, so
    # its exit is no divergent-exit item), and a recurrent model over
    # consecutive windows of one signal, its hidden state carried from each
    # window to the next. Both stay as they are, each with its
    # non-torch-loader note (the second saying why): every rank trains on
    # everything, so the reference runs at the same window, and both models
    # are wrapped and end identical.
    # A pole balanced on a cart by REINFORCE: the environment draws its
    # start and its wind from a std::mt19937 the program seeds, the policy
    # its actions with torch::multinomial. Migrated as it is, every rank
    # plays the same episodes (the loop's non-torch-loader note), so rank 0
    # prints what one process prints; the engine and torch's stream are
    # untouched.
    "rollouts_env": dict(
        exe="balance", args=lambda b, i: ["40"], models=1, ref_batch=BATCH,
        report=r"non-torch-loader ",
        edited={"main.cpp": [
            r"non-torch-loader: [^\n]*\n *for \(int episode = 1; ",
            r"(?s)^(?!.*reseed_per_rank)"]}),
    # The same with --rollouts-per-rank (R16): ddp::reseed_per_rank() and
    # ddp::reseed_per_rank(rng) before the loop, so each rank plays its own
    # episodes and every update averages both ranks' gradients: the ranks
    # stay identical, and rank 0's returns are no longer one process's (its
    # updates saw twice the episodes).
    "rollouts_per_rank": dict(
        source="rollouts_env", exe="balance", args=lambda b, i: ["40"],
        models=1, ref_batch=BATCH, migrate_args=["--rollouts-per-rank"],
        compare="structure", differs=[r"^episode "],
        report=r"rollouts-per-rank .*samples per update are multiplied",
        edited={"main.cpp": [
            r"// ddpify: rollouts-per-rank: [^\n]*\n *"
            r"ddp::reseed_per_rank\(\);\n *ddp::reseed_per_rank\(rng\);"
            r"\n *for \(int episode = 1; ",
            r"(?s)^(?!.*non-torch-loader)"]}),
    "rollouts_and_windows": dict(
        exe="rollouts_and_windows", args=lambda b, i: [str(b)], models=2,
        ref_batch=BATCH,
        report=r"(?s)(?=.*non-torch-loader .*non-torch-loader )"
               r"(?=.*carries 'hidden' from one batch to the next)",
        edited={"main.cpp": [
            r"non-torch-loader: [^\n]*\n *for \(int episode = 0; ",
            r"non-torch-loader: [^\n]*carries 'hidden'[^\n]*\n *for "
            r"\(int64_t start = 0; start \+ window < length; "
            r"start \+= window\)"]}),
    # Reinforcement learning on 2 ranks (issue 55), three programs of three
    # shapes, each migrated without and with --rollouts-per-rank. Their
    # seeds are drawn at run time (or their episodes differ by rank with the
    # option), so rank 0's figures are not one process's: only the output's
    # structure is compared; what counts is exit 0 on both ranks within the
    # run's own time (a desync ends within seconds, DDP_TIMEOUT_SECONDS 60
    # ends a wait), identical parameters on every rank, no safety net.
    # A double DQN over three units: srand(time(nullptr)) and rand() for
    # epsilon-greedy, an environment that seeds a fresh engine from a named
    # random_device at every reset, a replay buffer whose engine is seeded in
    # its constructor's initialiser, an update after every step, episodes
    # that end on `done` (R12 joins after the episode loop). The target
    # network is only copied into: one wrapper.
    "dqn_cartpole": dict(
        exe="dqn", args=lambda b, i: [str(b), "20"], models=1,
        ref_batch=BATCH, compare="structure",
        edited={"main.cpp": [
            r"std::srand\(ddp::shared_seed\(std::time\(nullptr\)\)\);",
            r"\n  \}\n  ddp::join\(\);\n  return 0;"],
            "cartpole.cpp": r"std::mt19937 gen\(ddp::shared_seed\(rd\(\)\)\);",
            "replay_buffer.cpp":
                r"engine_\(ddp::shared_seed\(std::random_device\{\}\(\)\)\)"},
        report=r"(?s)(?=.*non-torch-loader .*seeded identically on every rank"
               r".*--rollouts-per-rank)(?=.*uneven-steps-joined )"),
    # The same with --rollouts-per-rank: every run-time seed becomes
    # ddp::rollout_seed and torch's generator is reseeded per rank: each rank
    # plays its own episodes, of lengths of their own, and the ranks that
    # finish first wait in ddp::join().
    "dqn_cartpole_per_rank": dict(
        source="dqn_cartpole", exe="dqn", args=lambda b, i: [str(b), "20"],
        models=1, ref_batch=BATCH, compare="structure",
        migrate_args=["--rollouts-per-rank"],
        edited={"main.cpp": [
            r"std::srand\(ddp::rollout_seed\(std::time\(nullptr\)\)\);",
            r"ddp::reseed_per_rank\(\);\n  for \(int episode = 1; ",
            r"\n  \}\n  ddp::join\(\);\n  return 0;"],
            "cartpole.cpp": r"gen\(ddp::rollout_seed\(rd\(\)\)\)",
            "replay_buffer.cpp": r"engine_\(ddp::rollout_seed\("},
        report=r"rollouts-per-rank .*samples per update are multiplied"),
    # A soft actor-critic drawing only from torch's generator, seeded with a
    # constant: five networks owning their Adam, held by value and placed by
    # the agent; log_alpha, a bare tensor with an Adam of its own (R17, the
    # sixth wrapper); the critics' forward run
    # twice before their backward; the actor's loss reaches the critics and
    # is back-propagated with the graph retained; the target follows by soft
    # updates. The training step is the agent's update(), called from the
    # episode loop. The episodes are the same on every rank (the note says
    # so and points to the option).
    "sac_pendulum": dict(
        exe="sac", args=lambda b, i: [str(b), "4"], models=6,
        ref_batch=BATCH, compare="structure",
        edited={"main.cpp": [
            r"alpha_optimizer_\(ddp::distributed_tensors\(\{log_alpha_\}\)",
            # The agent places the networks after they are built: each is
            # wrapped after its placement, not in its constructor.
            r"actor_\.to\(device\);\n    ddp::distribute\(actor_\);\n",
            r"target_value_\.to\(device\);\n"
            r"    ddp::distribute\(target_value_\);\n",
            r"(?s)^(?!.*distribute\(\*this\))"]},
        report=r"(?s)(?=.*distributed-tensors .*'log_alpha_')"
               r"(?=.*non-torch-loader .*'torch::manual_seed\(7\)'.*"
               r"--rollouts-per-rank)"),
    "sac_pendulum_per_rank": dict(
        source="sac_pendulum", exe="sac", args=lambda b, i: [str(b), "4"],
        models=6, ref_batch=BATCH, compare="structure",
        migrate_args=["--rollouts-per-rank"],
        edited={"main.cpp": [
            r"ddp::reseed_per_rank\(\);\n  for \(int episode = 1; ",
            r"\n  \}\n  ddp::join\(\);\n  return 0;"]},
        report=r"rollouts-per-rank .*samples per update are multiplied"),
    # A DQN in one file: a named random_device, a static engine inside the
    # step function, an episode loop that breaks on `done`, an update every
    # 4 steps, two optimizers over disjoint parts of one network (Adam over
    # network->fc1 and network->fc2, SGD over network->head): one wrapper of
    # the whole network.
    "dqn_break": dict(
        exe="grid_dqn", args=lambda b, i: [str(b), "30"], models=1,
        ref_batch=BATCH, compare="structure",
        edited={"main.cpp": [
            r"static std::mt19937 slips\(ddp::shared_seed\(",
            r"std::mt19937 gen\(ddp::shared_seed\(rd\(\)\)\);",
            r"ddp::DistributedDataParallel network_ddp\(network\);",
            r"network->fc1->parameters\(\);",
            r"\n  \}\n  ddp::join\(\);\n  return 0;"]},
        report=r"uneven-steps-joined .*this 'break' depends on 'done'"),
    "dqn_break_per_rank": dict(
        source="dqn_break", exe="grid_dqn", args=lambda b, i: [str(b), "30"],
        models=1, ref_batch=BATCH, compare="structure",
        migrate_args=["--rollouts-per-rank"],
        edited={"main.cpp": [
            r"static std::mt19937 slips\(ddp::rollout_seed\(",
            r"ddp::reseed_per_rank\(\);\n  ddp::reseed_per_rank\(gen\);\n"
            r"  for \(int episode = 1; ",
            r"(?s)^(?!.*reseed_per_rank\(slips\))"]},
        report=r"rollouts-per-rank .*samples per update are multiplied"),
    # An actor-critic agent holding five networks by value, each owning its
    # Adam and placing itself in its constructor (issue 44): each constructor
    # ends with ddp::distribute(*this), the target network too (only soft
    # updates reach it: it is broadcast once and never all-reduced). The
    # replay data are not sharded: every rank trains on all of it.
    "rl_agent": dict(
        exe="rl_agent", args=lambda b, i: [str(b)], models=5,
        ref_batch=BATCH,
        edited={"main.cpp": [
            r"  to\(device\);\n    ddp::distribute\(\*this\);\n  \}\n"
            r"  torch::Tensor forward\(torch::Tensor state\) \{\n"
            r"    return torch::tanh",
            r"this->to\(device\);\n    ddp::distribute\(\*this\);",
            r"(?s)struct ValueNetwork .*to\(device\);\n"
            r"    ddp::distribute\(\*this\);"]}),
    # The model placed, then converted to double on the next line (issue
    # 44): the wrapper comes after the conversion, over the parameters that
    # are trained.
    "double_after_place": dict(
        exe="double_after_place", args=lambda b, i: [str(b)], models=1,
        edited={"main.cpp":
                r"model->to\(torch::kDouble\);\n"
                r"  ddp::DistributedDataParallel model_ddp\(model\);\n"}),
    # A whole CMake code base (issue 12) in several folders: a static
    # library (C++14) from file(GLOB) in a subdirectory whose header changes,
    # app/ through aux_source_directory, a source listed in an include()d
    # .cmake file, the executable made by the project's function; it sets
    # CMAKE_PREFIX_PATH itself, builds with -Wall -Werror (a variable clang
    # calls set but not used), C++20 `auto` parameters at -std=c++17 under
    # g++ -fconcepts; BatchNorm, .cuda(), a logger class writing a file,
    # checkpoints from another unit. Migrated with no source argument, the
    # user's second run checked (the `whole` key above).
    # A loss threshold that stops the batch loop and the epoch loop
    # (rule R12: decided on the loss's mean over the ranks, so every rank
    # stops at the step the reference stops), log lines through an
    # std::ostream& parameter and a logger holding std::cout, printf; the
    # best model saved to best.pt and read back by every rank at the end
    # (R8: ddp::load, rank 0 reads, every rank gets the bytes): one folder
    # for both ranks, and in folders apart (no shared disk) the same run.
    "early_stop_best": dict(
        exe="early_stop", args=lambda b, i: [str(b)], models=1,
        files=["best.pt"], one_folder=True, apart="best.pt",
        report=r"(?s)(?=.*read-after-save [^\n]*shared filesystem)"
               r"(?=.*divergent-exit-averaged )",
        edited={"main.cpp": [
            r"if \(ddp::all_reduce\(last_loss, ddp::ReduceOp::kMean\) < "
            r"target\)\n\s+// ddpify: divergent-exit-averaged: [^\n]*\n"
            r"\s+break;",
            r"\n\s+ddp::load\(restored, \"best.pt\"\);",
            r"if \(ddp::is_main_process\(\)\)\s*\{?\s*os << ",
            r"if \(ddp::is_main_process\(\)\)\s*\{?\s*out_ << "]}),
    # Model library (net/) and trainer (app/) in sibling folders, Torch
    # found in an include()d module, the executable made by the project's
    # macro that links with the plain signature (R10 must follow it and
    # put find_package(ddpify) where both folders see it); BatchNorm in the
    # library's header (SyncBatchNorm, a PUBLIC link); a forward pass with
    # .cuda() inside a print (R7's hoist holding R3's edit).
    "split_project": dict(
        exe="app/blobs", args=lambda b, i: [str(b)], models=1,
        edited={
            "app/CMakeLists.txt":
                r"(?m)^add_trainer\(blobs train\.cpp\)\n"
                r"target_link_libraries\(blobs ddpify::runtime\)$",
            "cmake/libtorch.cmake":
                r"(?m)^find_package\(Torch REQUIRED\)\n"
                r"find_package\(ddpify REQUIRED\)$",
            "net/CMakeLists.txt": r"(?m)^target_link_libraries\(blobnet "
                                  r"\"\$\{TORCH_LIBRARIES\}\" "
                                  r"ddpify::runtime\)$",
            "app/train.cpp":
                r"auto net_output = net->forward\(probe\.x\.to\(device\)\);"}),
    # Models made, placed and trained in different units and classes: one
    # placed by a helper of another unit (wrapped before its optimizer), one
    # trained by a helper of another unit (ddp::distributed_parameters where
    # its optimizer is built), one held by a raw-pointer member, one built
    # in-class with its optimizer and placed by its user. The second model's
    # loader is made in placement.cpp and handed to trainer.cpp's fit(), its
    # type written in the header (an alias) and, in full, in fit()'s
    # definition, which only another unit's loader reaches (R4 respells it).
    # Built with -fopenmp by g++ (LibTorch's headers then include <omp.h>).
    # An autoencoder over three files: one optimizer over an encoder's and a
    # decoder's parameters gathered into one vector (both wrapped), batches
    # cut by hand in a while loop (sharded), a logger of another file
    # constructed with std::cout (printed once).
    "autoencoder_files": dict(
        exe="autoencoder", args=lambda b, i: [str(b)], models=2,
        edited={
            "main.cpp": r"Logger log\(ddp::output_stream\(std::cout\)\);",
            "trainer.cpp": [
                r"for \(const auto ddp_start : ddp::batch_starts\(start, n, "
                r"batch\)\) \{\n *start = ddp_start;",
                r"sum = ddp::all_reduce\(sum\);"]}),
    # Loaders made in main.cpp and iterated in loops.cpp (a training pass
    # returning its summed loss, an evaluation returning total / seen over a
    # sequential loader of 200 samples: exact shards), a fine-tuning loop
    # that counts its optimizer steps and prints the count (each rank's, as
    # one process at the global batch counts them), and a pass whose batches
    # are cut by hand from a shuffled index list by iterator offsets
    # (`order.begin() + i`).
    "loaders_across_units": dict(
        exe="fit_units", args=lambda b, i: [str(b)], models=1,
        files=["fit_units.pt"],
        edited={
            "loops.h": [r"using TrainLoader =\n\s+ddp::DistributedDataLoader<",
                        r"using EvalLoader =\n\s+ddp::DistributedDataLoader<"],
            "loops.cpp": [r"sum = ddp::all_reduce\(sum\);\n\s+return sum;",
                          r"seen = ddp::all_reduce\(seen\);"],
            "main.cpp": [r"ddp::make_eval_data_loader<",
                         r"for \(int64_t i : ddp::batch_starts\(0, n, "
                         r"batch_size\)\)",
                         r"<< \"fine_tune steps \" << steps"]}),
    "models_across_units": dict(
        exe="ensemble", args=lambda b, i: [str(b)], models=4,
        edited={
            "main.cpp": [
                r"place_model\(first, device\);\n\s+first->to\(device\);\n"
                r"\s+ddp::DistributedDataParallel first_ddp\(first\);\n"
                r"\s+torch::optim::Adam first_opt",
                r"calibration\.affine->to\(device\);\n"
                r"\s+ddp::distribute\(calibration\.affine\);"],
            "trainer.cpp": [
                r"void fit\(Mlp &model,\n\s+ddp::DistributedDataLoader<",
                r"torch::optim::SGD optimizer\("
                r"ddp::distributed_parameters\(model, device\),"],
            "models.h": r"using ReadingLoader =\n\s+ddp::DistributedDataLoader<",
            "CMakeLists.txt": r"(?m)^target_link_libraries\(ensemble "
                              r"\"\$\{TORCH_LIBRARIES\}\" OpenMP::OpenMP_CXX "
                              r"ddpify::runtime\)$",
            "placement.cpp": r"model_->to\(device_\);\n"
                             r"\s+ddp::distribute\(\*model_\);"}),
    # Torch found in an include()d module that sets the compiler flags; the
    # executable linked in an if()/else() on an option that is ON by default
    # (OpenMP for the data set's preparation), so the configured build takes
    # the first branch: R10 links the runtime there, where CMake's backtraces
    # say the build links, and in the else() branch too, which links LibTorch
    # as well (the option turned off still builds), and finds ddpify beside
    # the module's find_package(Torch).
    "cmake_branches": dict(
        exe="rings", args=lambda b, i: [str(b)], models=1,
        edited={
            "CMakeLists.txt": [
                r"(?m)^  target_link_libraries\(rings \$\{TORCH_LIBRARIES\} "
                r"OpenMP::OpenMP_CXX ddpify::runtime\)$",
                r"(?m)^  target_link_libraries\(rings \$\{TORCH_LIBRARIES\} "
                r"ddpify::runtime\)$"],
            "cmake/libtorch.cmake":
                r"(?m)^find_package\(Torch REQUIRED\)\n"
                r"find_package\(ddpify REQUIRED\)$"}),
    # Trained by walking the training loader's iterator in a while loop
    # (RandomSampler: even, loss and count reduced); every 4 steps the first
    # validation batch drawn by hand (`auto val_it = val_loader->begin()`,
    # batch 40 whatever the training batch) and its loss printed, and a full
    # validation pass by iterator each epoch; a test pass by iterator at the
    # end (151 samples: exact shards, reduced). The validation loader is
    # drawn from one batch at a time, so it stays unsharded (loader-drawn):
    # every rank draws the batch the reference draws, and the pass over it
    # is not reduced (every rank saw all 120 samples).
    "val_batch_by_iterator": dict(
        exe="spot_val", args=lambda b, i: [str(b)], models=1,
        report=r"loader-drawn ",
        edited={"main.cpp": [
            r"ddp::make_data_loader<torch::data::samplers::RandomSampler>\(",
            r"// ddpify: loader-drawn: [^\n]*\n\s*torch::data::make_data_loader"
            r"<torch::data::samplers::SequentialSampler>\(\n\s*Rings\(120",
            r"ddp::make_eval_data_loader<torch::data::samplers::"
            r"SequentialSampler>\(\n\s*Rings\(151",
            r"train_loss = ddp::all_reduce\(train_loss\);",
            r"test_correct = ddp::all_reduce\(test_correct\);",
            r"(?s)\A(?!.*all_reduce\(val_)"]}),
    # Full-batch training (issue 45): the whole training tensor fed to the
    # model at every step, no loader. R15 gives each rank its block of the
    # rows (ddp::RowShard) before the loop and weighs its mean loss by its
    # share, so the gradient is the one-process gradient although 6001 rows
    # do not divide by 2; the printed loss and the test errors (an
    # evaluation after training on a whole test tensor, sharded the same
    # way) are global. Every step sees all rows: the reference runs at the
    # same (ignored) batch, and every printed figure is within 1e-4
    # (relative) of one process's.
    "full_batch_regression": dict(
        exe="surface_fit", args=lambda b, i: [str(b)], models=1,
        ref_batch=BATCH, atol=1e-6, rtol=1e-4,
        report=r"full-batch-sharded [^\n]*'inputs', 'targets'",
        edited={"main.cpp": [
            r"ddp::RowShard rows\(inputs\.size\(0\)\);\n\s+"
            r"inputs = rows\.of\(inputs\);\n\s+targets = rows\.of\(targets\);"
            r"\n\s+for \(int epoch = 1;",
            r"rows\.mean_weighted\(loss\)\.backward\(\);\n"
            r"\s+if \(epoch % 20 == 0\)\n"
            r"\s+loss = rows\.global_mean\(loss\);",
            r"ddp::RowShard eval_rows\(test_inputs\.size\(0\)\);",
            r"eval_rows\.global_mean\(torch::mse_loss\(test_prediction, "
            r"test_targets\)\)\s*\.item<double>\(\)",
            r"eval_rows\.global_mean\(torch::l1_loss\("]}),
    # A BatchNorm1d classifier trained on a whole split of 2001 rows (odd):
    # R5's SyncBatchNorm normalises each rank's block with the statistics of
    # all rows, so the sharded run matches one process, uneven blocks
    # included; the training count of correct rows is a global sum, and the
    # held-out split is evaluated in blocks too (its loss a global mean, its
    # count a global sum, its size the total rows).
    "full_batch_bn_classifier": dict(
        exe="rings_bn", args=lambda b, i: [str(b)], models=1,
        ref_batch=BATCH, atol=1e-6, rtol=1e-4,
        report=r"full-batch-sharded [^\n]*'x_train', 'y_train'",
        edited={"main.cpp": [
            r"ddp::SyncBatchNorm1d\(48\)",
            r"ddp::RowShard rows\(x_train\.size\(0\)\);",
            r"rows\.mean_weighted\(loss\)\.backward\(\);",
            r"rows\.global_sum\(logits\.argmax\(1\)\.eq\(y_train\)\.sum\(\)\)",
            r"eval_rows\.global_mean\(criterion\(held_logits, y_held\)\)",
            r"static_cast<double>\(held_correct\) / eval_rows\.total_rows\(\)"]}),
    # A loss of the program's own, normalised by the spread of the whole
    # batch's targets: not a mean over rows, so the loop keeps the whole
    # batch on every rank (correct, no speed-up) with the full-batch-whole
    # note saying why; nothing is sharded.
    "full_batch_custom_loss": dict(
        exe="relative_fit", args=lambda b, i: [str(b)], models=1,
        ref_batch=BATCH, atol=1e-6, rtol=1e-4,
        report=r"full-batch-whole [^\n]*'relative_squared_error'",
        edited={"main.cpp": [
            r"// ddpify: full-batch-whole: [^\n]*\n\s+for \(int step = 0;",
            r"(?s)\A(?!.*RowShard)(?!.*non-torch-loader)"]}),
    "whole_codebase": dict(
        exe="shapes_train", args=lambda b, i: [str(b)], models=1,
        whole=True,
        files=["train_log.txt", "checkpoint-2-model.pt",
               "checkpoint-2-optimizer.pt", "checkpoint-4-model.pt",
               "checkpoint-4-optimizer.pt", "classifier.pt"],
        text=["train_log.txt"],
        notes=[r"app/main\.cpp' does not parse at -std=c\+\+17 but does "
               r"at -std=c\+\+20"],
        database={"app/main.cpp": [r" -Werror ", r" -std=c\+\+17 ",
                                   r" -fconcepts "],
                  "common/log.cpp": [r" -Werror ", r" -std=c\+\+14 "],
                  "common/model.cpp": [r" -Werror ", r" -std=c\+\+14 "]},
        edited={
            "app/main.cpp": r"ddp::DistributedDataParallel",
            "train/checkpoint.cpp": r"ddp::is_main_process\(\)",
            "common/log.h": r"#include <ddp/ddp.h>",
            "common/log.cpp": r"ddp::output_path",
            "CMakeLists.txt": [
                r"(?m)^find_package\(ddpify REQUIRED HINTS "
                r"\$CACHE\{CMAKE_PREFIX_PATH\}\)$",
                r"(?m)^add_trainer\(shapes_train .*\)\n"
                r"target_link_libraries\(shapes_train PRIVATE "
                r"ddpify::runtime\)$"],
            # Its headers changed: its users need the runtime too.
            "common/CMakeLists.txt": r"(?m)^target_link_libraries\("
                                     r"shapes_common PUBLIC [^)]*"
                                     r"ddpify::runtime\)$"}),
}

NUMBER = re.compile(r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf)")


def split_numbers(line):
    """[text, number, text, number, ..., text] of a line."""
    return NUMBER.split(line)


def is_count(token):
    return re.fullmatch(r"[-+]?\d+", token) is not None


def compare_lines(got, want, mode, atol, rtol):
    """'' when the lines `got` (rank 0) match `want` (the reference) under
    the output convention, else what differs first (and how many lines)."""
    problems = []
    if len(got) != len(want):
        problems.append(f"{len(got)} line(s), the reference printed "
                        f"{len(want)}")
    worst = 0.0
    shown = 0
    for n, (g, w) in enumerate(zip(got, want), 1):
        gs, ws = split_numbers(g), split_numbers(w)
        why = ""
        if len(gs) != len(ws) or gs[0::2] != ws[0::2]:
            why = "different words"
        elif mode == "exact":
            for a, b in zip(gs[1::2], ws[1::2]):
                if is_count(a) and is_count(b):
                    if int(a) != int(b):
                        why = f"count {a} != {b}"
                        break
                    continue
                fa, fb = float(a), float(b)
                if fa != fb and not abs(fa - fb) <= atol + rtol * abs(fb):
                    why = f"{a} vs {b} outside tolerance"
                    break
                if fb:
                    worst = max(worst, abs(fa - fb) / abs(fb))
        if why:
            shown += 1
            if shown <= 4:
                problems.append(f"line {n}: {why}\n  2 ranks:   {g!r}\n"
                                f"  reference: {w!r}")
    if shown > 4:
        problems.append(f"({shown - 4} more differing line(s))")
    if not problems and mode == "exact":
        print(f"  (largest relative difference of a real: {worst:.2e})")
    return "\n".join(problems)


def lines_of(text):
    return [line for line in text.rstrip("\n").split("\n") if line.strip()] \
        if text.strip() else []


def report_text(path):
    """The items and notes of a --report JSON file, as one string."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return None
    parts = [f"{i.get('id', '')} {i.get('reason', '')}"
             for i in report.get("items", [])]
    parts += [n if isinstance(n, str) else json.dumps(n)
              for n in report.get("notes", [])]
    return "\n".join(parts)


def database_commands(build):
    """{real path of a source: its command line, one string} of the
    compile_commands.json in build."""
    try:
        with open(os.path.join(build, "compile_commands.json")) as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return {}
    commands = {}
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        command = e.get("command") or " ".join(e.get("arguments", []))
        commands[path] = " " + command + " "
    return commands


def cache_value(path, name):
    """The value of `name` in a CMakeCache.txt, or None."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("=")
                if key.split(":")[0] == name:
                    return value
    except OSError:
        pass
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("idiom", choices=sorted(IDIOMS))
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--hook-object", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--cache-dir", help="ddpify's precompiled-header "
                        "cache, shared by the idiom tests")
    parser.add_argument("--generator", default="Ninja")
    parser.add_argument("--ddpify", help="the ddpify tool (default: bin/ of "
                        "--build-dir; a runtime-only build names another's)")
    parser.add_argument("--torch-dir", help="the LibTorch (TorchConfig.cmake "
                        "folder) both programs are built against")
    rx.add_pch_cache_argument(parser)
    rx.add_platform_cache_argument(parser)
    args = parser.parse_args()

    name = args.idiom
    spec = dict(compare="exact", files=[], text=[], exit=0, report=None,
                ref_batch=2 * BATCH, untouched=False, prepare=None,
                atol=ATOL, rtol=RTOL, whole=False, notes=[], edited={},
                database={}, one_folder=False, apart=None,
                progress=None, source=None, migrate_args=[],
                same_without_migrate_args=False, differs=[])
    spec.update(IDIOMS[name])
    checks = rx.Checks(f"idiom.{name}")
    src = os.path.join(args.source_root, "test", "e2e", "idioms",
                       spec["source"] or name)
    tools = rx.tool_paths(args, src, f"idiom.{name}")
    if not tools:
        return 1
    ddpify, ddprun = tools
    work, logs, orig_build, migrated, mig_build = rx.fresh_work_dir(
        args.work_dir)
    cache_dir = rx.test_cache_dir("idioms") or args.cache_dir
    cache = ["--cache-dir", os.path.abspath(cache_dir)] if cache_dir else []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    # Only what the command line says finds ddpify: CMake's user package
    # registry of a HOME of the test's own is empty (the real one may hold
    # another ddpify build, which a project that sets CMAKE_PREFIX_PATH
    # itself would silently get).
    home = os.path.join(work, "home")
    os.makedirs(home)
    env = rx.clean_env({"HOME": home})
    sources = [] if spec["whole"] else rx.sources(src)

    def summary_exit():
        checks.summary()
        print(f"(logs: {logs})")
        return 1 if checks.failed() else 0

    # 1. Configure the original (not built), migrate it.
    code, out, err = rx.configure(
        args, ["cmake", "-S", src, "-B", orig_build, "-G", args.generator,
               "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *rx.torch_args(args)],
        orig_build, timeout=rx.BUILD_TIMEOUT_S,
        log=os.path.join(logs, "configure-original.log"))
    if not checks.record("configure-original", code == 0, rx.tail(out + err)):
        return summary_exit()
    if spec["database"]:
        commands = database_commands(orig_build)
        for rel, patterns in sorted(spec["database"].items()):
            command = commands.get(os.path.realpath(os.path.join(src, rel)))
            missing = [p for p in patterns
                       if command is None or not re.search(p, command)]
            checks.record(f"original-database:{rel}", not missing,
                          f"its command {command!r} does not match "
                          f"{missing}")
    report_file = os.path.join(work, "report.json")
    code, out, err = rx.run([ddpify, "migrate", "--out-dir", migrated,
                             "--root", src, "-p", orig_build, "--report",
                             report_file] + spec["migrate_args"] + cache +
                            sources, env=env,
                            timeout=rx.BUILD_TIMEOUT_S,
                            log=os.path.join(logs, "migrate.log"))
    print("--- ddpify migrate report (stderr)\n" + err, flush=True)
    if not checks.record(f"migrate-exit-{spec['exit']}",
                         code == spec["exit"] and os.path.isdir(migrated),
                         f"exit {code}\n{rx.tail(err)}"):
        return summary_exit()
    if spec["report"]:
        text = report_text(report_file)
        checks.record("report-says-why",
                      text is not None and
                      re.search(spec["report"], text) is not None,
                      f"no report item or note matches /{spec['report']}/; "
                      f"items and notes: {text!r}")
    for note in spec["notes"]:
        checks.record(f"migrate-says:{note}", re.search(note, err) is not None,
                      f"no line of migrate's stderr matches /{note}/")
    for rel, patterns in sorted(spec["edited"].items()):
        try:
            with open(os.path.join(migrated, rel)) as f:
                text = f.read()
        except OSError as e:
            text = f"({e})"
        patterns = [patterns] if isinstance(patterns, str) else patterns
        missing = [p for p in patterns if re.search(p, text) is None]
        checks.record(f"migrated:{rel}", not missing,
                      f"the migrated {rel} does not match /{missing[0]}/:\n"
                      + rx.tail(text, 30) if missing else "")
    if spec["untouched"]:
        difference = rx.compare_trees(src, migrated)
        checks.record("migrate-edits-nothing", not difference, difference)
        return summary_exit()

    # 2. Build the migrated tree; migrate it again.
    code, out, err = rx.configure(args, [
        "cmake", "-S", migrated, "-B", mig_build, "-G", args.generator,
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *rx.torch_args(args, args.build_dir), *rx.launcher_args(args),
        f"-DCMAKE_PROJECT_INCLUDE={os.path.join(HERE, 'link_hook.cmake')}",
        f"-DDDPIFY_E2E_HOOK_OBJECT={os.path.abspath(args.hook_object)}"],
        mig_build, env=env, timeout=rx.BUILD_TIMEOUT_S,
        log=os.path.join(logs, "configure-migrated.log"))
    if not checks.record("configure-migrated", code == 0, rx.tail(out + err)):
        return summary_exit()
    found = cache_value(os.path.join(mig_build, "CMakeCache.txt"),
                        "ddpify_DIR")
    checks.record("found-the-given-ddpify",
                  found is not None and os.path.realpath(found) ==
                  os.path.realpath(args.build_dir),
                  f"ddpify_DIR is {found!r}, not {args.build_dir}")

    def build_migrated():
        code, out, err = rx.run(["cmake", "--build", mig_build],
                                timeout=rx.BUILD_TIMEOUT_S,
                                log=os.path.join(logs, "build-migrated.log"))
        errors = [line for line in (out + err).splitlines()
                  if re.search(r"error|undefined reference", line)]
        return checks.record("build-migrated", code == 0,
                             "\n".join(errors[:3] + ["---"]) + "\n" +
                             rx.tail(out + err))

    def migrate_again():
        again = os.path.join(work, "migrated-again")
        code, out, err = rx.run(
            [ddpify, "migrate", "--quiet", "--out-dir", again, "--root",
             migrated, "-p", mig_build] + spec["migrate_args"] + cache +
            ([] if spec["whole"] else rx.sources(migrated)), env=env,
            timeout=rx.BUILD_TIMEOUT_S,
            log=os.path.join(logs, "migrate-again.log"))
        if checks.record("migrate-again-runs", code == spec["exit"],
                         f"exit {code}\n{rx.tail(err)}"):
            difference = rx.compare_trees(migrated, again)
            checks.record("migrate-again-changes-nothing", not difference,
                          difference)

    def second_run():
        """migrate --in-place on a copy, then diff with its database."""
        tree = os.path.join(work, "in-place")
        tree_build = os.path.join(work, "in-place-build")
        rx.copy_tree(src, tree)
        code, out, err = rx.configure(
            args, ["cmake", "-S", tree, "-B", tree_build, "-G",
                   args.generator, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                   f"-DCMAKE_PREFIX_PATH={os.path.abspath(args.build_dir)}"],
            tree_build, env=env, timeout=rx.BUILD_TIMEOUT_S,
            log=os.path.join(logs, "configure-in-place.log"))
        if not checks.record("configure-in-place", code == 0,
                             rx.tail(out + err)):
            return
        code, out, err = rx.run(
            [ddpify, "migrate", "--in-place", "--root", tree, "-p",
             tree_build] + cache, env=env, timeout=rx.BUILD_TIMEOUT_S,
            log=os.path.join(logs, "migrate-in-place.log"))
        if not checks.record("migrate-in-place-runs", code == spec["exit"],
                             f"exit {code}\n{rx.tail(err)}"):
            return
        difference = rx.compare_trees(migrated, tree)
        checks.record("in-place-equals-out-dir", not difference, difference)
        code, out, err = rx.run(
            [ddpify, "diff", "--root", tree, "-p", tree_build] + cache,
            env=env, timeout=rx.BUILD_TIMEOUT_S,
            log=os.path.join(logs, "second-run-diff.log"))
        checks.record("second-run-diff-changes-nothing",
                      code == 0 and not out.strip(),
                      f"exit {code}\n{rx.tail(out, 30)}\n{rx.tail(err)}")
        checks.record("second-run-diff-names-no-item",
                      "item(s)" not in err and "error" not in err,
                      rx.tail(err))

    jobs = [pool.submit(build_migrated), pool.submit(migrate_again)]
    if spec["whole"]:
        jobs.append(pool.submit(second_run))
    built = jobs[0].result()
    for job in jobs[1:]:
        job.result()
    if not built:
        checks.record("ddprun-run", False,
                      "not run: the migrated program was not built")
        return summary_exit()
    exe = os.path.join(mig_build, spec["exe"])

    inputs = {}
    if spec["prepare"]:
        argv, inputs = spec["prepare"](exe, work)
        code, out, err = rx.run(argv, cwd=work,
                                log=os.path.join(logs, "prepare.log"))
        if not checks.record("prepare-input", code == 0,
                             f"exit {code}\n{rx.tail(out + err)}"):
            return summary_exit()

    # 3. Two ranks at BATCH, and the reference alone at ref_batch.
    ddp_dir = os.path.join(work, "ddprun")
    for r in (0, 1):
        os.makedirs(os.path.join(ddp_dir, f"rank{r}"))
    # One folder for both ranks: the shell's `cd` goes to rank0 for each.
    rank_dir = '"$0/rank0"' if spec["one_folder"] else '"$0/rank$RANK"'
    hash_file = os.path.join(work, "hashes-ddprun.txt")
    ref_dir = os.path.join(work, "reference")
    os.makedirs(ref_dir)
    ref_hash_file = os.path.join(work, "hashes-reference.txt")
    # A hang (e.g. a collective only rank 0 runs) ends within the timeout.
    ddp_env = {"DDP_TIMEOUT_SECONDS": "60"}

    def two_ranks():
        return rx.run(
            [ddprun, "--nproc-per-node", "2", "--tee=3", "--", "/bin/sh",
             "-c", f'cd {rank_dir} && exec "$@"', ddp_dir, exe] +
            spec["args"](BATCH, inputs),
            env=rx.clean_env(dict(ddp_env, DDPIFY_E2E_HASH_FILE=hash_file)),
            timeout=180, log=os.path.join(logs, "ddprun.log"))

    def reference():
        return rx.run(
            [exe] + spec["args"](spec["ref_batch"], inputs), cwd=ref_dir,
            env=rx.clean_env(dict(ddp_env,
                                  DDPIFY_E2E_HASH_FILE=ref_hash_file)),
            timeout=180, log=os.path.join(logs, "reference.log"))

    jobs = [pool.submit(two_ranks), pool.submit(reference)]
    (code, out, err), (rcode, rout, rerr) = [j.result() for j in jobs]
    print("--- ddprun stdout\n" + out + "--- ddprun stderr\n" +
          rx.tail(err, 60), flush=True)
    checks.record("ddprun-exit-0", code == 0,
                  f"exit {code}\n{rx.tail(err)}" if code != 0 else "")
    checks.record("reference-exit-0", rcode == 0,
                  f"exit {rcode}\n{rx.tail(rerr)}" if rcode != 0 else "")

    hashes = rx.read_hashes(hash_file)
    # Sorted: wrappers made by ddp::distribute end together at exit, in an
    # order that may differ between ranks; each model's hash is what counts.
    per_rank = {r: sorted(h for (rk, h, _) in hashes if rk == r)
                for r in (0, 1)}
    expected = spec["models"]
    same = (len(per_rank[0]) == expected and per_rank[0] == per_rank[1] and
            all("active=1" in rest for (_, _, rest) in hashes))
    if not hashes and code != 0:
        detail = ("no ddp::DistributedDataParallel ended on any rank, but "
                  "the run failed (see ddprun-exit-0)")
    elif not hashes:
        detail = ("no ddp::DistributedDataParallel ended on any rank: the "
                  "trained model is not wrapped (rule R6)")
    else:
        detail = (f"rank 0: {per_rank[0]}, rank 1: {per_rank[1]}; expected "
                  f"{expected} wrapped model(s) per rank")
        if any("active=1" not in rest for (_, _, rest) in hashes):
            detail += "; a wrapper did not communicate"
        if per_rank[0] and per_rank[1]:
            detail += "; " + rx.first_differing_tensor(hash_file + ".tensors")
    checks.record("ranks-identical-parameters", same, "" if same else detail)
    ref_hashes = rx.read_hashes(ref_hash_file)
    checks.record("reference-wraps-as-many",
                  len(ref_hashes) == expected and
                  all("active=0" in rest for (_, _, rest) in ref_hashes),
                  f"hook lines {ref_hashes}, expected {expected} inactive "
                  "wrapper(s)")
    # The runtime's safety nets (docs/runtime-ddp.md): none spoke.
    warned = [line for line in err.split("\n")
              if "no ddp::DistributedDataParallel covers" in line or
              "was replaced after the model was wrapped" in line or
              "the ranks are out of sync" in line]
    checks.record("no-safety-net", not warned, "\n".join(warned[:2]))

    stdout = rx.split_ranks(out)
    rank1 = [line for line in stdout.get(1, []) if line.strip()]
    checks.record("only-rank0-printed", not rank1,
                  f"rank 1 printed: {rank1[:5]}")
    stray = [line for line in stdout.get(None, []) if line.strip()]
    checks.record("no-unprefixed-output", not stray,
                  f"lines without a rank prefix: {stray[:5]}")
    rank0 = [line for line in stdout.get(0, []) if line.strip()]
    ref_lines = lines_of(rout)
    if spec["progress"]:
        progress = re.compile(spec["progress"]["pattern"])
        masked = [re.sub(r"\S+$", "#", line)
                  for line in rank0 if progress.search(line)]
        want = spec["progress"]["expect"](BATCH, 2)
        checks.record("progress-rank0-own-batches", masked == want,
                      f"rank 0 printed {len(masked)} progress line(s), "
                      f"expected {len(want)}:\n" +
                      "\n".join(f"  {g!r} / {w!r}" for g, w in
                                 zip(masked + [""] * len(want),
                                     want + [""] * len(masked))
                                 if g != w)[:2000])
        rank0 = [line for line in rank0 if not progress.search(line)]
        ref_lines = [line for line in ref_lines if not progress.search(line)]
    difference = compare_lines(rank0, ref_lines, spec["compare"],
                               spec["atol"], spec["rtol"])
    checks.record(f"stdout-equals-reference-{spec['compare']}",
                  not difference, difference + "\n--- reference stdout\n" +
                  rx.tail(rout, 20))

    # Lines that must differ from one process's: an opt-in that changes what
    # an update sees took effect.
    for pattern in spec["differs"]:
        mine = [line for line in rank0 if re.search(pattern, line)]
        theirs = [line for line in ref_lines if re.search(pattern, line)]
        checks.record(f"differs-from-reference:{pattern}",
                      bool(mine) and len(mine) == len(theirs) and
                      mine != theirs,
                      f"2 ranks: {mine}, reference: {theirs}")

    written = {r: rx.files_in(os.path.join(ddp_dir, f"rank{r}"))
               for r in (0, 1)}
    reference_files = rx.files_in(ref_dir)
    missing = [f for f in spec["files"] if f not in written[0] or
               os.path.getsize(os.path.join(ddp_dir, "rank0", f)) == 0]
    checks.record("rank0-wrote-files",
                  not missing and written[0] == reference_files,
                  f"missing in rank 0's folder: {missing}; it holds "
                  f"{written[0]}, the reference's {reference_files}")
    if not spec["one_folder"]:
        checks.record("rank1-wrote-nothing", not written[1],
                      f"rank 1 wrote {written[1]}")
    for rel in spec["text"]:
        got = os.path.join(ddp_dir, "rank0", rel)
        want = os.path.join(ref_dir, rel)
        if not (os.path.exists(got) and os.path.exists(want)):
            checks.record(f"file-equals-reference:{rel}", False,
                          "missing in rank 0's folder or the reference's")
            continue
        with open(got) as f1, open(want) as f2:
            difference = compare_lines(lines_of(f1.read()),
                                       lines_of(f2.read()), spec["compare"],
                                       spec["atol"], spec["rtol"])
        checks.record(f"file-equals-reference:{rel}", not difference,
                      difference)
    if spec["apart"]:
        apart_dir = os.path.join(work, "apart")
        for r in (0, 1):
            os.makedirs(os.path.join(apart_dir, f"rank{r}"))
        # A hang would end within 20 s (DDP_TIMEOUT_SECONDS), 120 s in all.
        acode, aout, aerr = rx.run(
            [ddprun, "--nproc-per-node", "2", "--tee=3", "--", "/bin/sh",
             "-c", 'cd "$0/rank$RANK" && exec "$@"', apart_dir, exe] +
            spec["args"](BATCH, inputs),
            env=rx.clean_env({"DDP_TIMEOUT_SECONDS": "20"}), timeout=120,
            log=os.path.join(logs, "apart.log"))
        apart_stdout = rx.split_ranks(aout)
        difference = compare_lines(
            [line for line in apart_stdout.get(0, []) if line.strip()],
            [line for line in stdout.get(0, []) if line.strip()],
            "exact", spec["atol"], spec["rtol"])
        in_folder = [os.path.exists(os.path.join(apart_dir, f"rank{r}",
                                                 spec["apart"]))
                     for r in (0, 1)]
        checks.record("apart-folders-run-as-one",
                      acode == 0 and not difference and
                      in_folder == [True, False],
                      f"exit {acode}; {spec['apart']} in rank 0's and rank "
                      f"1's folders: {in_folder}; {difference}\n"
                      f"{rx.tail(aerr)}")
    if spec["same_without_migrate_args"]:
        same_without_migrate_args(args, spec, src, orig_build, work, logs, env,
                                  cache, sources, ddpify, ddprun, inputs,
                                  per_rank[0], checks)
    return summary_exit()


def same_without_migrate_args(args, spec, src, orig_build, work, logs, env,
                              cache, sources, ddpify, ddprun, inputs,
                              hashes_with_args, checks):
    """The program migrated without spec's migrate_args (e.g. without
    --shard-optimizer), built and trained on 2 ranks the same way: its
    ranks must end with the same parameter hashes as the run with them."""
    plain = os.path.join(work, "plain")
    plain_build = os.path.join(work, "plain-build")
    code, out, err = rx.run([ddpify, "migrate", "--quiet", "--out-dir", plain,
                             "--root", src, "-p", orig_build] + cache +
                            sources, env=env, timeout=rx.BUILD_TIMEOUT_S,
                            log=os.path.join(logs, "migrate-plain.log"))
    if not checks.record("plain-migrate-runs", code == spec["exit"],
                         f"exit {code}\n{rx.tail(err)}"):
        return
    code, out, err = rx.configure(args, [
        "cmake", "-S", plain, "-B", plain_build, "-G", args.generator,
        *rx.torch_args(args, args.build_dir), *rx.launcher_args(args),
        f"-DCMAKE_PROJECT_INCLUDE={os.path.join(HERE, 'link_hook.cmake')}",
        f"-DDDPIFY_E2E_HOOK_OBJECT={os.path.abspath(args.hook_object)}"],
        plain_build, env=env, timeout=rx.BUILD_TIMEOUT_S,
        log=os.path.join(logs, "configure-plain.log"))
    if code == 0:
        code, out, err = rx.run(["cmake", "--build", plain_build],
                                timeout=rx.BUILD_TIMEOUT_S,
                                log=os.path.join(logs, "build-plain.log"))
    if not checks.record("plain-build", code == 0, rx.tail(out + err)):
        return
    run_dir = os.path.join(work, "plain-ddprun")
    for r in (0, 1):
        os.makedirs(os.path.join(run_dir, f"rank{r}"))
    hash_file = os.path.join(work, "hashes-plain.txt")
    code, out, err = rx.run(
        [ddprun, "--nproc-per-node", "2", "--", "/bin/sh", "-c",
         'cd "$0/rank$RANK" && exec "$@"', run_dir,
         os.path.join(plain_build, spec["exe"])] + spec["args"](BATCH, inputs),
        env=rx.clean_env({"DDP_TIMEOUT_SECONDS": "60",
                          "DDPIFY_E2E_HASH_FILE": hash_file}),
        timeout=180, log=os.path.join(logs, "plain-ddprun.log"))
    plain_hashes = sorted(h for (rk, h, _) in rx.read_hashes(hash_file)
                          if rk == 0)
    checks.record(
        "same-parameters-as-without-" + "-".join(
            a.lstrip("-") for a in spec["migrate_args"]),
        code == 0 and plain_hashes and plain_hashes == hashes_with_args,
        f"exit {code}; rank 0's hashes with {spec['migrate_args']}: "
        f"{hashes_with_args}, without: {plain_hashes}\n{rx.tail(err)}")


if __name__ == "__main__":
    sys.exit(main())
