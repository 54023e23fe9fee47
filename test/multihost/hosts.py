#!/usr/bin/env python3
"""Test hosts: N "machines" on this one, for the multi-host tests.

Each host is
  * a network namespace with one interface, eth0 (a veth whose peer is a port
    of a bridge in a namespace of its own: nothing is added to the root
    namespace), with its own address 10.231.0.<i+1>/24 and loopback;
  * a private mount namespace with a tmpfs on /dev/shm (POSIX shared memory
    of one host is invisible on the others, as between real machines);
  * a UTS namespace with its own hostname (host<i>);
  * optionally a rate limit on its link: `tc ... tbf` on both ends of the
    veth, so the limit holds for what the host sends and what it receives.

A host is held by one process (`sleep`) that owns its mount and UTS
namespaces; commands enter them with nsenter, so every command on a host sees
the same /dev/shm. Everything (the processes started on the hosts, anything
else left in their network namespaces, the namespaces, the links) is removed
by close(), which runs at the end of a `with` block, at exit, and on SIGTERM,
SIGINT and SIGHUP; what a SIGKILLed run left (namespaces named
ddpt-<pid>-... whose pid is gone) is removed by the next start(). Needs
root.

As a library:

    with hosts.Hosts(2, rate="1gbit") as h:
        p = h.run(0, ["sh", "-c", "hostname"], background=True)
        h.run(1, ["ping", "-c1", h.addr(0)])          # foreground
        p.wait()

As a command:

    hosts.py check [--hosts N] [--rate R]     the self-check (namespaces,
                                              reachability, rate measured)
    hosts.py run [--hosts N] [--rate R] -- CMD ...
        runs CMD on every host at once and waits for all of them; in CMD,
        {index}, {addr}, {addr0} and {hosts} are replaced by the host's
        index, its address, host 0's address and N. Exit status: the first
        non-zero one of the hosts, else 0.
"""
import argparse
import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading

SUBNET = "10.231.0"


def _sh(*argv, check=True):
    """Runs an administrative command; its output is returned."""
    r = subprocess.run(list(argv), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: exit {r.returncode}: "
                           f"{r.stdout.strip()}")
    return r.stdout


def require_root(what="the multi-host tests"):
    """Fails (exit 1) with a clear message when not root."""
    if os.geteuid() != 0:
        sys.stderr.write(
            f"{what} need root (network and mount namespaces, tc); "
            "run as root as CI does, or leave them out with "
            "`ctest -LE multihost`\n")
        sys.exit(1)


class Hosts:
    """N test hosts; see the module's docstring."""

    _open = []  # every Hosts not closed yet, for atexit and signals
    _handlers_installed = False

    def __init__(self, n, rate=None, burst=None, latency="100ms",
                 prefix=None):
        if n < 1 or n > 250:
            raise ValueError("1 to 250 hosts")
        self.n = n
        self.rate = rate
        self.burst = burst
        self.latency = latency
        self.prefix = prefix or f"ddpt-{os.getpid()}-{id(self) % 10000}"
        self.bridge_ns = f"{self.prefix}-br"
        self.namespaces = []  # network namespaces made so far
        self.holders = []     # per host: the process holding its namespaces
        self.procs = []       # what run() started, all hosts
        self.closed = False
        self._lock = threading.Lock()

    # --- set up and tear down ---------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def netns(self, i):
        return f"{self.prefix}-h{i}"

    def addr(self, i):
        return f"{SUBNET}.{i + 1}"

    def hostname(self, i):
        return f"host{i}"

    def start(self):
        Hosts._install_handlers()
        remove_stale()
        Hosts._open.append(self)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self):
        _sh("ip", "netns", "add", self.bridge_ns)
        self.namespaces.append(self.bridge_ns)
        brx = ["ip", "netns", "exec", self.bridge_ns]
        _sh(*brx, "ip", "link", "add", "br0", "type", "bridge")
        _sh(*brx, "ip", "link", "set", "br0", "up")
        for i in range(self.n):
            ns = self.netns(i)
            _sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            # Created in the root namespace under unique names, then moved.
            tag = f"{os.getpid() % 100000}x{i}"
            _sh("ip", "link", "add", f"dh{tag}", "netns", ns, "type", "veth",
                "peer", "name", f"dp{tag}", "netns", self.bridge_ns)
            hx = ["ip", "netns", "exec", ns]
            _sh(*hx, "ip", "link", "set", f"dh{tag}", "name", "eth0")
            _sh(*brx, "ip", "link", "set", f"dp{tag}", "name", f"port{i}")
            _sh(*hx, "ip", "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _sh(*hx, "ip", "link", "set", "eth0", "up")
            _sh(*hx, "ip", "link", "set", "lo", "up")
            _sh(*brx, "ip", "link", "set", f"port{i}", "master", "br0", "up")
            if self.rate:
                self._limit(hx, "eth0")
                self._limit(brx, f"port{i}")
            self._start_holder(i)

    def _limit(self, prefix, dev):
        # A bucket of at least 10 ms at the rate (tbf cannot reach its rate
        # with a bucket smaller than one timer tick's worth), 256 KiB least.
        burst = self.burst or \
            f"{max(256 * 1024, int(_rate_bits(self.rate) / 8 / 100))}b"
        _sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
            self.rate, "burst", burst, "latency", self.latency)

    def _start_holder(self, i):
        # The holder mounts the host's /dev/shm, names it, says it is ready
        # and sleeps; it dies with its parent's death signal or at close().
        script = ("mount -t tmpfs -o mode=1777 tmpfs /dev/shm && "
                  f"hostname {self.hostname(i)} && echo ready && "
                  "exec sleep 1000000")
        holder = subprocess.Popen(
            ["ip", "netns", "exec", self.netns(i), "unshare", "--mount",
             "--uts", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
            start_new_session=True, text=True)
        self.holders.append(holder)
        line = holder.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"host {i}: its namespaces could not be set up")

    def close(self):
        """Ends every process on the hosts and removes the namespaces and
        links. Safe to call more than once, and from a signal handler."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for p in self.procs + self.holders:
            _kill_group(p)
        # Anything else in the hosts' network namespaces (a process that left
        # its session) is ours too.
        for ns in self.namespaces:
            out = _sh("ip", "netns", "pids", ns, check=False)
            for pid in out.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for p in self.procs + self.holders:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for ns in reversed(self.namespaces):
            _sh("ip", "netns", "del", ns, check=False)
        if self in Hosts._open:
            Hosts._open.remove(self)

    @classmethod
    def _install_handlers(cls):
        if cls._handlers_installed:
            return
        cls._handlers_installed = True
        atexit.register(cls._close_all)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous = signal.getsignal(sig)

            def handler(signum, frame, previous=previous):
                cls._close_all()
                if callable(previous):
                    previous(signum, frame)
                sys.exit(128 + signum)
            signal.signal(sig, handler)

    @classmethod
    def _close_all(cls):
        for h in list(cls._open):
            h.close()

    # --- running commands -------------------------------------------------

    def command(self, i, argv, cwd=None):
        """The argv that runs `argv` on host i (its network, mount and UTS
        namespaces) in `cwd` (default: this process's working directory;
        entering a mount namespace would otherwise start it in /)."""
        holder = self.holders[i]
        # The holder is `ip netns exec ... unshare ... sh` exec'ed into sleep
        # in the new namespaces: the process itself, pid unchanged.
        return ["nsenter", "-t", str(holder.pid), "-n", "-m", "-u",
                f"--wd={os.path.abspath(cwd or os.getcwd())}", "--"] + \
            list(argv)

    def run(self, i, argv, background=False, timeout=None, env=None,
            **popen):
        """Runs argv on host i in a session of its own. Background: returns
        the Popen (killed with its process group at close()). Foreground:
        waits (at most `timeout` s, then kills it and raises
        subprocess.TimeoutExpired) and returns a CompletedProcess; output is
        captured as text unless stdout/stderr are given."""
        if self.closed:
            raise RuntimeError("the hosts are closed")
        full_env = dict(os.environ if env is None else env)
        if not background:
            popen.setdefault("stdout", subprocess.PIPE)
            popen.setdefault("stderr", subprocess.PIPE)
        popen.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(self.command(i, argv, popen.pop("cwd", None)),
                             env=full_env,
                             start_new_session=True, text=True, **popen)
        self.procs.append(p)
        if background:
            return p
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            p.communicate()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def remove_stale():
    """Removes the hosts of runs that ended without close() (SIGKILLed):
    namespaces named ddpt-<pid>-* whose <pid> is gone, and what runs in
    them."""
    for line in _sh("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != "ddpt" or not parts[1].isdigit():
            continue
        if os.path.exists(f"/proc/{parts[1]}"):
            continue
        for pid in _sh("ip", "netns", "pids", name, check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _sh("ip", "netns", "del", name, check=False)


def _kill_group(p):
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- the self-check -------------------------------------------------------

_RECEIVER = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); n = 0; start = None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if start is None: start = time.monotonic()
    n += len(b)
print(n, time.monotonic() - start, flush=True)
"""

_SENDER = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
block = b"x" * (1 << 20)
for _ in range(int(sys.argv[3])): c.sendall(block)
c.close()
"""


_NAMER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
print("listening", flush=True)
s.settimeout(30); c, _ = s.accept(); c.sendall(socket.gethostname().encode())
c.close()
"""


def ask_hostname(h, i, j, port=29410):
    """What host j answers to a TCP connection from host i: its hostname."""
    py = sys.executable or "python3"
    server = h.run(j, [py, "-c", _NAMER, str(port)], background=True,
                   stdout=subprocess.PIPE)
    if server.stdout.readline().strip() != "listening":
        return None
    client = h.run(i, [py, "-c",
                       "import socket, sys; c = socket.create_connection("
                       "(sys.argv[1], int(sys.argv[2])), timeout=10); "
                       "print(c.recv(256).decode())", h.addr(j), str(port)],
                   timeout=30)
    server.wait(timeout=30)
    return client.stdout.strip() if client.returncode == 0 else None


def measure_rate(h, sender, receiver, megabytes, port=29411):
    """Bytes per second of one TCP stream from host `sender` to host
    `receiver`, measured by the receiver from its first byte to the end."""
    py = sys.executable or "python3"
    rx = h.run(receiver, [py, "-c", _RECEIVER, str(port)], background=True,
               stdout=subprocess.PIPE)
    if rx.stdout.readline().strip() != "listening":
        raise RuntimeError("the receiver did not start")
    tx = h.run(sender, [py, "-c", _SENDER, h.addr(receiver), str(port),
                        str(megabytes)], timeout=120)
    if tx.returncode != 0:
        raise RuntimeError(f"the sender failed: {tx.stderr}")
    n, seconds = rx.stdout.readline().split()
    rx.wait(timeout=30)
    return int(n) / float(seconds), int(n)


def self_check(n=2, rate="200mbit", megabytes=40):
    """Checks what the hosts promise; prints each finding. Returns the
    number of failed checks."""
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        failures += 0 if ok else 1

    prefix = None
    with Hosts(n, rate=rate) as h:
        prefix = h.prefix
        names = [h.run(i, ["hostname"]).stdout.strip() for i in range(n)]
        check(names == [h.hostname(i) for i in range(n)],
              f"hostnames {names}")
        check(socket.gethostname() not in names,
              f"this machine's hostname ({socket.gethostname()}) unchanged")
        # A file in host 0's /dev/shm: seen by a second command on host 0,
        # not by host 1, not by this machine.
        marker = f"/dev/shm/{h.prefix}-marker"
        h.run(0, ["sh", "-c", f"echo host0 > {marker}"])
        seen = [h.run(i, ["sh", "-c", f"test -e {marker}"]).returncode == 0
                for i in range(n)]
        check(seen[0] and not any(seen[1:]) and not os.path.exists(marker),
              f"/dev/shm private per host (marker seen on hosts: {seen}, "
              f"here: {os.path.exists(marker)})")
        for i in range(n):
            for j in range(n):
                if i != j:
                    answer = ask_hostname(h, i, j)
                    check(answer == h.hostname(j),
                          f"host{i} reaches host{j} at {h.addr(j)} "
                          f"(answered {answer!r})")
        r = h.run(0, ["ip", "-o", "-4", "addr", "show", "dev", "eth0"])
        check(f"{h.addr(0)}/24" in r.stdout, f"host0's address {h.addr(0)}")
        if rate:
            bps, nbytes = measure_rate(h, 1, 0, megabytes)
            limit = _rate_bits(rate) / 8
            print(f"      {nbytes} bytes host1 -> host0 at "
                  f"{bps * 8 / 1e6:.1f} Mbit/s (limit {rate})", flush=True)
            check(0.6 * limit <= bps <= 1.1 * limit,
                  "the rate limit holds (within 60-110 % of it)")
    if rate:
        # The same transfer without a limit: what the limit slows.
        with Hosts(2) as h:
            free_bps, nbytes = measure_rate(h, 1, 0, megabytes)
        print(f"      without a limit: {nbytes} bytes at "
              f"{free_bps * 8 / 1e6:.1f} Mbit/s", flush=True)
        check(free_bps > 1.5 * _rate_bits(rate) / 8,
              "an unlimited link is faster than the limit")
    left = _sh("ip", "netns", "list")
    check(prefix not in left, "namespaces removed at close()")
    return failures


def _rate_bits(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * factor
    raise ValueError(f"rate {rate}: use kbit, mbit or gbit")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("check")
    c.add_argument("--hosts", type=int, default=2)
    c.add_argument("--rate", default="200mbit")
    c.add_argument("--megabytes", type=int, default=40)
    r = sub.add_parser("run")
    r.add_argument("--hosts", type=int, default=2)
    r.add_argument("--rate")
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    require_root("hosts.py")
    if args.what == "check":
        return 1 if self_check(args.hosts, args.rate, args.megabytes) else 0
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("run: no command")
    with Hosts(args.hosts, rate=args.rate) as h:
        procs = []
        for i in range(h.n):
            fields = dict(index=i, addr=h.addr(i), addr0=h.addr(0),
                          hosts=h.n)
            procs.append(h.run(i, [a.format(**fields) for a in cmd],
                               background=True))
        codes = [p.wait() for p in procs]
    for i, code in enumerate(codes):
        print(f"host{i}: exit {code}", file=sys.stderr)
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
