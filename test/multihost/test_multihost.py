#!/usr/bin/env python3
"""Multi-host tests of the ddp runtime and ddprun on test hosts (hosts.py).

    test_multihost.py CASE --ddprun PATH --probe PATH --work-dir DIR

The trainer is the runtime's probe program in its `parity` mode
(test/runtime/train_probe.cpp): a DistributedDataParallel over a linear
model, SGD, each rank taking its share of every global batch; each rank
writes whether its wrapper all-reduced through shared memory and its final
parameters (9 significant digits: a float's bits). The reference is the same
program without a launcher at the global batch. One ddprun per host, as a
user would start them (`--nnodes H --node-rank i --master-addr <host0>`).

Cases (each a ctest test, label `multihost`):
  hosts        the hosts themselves: own hostname and /dev/shm, reachable by
               address, the rate limit holds (hosts.py check)
  parity-2x2   2 hosts x 2 ranks, links limited to 1 Gbit/s: every rank's
               parameters are bit-identical and equal the reference's within
               1e-5; the hierarchical all-reduce is used (shared memory
               within each host, one rank per host over Gloo)
  parity-2x2-plain
               the same with DDP_HIERARCHICAL=0: shared memory not used (no
               segment spans two hosts)
  parity-2x2-fp16
               hierarchical with DDP_COMM_HOOK=fp16 (the hosts' exchange in
               half precision): ranks bit-identical, the reference within
               1e-3 (bf16: test_data_parallel, LibTorch 2.x)
  parity-2x2-fp16-plain
               DDP_COMM_HOOK=fp16 without the hierarchy: the same
  parity-3x1   3 hosts x 1 rank: the same; shared memory not used
  torchrun-2x2 parity-2x2 with PyTorch's torchrun (--torchrun; the wheel's,
               unpatched, in the torch2 build) on each host instead of ddprun
  shm-1x2      1 host x 2 ranks (master at the host's address): shared
               memory used by both ranks; parity as above
  shm-2x1      2 hosts x 1 rank: shared memory not used; parity as above
  shm-2nodes-1host
               control: 2 ddprun "nodes" x 1 rank on one host (loopback,
               one /dev/shm): shared memory used — the path follows the
               /dev/shm the ranks share, not --nnodes, which is why the test
               hosts need a /dev/shm each
  example-csv_regression
               examples/csv_regression as ddpify migrated it, built with the
               end-to-end test's parameter-hash hook (the binary of
               e2e.csv_regression, a ctest fixture of this test), trained
               on 2 hosts x 2 ranks: every ddprun exits 0, every rank ends
               with the same parameter hash, every rank all-reduced through
               shared memory (hierarchical), rank 0's loss falls and only
               rank 0 saved the model; then on 1 host x 2 ranks
  fault-*      a job of several hosts broken while it trains (the probe's
               `steps` mode; collective timeout T = DDP_TIMEOUT_SECONDS = 8 s,
               so ddprun's heartbeat timeout is 4 s and its join timeout 8 s):
                 fault-worker-kill   rank 3 (host1) SIGKILLed
                 fault-worker-stop   rank 1 (host0) SIGSTOPped
                 fault-ddprun-term   host1's ddprun SIGTERMed
                 fault-ddprun-int    host0's ddprun SIGINTed
                 fault-link-cut      host1's link set down
                 fault-store-gone    every process of host0 (rank 0, the
                                     store, the coordinating ddprun) SIGKILLed
                 fault-port-in-use   another program holds the port on host0
                 fault-never-joins   3 nodes, host2 never starts
               In each: every ddprun exits non-zero within T + 10 s of the
               fault, with the root cause's code where it is known; each
               host's output has exactly one "ddprun: job failed:" line and it
               names the root cause; no "terminate called", no core dump; no
               process and no /dev/shm segment is left on any host; then a
               new job on the same port runs to exit 0.
  restart-worker-fail
               2 hosts x 2 ranks under ddprun --max-restarts 2 (the probe's
               `fail-first` mode): rank 3 (host1) exits 3 in the first
               attempt; both hosts restart together (each prints exactly one
               "ddprun: restarting the job (attempt 2 of 3): worker rank 3 on
               host1 ..." line), every rank runs attempt 1 (its
               TORCHELASTIC_RESTART_COUNT) to the end, both ddpruns exit 0,
               and no process or /dev/shm segment is left.
  token-2x1    2 hosts x 1 rank under a job token (DDP_JOB_TOKEN): a
               ddprun on host2 without the token, then one with another,
               try to join as node 1 and are refused (exit 2, one line on
               each side naming host2's address), then host1's ddprun with
               the token joins and the job trains to exit 0 on both hosts;
               node 0's ddprun and rank 0's store listen on host0's address
               only (not on its loopback: /proc/net/tcp on host0).
Exit status 0 when every check passed, 1 otherwise. Needs root.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hosts  # noqa: E402

PORT = 29500
RUN_TIMEOUT_S = 120
EXIT_GRACE_S = 3  # how long a just-killed process may still be listed
TOLERANCE = 1e-5
# Variables of an outer launcher that would confuse the ranks or the
# reference.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_RUN_ID",
                 "DDP_BACKEND", "DDP_SHM", "DDP_SHM_THREAD")


def clean_env():
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env["DDP_TIMEOUT_SECONDS"] = "60"
    return env


class Checks:
    def __init__(self):
        self.failed = []

    def record(self, name, ok, detail=""):
        print(("ok    " if ok else "FAIL  ") + name +
              ("" if ok or not detail else ": " + detail), flush=True)
        if not ok:
            self.failed.append(name)
        return ok


def read_result(path):
    """({"shm": bool, "hierarchical": bool}, {name: [value text]}) of one
    rank's file."""
    flags = {}
    params = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("shm", "hierarchical"):
                flags[parts[0]] = parts[1] == "1"
            else:
                params[parts[0]] = parts[1:]
    return flags, params


def reference(args, work, global_batch):
    out = os.path.join(work, "reference")
    r = subprocess.run([args.probe, "parity", str(global_batch), out],
                       env=clean_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True,
                       timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"the reference run failed ({r.returncode}):\n"
                           f"{r.stdout}")
    shm, params = read_result(out + ".rank0")
    return params


def run_job(args, h, placement, per_rank_batch, out, master=None,
            extra_env=None):
    """Runs one job: placement[k] is the host of ddprun node k; each node
    has `nproc` ranks. Returns [(node, exit code, output)]."""
    nodes = len(placement["hosts"])
    nproc = placement["nproc"]
    master = master or h.addr(placement["hosts"][0])
    procs = []
    start = time.monotonic()
    for node, host in enumerate(placement["hosts"]):
        env = clean_env()
        env.update(extra_env or {})
        if placement.get("torchrun"):
            # PyTorch's own launcher, unpatched (static rendezvous: node 0's
            # agent runs the store on the master port).
            launcher, extra = torchrun_command(args.torchrun)
            env.update(extra)
            # Underscore spellings: the only ones of PyTorch 1.13.
            argv = launcher + ["--nproc_per_node", str(nproc), "--nnodes",
                               str(nodes), "--node_rank", str(node),
                               "--master_addr", master, "--master_port",
                               str(PORT), "--no_python", args.probe]
        else:
            argv = [args.ddprun, "--nproc-per-node", str(nproc), "--nnodes",
                    str(nodes), "--node-rank", str(node), "--master-addr",
                    master, "--master-port", str(PORT), "--tee=3", "--",
                    args.probe]
        argv += ["parity", str(per_rank_batch), out]
        procs.append(h.run(host, argv, background=True, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    results = []
    for node, p in enumerate(procs):
        left = max(1, RUN_TIMEOUT_S - (time.monotonic() - start))
        try:
            output, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            hosts._kill_group(p)
            output, _ = p.communicate()
            output += f"\n(timed out after {RUN_TIMEOUT_S} s)"
        results.append((node, p.returncode, output))
    print(f"      job ran {time.monotonic() - start:.1f} s", flush=True)
    return results


def torchrun_command(spec):
    """(argv prefix, environment additions) of --torchrun, a command line
    such as `env PYTHONPATH=/site /usr/bin/python3.11 -m torch.distributed.run`
    ("env" and its assignments become environment variables)."""
    words = spec.split()
    extra = {}
    if words and words[0] == "env":
        words = words[1:]
        while words and "=" in words[0]:
            k, v = words.pop(0).split("=", 1)
            extra[k] = v
    return words, extra


def check_job(checks, args, work, n_hosts, placement, per_rank_batch,
              expect_shm, master=None, rate=None, expect_hierarchical=False,
              extra_env=None, tolerance=TOLERANCE):
    world = len(placement["hosts"]) * placement["nproc"]
    global_batch = per_rank_batch * world
    ref = reference(args, work, global_batch)
    out = os.path.join(work, "rank")
    with hosts.Hosts(n_hosts, rate=rate) as h:
        results = run_job(args, h, placement, per_rank_batch, out, master,
                          extra_env)
        # Every process the job started has ended with its ddprun (which
        # waits for its workers: no grace).
        leftovers, shm_left = left_on_hosts(h, grace=0)
    for node, code, output in results:
        checks.record(f"node{node}-exit-0", code == 0,
                      f"exit {code}\n{output[-3000:]}")
    checks.record("no-process-left", not any(leftovers.values()),
                  f"{leftovers}")
    checks.record("no-shm-segment-left", not any(shm_left.values()),
                  f"{shm_left}")
    ranks = {}
    for r in range(world):
        path = f"{out}.rank{r}"
        if os.path.exists(path):
            ranks[r] = read_result(path)
    checks.record("every-rank-wrote", sorted(ranks) == list(range(world)),
                  f"ranks {sorted(ranks)} of {world}")
    if not ranks:
        return
    shm = {r: f.get("shm") for r, (f, _) in ranks.items()}
    checks.record(
        f"shared-memory-{'used' if expect_shm else 'not-used'}",
        all(s == expect_shm for s in shm.values()),
        f"uses_shared_memory() per rank: {shm}")
    hier = {r: f.get("hierarchical") for r, (f, _) in ranks.items()}
    checks.record(
        f"hierarchical-{'used' if expect_hierarchical else 'not-used'}",
        all(x == expect_hierarchical for x in hier.values()),
        f"uses_hierarchical_allreduce() per rank: {hier}")
    first = ranks[min(ranks)][1]
    identical = all(p == first for (_, p) in ranks.values())
    checks.record("ranks-bit-identical", identical,
                  "; ".join(f"rank {r}: {p}" for r, (_, p) in ranks.items()))
    worst = 0.0
    ok = sorted(first) == sorted(ref)
    for name, values in ref.items():
        got = first.get(name, [])
        if len(got) != len(values):
            ok = False
            continue
        for a, b in zip(got, values):
            a, b = float(a), float(b)
            worst = max(worst, abs(a - b) / max(1.0, abs(b)))
            ok = ok and abs(a - b) <= tolerance * max(1.0, abs(b))
    checks.record("equals-one-process-at-global-batch", ok,
                  f"largest difference {worst:.3g} (tolerance {tolerance}); "
                  f"ranks {first}, reference {ref}")
    print(f"      world {world}, global batch {global_batch}, largest "
          f"difference from the reference {worst:.3g}", flush=True)


def check_example(checks, args, work):
    exe = args.example_bin
    if not exe or not os.path.exists(exe):
        checks.record("example-built", False,
                      f"{exe} is missing: it is built by the test "
                      "e2e.csv_regression (`ctest -R e2e.csv_regression`)")
        return
    data = os.path.join(work, "data.csv")
    r = subprocess.run([exe, "--write-sample", data], env=clean_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=RUN_TIMEOUT_S)
    if not checks.record("write-sample", r.returncode == 0, r.stdout):
        return
    # Shared memory in both: within each host (hierarchical) on 2 hosts.
    for label, n_hosts, nproc, expect_shm in (("2x2", 2, 2, True),
                                              ("1x2", 1, 2, True)):
        run_dir = os.path.join(work, label)
        world = n_hosts * nproc
        for rank in range(world):
            os.makedirs(os.path.join(run_dir, f"rank{rank}"))
        hash_file = os.path.join(work, f"hashes-{label}.txt")
        env = clean_env()
        env["DDPIFY_E2E_HASH_FILE"] = hash_file
        start = time.monotonic()
        with hosts.Hosts(n_hosts, rate="1gbit") as h:
            procs = []
            for node in range(n_hosts):
                argv = [args.ddprun, "--nproc-per-node", str(nproc),
                        "--nnodes", str(n_hosts), "--node-rank", str(node),
                        "--master-addr", h.addr(0), "--master-port",
                        str(PORT), "--tee=3", "--", "/bin/sh", "-c",
                        'cd "$0/rank$RANK" && exec "$@"', run_dir, exe, data,
                        "10"]
                procs.append(h.run(node, argv, background=True, env=env,
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT))
            outputs = []
            for node, p in enumerate(procs):
                try:
                    out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    hosts._kill_group(p)
                    out, _ = p.communicate()
                outputs.append((p.returncode, out))
        print(f"      {label}: trained in {time.monotonic() - start:.1f} s",
              flush=True)
        for node, (code, out) in enumerate(outputs):
            checks.record(f"{label}-node{node}-exit-0", code == 0,
                          f"exit {code}\n{out[-3000:]}")
        rows = []
        if os.path.exists(hash_file):
            rows = [line.split() for line in open(hash_file) if line.strip()]
        ranks = sorted(int(row[0]) for row in rows)
        same = (ranks == list(range(world)) and
                len({row[1] for row in rows}) == 1 and
                all("active=1" in row for row in rows))
        checks.record(f"{label}-ranks-identical-parameters", same,
                      f"hook lines {rows}")
        want = f"shm={int(expect_shm)}"
        checks.record(
            f"{label}-shared-memory-{'used' if expect_shm else 'not-used'}",
            bool(rows) and all(want in row for row in rows),
            f"hook lines {rows}")
        losses = [float(m.group(1)) for m in re.finditer(
            r"^\[rank0\]: epoch \d+ mse ([-0-9.e]+)$", outputs[0][1],
            re.MULTILINE)]
        checks.record(f"{label}-loss-falls",
                      len(losses) >= 2 and losses[-1] < losses[0],
                      f"rank 0's losses {losses}")
        saved = [rank for rank in range(world) if os.path.exists(
            os.path.join(run_dir, f"rank{rank}", "csv_model.pt"))]
        checks.record(f"{label}-only-rank0-saved", saved == [0],
                      f"ranks that saved csv_model.pt: {saved}")


# --- faults -----------------------------------------------------------------

FAULT_T = 8          # DDP_TIMEOUT_SECONDS of the fault tests
FAULT_BOUND = FAULT_T + 10


class Node:
    """One ddprun of a job on a test host, its output read as it comes."""

    def __init__(self, h, host, argv, env):
        self.host = host
        self.lines = []
        self.exited_at = None
        self.proc = h.run(host, argv, background=True, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
        self.proc.wait()
        self.exited_at = time.monotonic()

    def wait(self, deadline):
        self._reader.join(max(0.1, deadline - time.monotonic()))
        if self._reader.is_alive():
            hosts._kill_group(self.proc)
            self._reader.join(10)
            self.lines.append("(still running at the deadline: killed)")
        return self.proc.returncode

    def output(self):
        return "\n".join(self.lines)


def fault_env():
    env = clean_env()
    env["DDP_TIMEOUT_SECONDS"] = str(FAULT_T)
    return env


def start_nodes(args, h, host_list, nproc, steps, port=PORT, nnodes=None,
                options=(), probe_args=None):
    nnodes = nnodes or len(host_list)
    nodes = []
    for node, host in enumerate(host_list):
        argv = [args.ddprun, "--nproc-per-node", str(nproc), "--nnodes",
                str(nnodes), "--node-rank", str(node), "--master-addr",
                h.addr(0), "--master-port", str(port), "--tee=3",
                *options, "--", args.probe,
                *(probe_args or ["steps", str(steps)])]
        nodes.append(Node(h, host, argv, fault_env()))
    return nodes


def wait_training(nodes, timeout=60):
    """Until every node's output shows its ranks stepping."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(any(re.match(r"^\[rank\d+\]: step [3-9]", line)
                   for line in n.lines) for n in nodes):
            return True
        if any(n.exited_at for n in nodes):
            return False
        time.sleep(0.1)
    return False


def worker_pid(h, host, rank, probe):
    """The pid of the probe process of global `rank` on `host`."""
    for pid in hosts._sh("ip", "netns", "pids", h.netns(host),
                         check=False).split():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and cmd and \
                os.path.basename(cmd[0].decode()) == os.path.basename(probe):
            return int(pid)
    return None


def pids_on_host(h, i, ignore=()):
    """The pids in host i's namespace other than its holder and `ignore`."""
    pids = hosts._sh("ip", "netns", "pids", h.netns(i), check=False).split()
    return [p for p in pids if p != str(h.holders[i].pid) and p not in ignore]


def left_on_hosts(h, ignore=(), grace=EXIT_GRACE_S):
    """({host: pids other than the holder and `ignore`}, {host: /dev/shm
    entries}). A process SIGKILLed a moment ago is still listed while the
    kernel tears it down (a LibTorch worker's address space takes a while),
    so a pid counts as left only if it is still there `grace` seconds on."""
    deadline = time.monotonic() + grace
    while True:
        procs = {i: pids_on_host(h, i, ignore) for i in range(h.n)}
        if not any(procs.values()) or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    shm = {i: h.run(i, ["sh", "-c", "ls /dev/shm"]).stdout.split()
           for i in range(h.n)}
    return procs, shm


def check_fault(checks, nodes, fault_at, codes, causes, h, ignore=()):
    """Every node exits with codes[k] (None: any non-zero) within the bound
    of fault_at; its output has one root-cause line matching causes[k]."""
    deadline = fault_at + FAULT_BOUND + 20  # past the bound: a clear failure
    for k, n in enumerate(nodes):
        code = n.wait(deadline)
        took = (n.exited_at or time.monotonic()) - fault_at
        out = n.output()
        want = codes[k]
        checks.record(f"node{k}-exit-{'nonzero' if want is None else want}",
                      code != 0 and code is not None and
                      (want is None or code == want),
                      f"exit {code}\n{out[-3000:]}")
        checks.record(f"node{k}-within-{FAULT_BOUND}s", took <= FAULT_BOUND,
                      f"exited {took:.1f} s after the fault")
        print(f"      node{k} on host{n.host}: exit {code} after "
              f"{took:.1f} s", flush=True)
        if causes[k] is None:
            continue
        lines = [line for line in n.lines
                 if line.startswith("ddprun: job failed:")]
        checks.record(f"node{k}-one-root-cause-line",
                      len(lines) == 1 and re.search(causes[k], lines[0]),
                      f"want one line matching {causes[k]!r}, got {lines}"
                      f"\n{out[-3000:]}")
        if lines:
            print(f"      host{n.host}: {lines[0]}", flush=True)
        checks.record(f"node{k}-no-terminate-no-core",
                      "terminate called" not in out and
                      "core dumped" not in out.lower(),
                      out[-3000:])
    procs, shm = left_on_hosts(h, ignore)
    checks.record("no-process-left", not any(procs.values()), f"{procs}")
    checks.record("no-shm-segment-left", not any(shm.values()), f"{shm}")


def check_new_job(checks, args, h, host_list, nproc):
    """A new job on the same port right after the failed one runs to 0."""
    nodes = start_nodes(args, h, host_list, nproc, 50)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    codes = [n.wait(deadline) for n in nodes]
    checks.record("new-job-same-port-exits-0", all(c == 0 for c in codes),
                  f"exits {codes}\n" +
                  "\n".join(n.output()[-1500:] for n in nodes))


def check_fault_case(checks, args, case):
    n_hosts = 3 if case == "fault-never-joins" else 2
    with hosts.Hosts(n_hosts) as h:
        rank1_host0 = r"worker rank 1 on host0 \(pid \d+\)"
        if case == "fault-port-in-use":
            squatter = h.run(0, [sys.executable, "-c",
                                 "import socket, time\n"
                                 "s = socket.socket()\n"
                                 f"s.bind(('0.0.0.0', {PORT})); s.listen(8)\n"
                                 "print('listening', flush=True)\n"
                                 "time.sleep(600)"],
                             background=True, stdout=subprocess.PIPE)
            squatter.stdout.readline()
            fault_at = time.monotonic()
            nodes = start_nodes(args, h, [0, 1], 2, 100000)
            check_fault(checks, nodes, fault_at, [1, 1], [
                rf"--master-port {PORT} cannot be used on host0: "
                r"Address already in use",
                rf"node 0's ddprun at {h.addr(0)}:{PORT} did not start the "
                r"job"], h, ignore=(str(squatter.pid),))
            hosts._kill_group(squatter)
            squatter.wait()
            check_new_job(checks, args, h, [0, 1], 2)
            return
        if case == "fault-never-joins":
            fault_at = time.monotonic()
            nodes = start_nodes(args, h, [0, 1], 1, 100000, nnodes=3)
            never = r"node\(s\) 2 of 3 never joined"
            check_fault(checks, nodes, fault_at, [1, 1], [never, never], h)
            check_new_job(checks, args, h, [0, 1], 1)
            return
        nodes = start_nodes(args, h, [0, 1], 2, 100000)
        if not checks.record("training-started", wait_training(nodes),
                             "\n".join(n.output()[-2000:] for n in nodes)):
            for n in nodes:
                hosts._kill_group(n.proc)
            return
        fault_at = time.monotonic()
        if case == "fault-worker-kill":
            pid = worker_pid(h, 1, 3, args.probe)
            os.kill(pid, signal.SIGKILL)
            cause = r"worker rank 3 on host1 \(pid \d+\) was killed by SIGKILL"
            check_fault(checks, nodes, fault_at, [137, 137], [cause, cause], h)
        elif case == "fault-worker-stop":
            pid = worker_pid(h, 0, 1, args.probe)
            os.kill(pid, signal.SIGSTOP)
            cause = rank1_host0 + " was stopped by SIGSTOP"
            check_fault(checks, nodes, fault_at, [1, 1], [cause, cause], h)
        elif case == "fault-ddprun-term":
            nodes[1].proc.send_signal(signal.SIGTERM)
            cause = r"ddprun on host1 \(node 1\) was sent SIGTERM"
            check_fault(checks, nodes, fault_at, [143, 143], [cause, cause], h)
        elif case == "fault-ddprun-int":
            nodes[0].proc.send_signal(signal.SIGINT)
            cause = r"ddprun on host0 \(node 0\) was sent SIGINT"
            check_fault(checks, nodes, fault_at, [130, 130], [cause, cause], h)
        elif case == "fault-link-cut":
            hosts._sh("ip", "netns", "exec", h.netns(1), "ip", "link", "set",
                      "eth0", "down")
            check_fault(checks, nodes, fault_at, [1, 1], [
                rf"node 1's ddprun on host1 \({h.addr(1)}\) stopped "
                r"answering",
                rf"lost node 0's ddprun at {h.addr(0)}:{PORT}: it stopped "
                r"answering"], h)
            hosts._sh("ip", "netns", "exec", h.netns(1), "ip", "link", "set",
                      "eth0", "up")
        elif case == "fault-store-gone":
            # Until none is left: a process forked while the list was read
            # would escape a single pass.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                pids = pids_on_host(h, 0)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.05)
            check_fault(checks, nodes, fault_at, [None, 1], [
                None, rf"lost node 0's ddprun at {h.addr(0)}:{PORT}: it "
                r"closed its connection"], h)
        else:
            raise ValueError(case)
        check_new_job(checks, args, h, [0, 1], 2)


def check_restart_case(checks, args):
    """restart-worker-fail: see the module's docstring."""
    with hosts.Hosts(2) as h:
        start = time.monotonic()
        nodes = start_nodes(args, h, [0, 1], 2, 0,
                            options=["--max-restarts", "2"],
                            probe_args=["fail-first", "1", "30", "5"])
        deadline = start + RUN_TIMEOUT_S
        restart = (r"^ddprun: restarting the job \(attempt 2 of 3\): worker "
                   r"rank 3 on host1 \(pid \d+\) exited with code 3$")
        for k, n in enumerate(nodes):
            code = n.wait(deadline)
            out = n.output()
            checks.record(f"node{k}-exit-0", code == 0,
                          f"exit {code}\n{out[-3000:]}")
            lines = [line for line in n.lines if "restarting the job" in line]
            checks.record(f"node{k}-one-restart-line",
                          len(lines) == 1 and re.match(restart, lines[0]),
                          f"want one line matching {restart!r}, got {lines}"
                          f"\n{out[-3000:]}")
            if lines:
                print(f"      host{n.host}: {lines[0]}", flush=True)
            checks.record(f"node{k}-no-job-failed-line",
                          not any("job failed" in line for line in n.lines),
                          out[-3000:])
            for rank in (2 * k, 2 * k + 1):
                p = f"[rank{rank}]: "
                for want in ("attempt 0 of max 2", "attempt 1 of max 2",
                             "done"):
                    checks.record(
                        f"rank{rank}-{want.replace(' ', '-')}",
                        n.lines.count(p + want) == 1,
                        f"want one line {p + want!r}\n{out[-3000:]}")
        failing = [line for n in nodes for line in n.lines
                   if "failing in attempt" in line]
        checks.record("one-worker-failed", failing ==
                      ["[rank3]: failing in attempt 0"], f"{failing}")
        print(f"      job ran {time.monotonic() - start:.1f} s", flush=True)
        procs, shm = left_on_hosts(h)
        checks.record("no-process-left", not any(procs.values()), f"{procs}")
        checks.record("no-shm-segment-left", not any(shm.values()), f"{shm}")


# --- job token ---------------------------------------------------------------

TOKEN = "multihost-job-token-0123456789abcdef"


def listening_ports(h, host, address):
    """The ports host `host` listens on at `address` ("0.0.0.0": every
    interface, IPv4 or IPv6)."""
    out = h.run(host, ["cat", "/proc/net/tcp", "/proc/net/tcp6"],
                timeout=10).stdout
    if address == "0.0.0.0":
        want = ("00000000", "0" * 32)
    else:
        want = ("".join(f"{int(b):02X}"
                        for b in reversed(address.split("."))),)
    ports = set()
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:
            local, port = fields[1].split(":")
            if local in want:
                ports.add(int(port, 16))
    return ports


def check_token_case(checks, args):
    """token-2x1: see the module's docstring."""
    with hosts.Hosts(3) as h:
        start = time.monotonic()
        env = clean_env()
        env["DDP_TIMEOUT_SECONDS"] = "30"

        def argv(node):
            return [args.ddprun, "--nproc-per-node", "1", "--nnodes", "2",
                    "--node-rank", str(node), "--master-addr", h.addr(0),
                    "--master-port", str(PORT), "--tee=3", "--", args.probe,
                    "steps", "400"]

        with_token = dict(env, DDP_JOB_TOKEN=TOKEN)
        node0 = Node(h, 0, argv(0), with_token)
        intruders = [h.run(2, argv(1), env=env, timeout=60),
                     h.run(2, argv(1), timeout=60,
                           env=dict(env, DDP_JOB_TOKEN="another-" + TOKEN))]
        for name, r in zip(("no-token", "other-token"), intruders):
            out = r.stdout + r.stderr
            checks.record(f"{name}-refused-exit-2", r.returncode == 2,
                          f"exit {r.returncode}\n{out[-2000:]}")
            lines = [l for l in out.splitlines() if l.startswith("ddprun:")]
            checks.record(f"{name}-one-line",
                          len(lines) == 1 and "refused this node" in lines[0],
                          f"{lines}")
        node1 = Node(h, 1, argv(1), with_token)
        trained = wait_training([node0, node1])
        checks.record("job-trains", trained, node0.output()[-2000:])
        on_loopback = listening_ports(h, 0, "127.0.0.1")
        on_any = listening_ports(h, 0, "0.0.0.0")
        on_host0 = listening_ports(h, 0, h.addr(0))
        deadline = start + RUN_TIMEOUT_S
        codes = [n.wait(deadline) for n in (node0, node1)]
        for k, (n, code) in enumerate(zip((node0, node1), codes)):
            checks.record(f"node{k}-exit-0", code == 0,
                          f"exit {code}\n{n.output()[-3000:]}")
        refused = [l for l in node0.lines if l.startswith("ddprun: refused")]
        print("      " + "\n      ".join(refused), flush=True)
        checks.record(
            "node0-two-refusal-lines",
            len(refused) == 2 and all(f"from {h.addr(2)} " in l
                                      for l in refused),
            f"{refused}")
        checks.record("coordinator-on-host0-address-only",
                      PORT in on_host0 and PORT not in on_loopback | on_any,
                      f"{on_host0} / loopback {on_loopback} / any {on_any}")
        # Rank 0's store (and Gloo's ports) on host0's address; nothing of
        # the job on every interface.
        checks.record("store-on-host0-address-only",
                      len(on_host0 - {PORT}) >= 1 and not on_any,
                      f"{on_host0} / loopback {on_loopback} / any {on_any}")
        checks.record("token-in-no-output",
                      TOKEN not in node0.output() + node1.output())
        print(f"      job ran {time.monotonic() - start:.1f} s", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--torchrun",
                        help="the torchrun command line (torchrun-2x2)")
    parser.add_argument("--example-bin",
                        help="the migrated csv_regression (example case)")
    args = parser.parse_args()
    hosts.require_root()
    work = os.path.join(args.work_dir, args.case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    checks = Checks()
    start = time.monotonic()
    if args.case == "hosts":
        if hosts.self_check(3, rate="200mbit", megabytes=40):
            checks.failed.append("self-check")
    elif args.case == "parity-2x2":
        # Hierarchical: shared memory within each host, Gloo between them.
        check_job(checks, args, work, 2, dict(hosts=[0, 1], nproc=2), 2,
                  expect_shm=True, expect_hierarchical=True, rate="1gbit")
    elif args.case == "parity-2x2-plain":
        check_job(checks, args, work, 2, dict(hosts=[0, 1], nproc=2), 2,
                  expect_shm=False, rate="1gbit",
                  extra_env={"DDP_HIERARCHICAL": "0"})
    elif args.case in ("parity-2x2-fp16", "parity-2x2-fp16-plain"):
        # Compressed: the hosts' exchange (hierarchical) or every rank's
        # all-reduce (plain) in half precision; the ranks stay bit-identical,
        # the average exact up to its rounding.
        hierarchical = args.case == "parity-2x2-fp16"
        check_job(checks, args, work, 2, dict(hosts=[0, 1], nproc=2), 2,
                  expect_shm=hierarchical,
                  expect_hierarchical=hierarchical, rate="1gbit",
                  extra_env={"DDP_COMM_HOOK": "fp16",
                             "DDP_HIERARCHICAL": "1" if hierarchical else "0"},
                  tolerance=1e-3)
    elif args.case == "torchrun-2x2":
        if not args.torchrun:
            parser.error("torchrun-2x2 needs --torchrun")
        check_job(checks, args, work, 2,
                  dict(hosts=[0, 1], nproc=2, torchrun=True), 2,
                  expect_shm=True, expect_hierarchical=True, rate="1gbit")
    elif args.case == "parity-3x1":
        check_job(checks, args, work, 3, dict(hosts=[0, 1, 2], nproc=1), 2,
                  expect_shm=False)

    elif args.case == "shm-1x2":
        check_job(checks, args, work, 1, dict(hosts=[0], nproc=2), 4,
                  expect_shm=True)
    elif args.case == "shm-2x1":
        check_job(checks, args, work, 2, dict(hosts=[0, 1], nproc=1), 4,
                  expect_shm=False)
    elif args.case == "shm-2nodes-1host":
        check_job(checks, args, work, 1, dict(hosts=[0, 0], nproc=1), 4,
                  expect_shm=True, master="127.0.0.1")
    elif args.case == "example-csv_regression":
        check_example(checks, args, work)
    elif args.case.startswith("fault-"):
        check_fault_case(checks, args, args.case)
    elif args.case == "restart-worker-fail":
        check_restart_case(checks, args)
    elif args.case == "token-2x1":
        check_token_case(checks, args)
    else:
        parser.error(f"unknown case {args.case}")
    print(f"{args.case}: {time.monotonic() - start:.1f} s, "
          f"{'FAILED: ' + ', '.join(checks.failed) if checks.failed else 'passed'}",
          flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
