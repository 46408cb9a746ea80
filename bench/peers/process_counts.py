"""What bench_peers counts that load cannot move much (docs/performance.md, "Peers"): a peer's
worker processes (the processes that appeared under this one when it started them), their RSS
and PSS, their threads' voluntary and involuntary context switches, and the system calls of a
block of calls (`perf stat` on the raw_syscalls tracepoint, enabled around the block only)."""

import os
import shutil
import signal
import subprocess
import tempfile


def descendants(root=None):
    """Every live process under `root` (this process by default)."""
    root = os.getpid() if root is None else root
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # The name (field 2) may hold spaces and parentheses: fields follow the last ')'.
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, queue = set(), [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.add(child)
            queue.append(child)
    return found


def memory_kib(pids):
    """(RSS, PSS) in KiB, summed over `pids`."""
    rss = pss = 0
    for pid in pids:
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss, pss


def switches(pids):
    """(voluntary, involuntary) context switches of every thread of `pids`, summed."""
    voluntary = involuntary = 0
    for pid in pids:
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            voluntary += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            involuntary += int(line.split()[1])
            except OSError:
                pass
    return voluntary, involuntary


class SyscallCount:
    """`perf stat -e raw_syscalls:sys_enter` attached to `pids` with its events disabled, turned
    on and off through perf's control FIFO (each answered with an ack), so only the block between
    enable() and disable() is counted. None of it where perf or the tracepoint is missing."""

    def __init__(self, pids):
        self.directory = tempfile.mkdtemp(prefix="orch-bench-perf-")
        self.control = os.path.join(self.directory, "control")
        self.ack = os.path.join(self.directory, "ack")
        self.output = os.path.join(self.directory, "stat.csv")
        os.mkfifo(self.control)
        os.mkfifo(self.ack)
        self.perf = subprocess.Popen(
            ["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-D", "-1",
             "--control", "fifo:%s,%s" % (self.control, self.ack), "-o", self.output,
             "-p", ",".join(str(p) for p in sorted(pids))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Opening the FIFOs waits for perf to open its ends: it is attached after this.
        self.to_perf = open(self.control, "w")
        self.from_perf = open(self.ack)

    @staticmethod
    def available():
        if shutil.which("perf") is None:
            return False
        probe = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "true"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return probe.returncode == 0 and "not supported" not in probe.stderr

    def _command(self, word):
        self.to_perf.write(word + "\n")
        self.to_perf.flush()
        self.from_perf.readline()

    def enable(self):
        self._command("enable")

    def disable(self):
        self._command("disable")

    def finish(self):
        """The count of the enabled blocks, after perf has exited."""
        self.to_perf.close()
        self.from_perf.close()
        self.perf.send_signal(signal.SIGINT)
        self.perf.wait()
        count = None
        with open(self.output) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] == "raw_syscalls:sys_enter" and \
                        fields[0].isdigit():
                    count = int(fields[0])
        shutil.rmtree(self.directory, ignore_errors=True)
        return count
