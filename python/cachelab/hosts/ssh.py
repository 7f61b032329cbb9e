"""The `ssh` topology: real hosts reached over SSH (paramiko), with the methods of
`cachelab.hosts.host.Host`, so the runner starts servers, middlewares and load generators on
them as on emulated hosts.

On each host cachelab works in `/tmp/cachelab-ssh-<controller>-<pid>-<host>/`: the
binaries it copied (`copy_binaries = true`), the echo probe, and one directory per run
where processes write their files; the paths the runner gives (its local run directory)
are translated to it, and `collect` brings the files back. A remote process runs as

    setsid sh -c 'CMD >OUT 2>&1 & echo $! >PID; wait $!; echo $? >RC'

so it survives the SSH channel, is stopped by PID, and leaves its exit status. A harness
that dies leaves its directory and processes behind; the next connection from the same
controller finds the directories whose owner PID no longer runs here, kills the processes
named in their PID files, and removes them.

A run's hosts are set up at once (connected, cleaned of stale directories, given the echo
probe and a run directory), and collected and asked for versions at once, one thread
each: every step waits on the network, so N hosts take about as long as the slowest one.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import TypeVar

import paramiko

from cachelab.errors import UserError
from cachelab.hosts import cgroups, echo
from cachelab.hosts.binaries import find_binary
from cachelab.spec.experiment import Topology
from cachelab.spec.topology import Layout

#: Binaries of ours that `copy_binaries` puts on the hosts.
OURS = ("cachelab-proxy", "cachelab-load")
CONNECT_TIMEOUT_S = 10.0


def controller_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:20] or "controller"


class RemoteProcess:
    """A process on an SSH host with the parts of `subprocess.Popen` the runner uses."""

    def __init__(self, host: SshHost, pid: int, rc_path: str, out_remote: str,
                 out_local: Path) -> None:
        self.host = host
        self.pid = pid
        self.returncode: int | None = None
        self._rc_path = rc_path
        self._out = (out_remote, out_local)

    def poll(self) -> int | None:
        if self.returncode is None:
            code, text, _ = self.host.exec(f"cat {shlex.quote(self._rc_path)} 2>/dev/null")
            if code == 0 and text.strip().lstrip("-").isdigit():
                self.returncode = int(text.strip())
                self.host.fetch(*self._out)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid} on {self.host.name}",
                                                timeout or 0)
            time.sleep(0.1)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.host.exec(f"kill -{int(sig)} {self.pid} 2>/dev/null")

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class PipedRemote:
    """A helper whose output the caller reads line by line (the echo probe, iperf3)."""

    def __init__(self, host: SshHost, command: str) -> None:
        self.host = host
        _, stdout, _ = host.client.exec_command(f"echo $$; exec {command}")
        self.stdout = stdout
        self.pid = int(stdout.readline().strip())

    def poll(self) -> int | None:
        return self.stdout.channel.recv_exit_status() if self.stdout.channel.exit_status_ready() \
            else None

    def kill(self) -> None:
        self.host.exec(f"kill -9 {self.pid} 2>/dev/null")

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout or 10)
        while not self.stdout.channel.exit_status_ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.stdout.channel.recv_exit_status() if self.stdout.channel.exit_status_ready() \
            else -9


class SshHost:
    remote = True
    group = None
    prefix: tuple[str, ...] = ()

    def __init__(self, name: str, address: str, *, user: str | None, key: str | None,
                 port: int = 22, strict_host_keys: bool = True,
                 copy_binaries: bool = False) -> None:
        self.name = name
        self.address = address
        self.user = user or getpass.getuser()
        self.copy_binaries = copy_binaries
        self.client = paramiko.SSHClient()
        self.client.load_system_host_keys()
        self.client.set_missing_host_key_policy(
            paramiko.RejectPolicy() if strict_host_keys else paramiko.AutoAddPolicy())
        try:
            self.client.connect(address, port=port, username=self.user,
                                key_filename=os.path.expanduser(key) if key else None,
                                timeout=CONNECT_TIMEOUT_S, banner_timeout=CONNECT_TIMEOUT_S,
                                auth_timeout=CONNECT_TIMEOUT_S)
        except (OSError, paramiko.SSHException) as exc:
            raise UserError(f"host {name}: cannot connect over SSH to {self.user}@{address}:"
                            f"{port}: {exc}") from None
        self.workdir = f"/tmp/cachelab-ssh-{controller_tag()}-{os.getpid()}-{name}"
        self.root = self.exec("id -u")[1].strip() == "0"
        self._resolved: dict[str, str] = {}
        self._local_run: Path | None = None
        self._remote_run = self.workdir
        self._spawned: list[RemoteProcess] = []
        self.remove_stale()
        self.exec_checked(f"mkdir -p {self.workdir}/bin")
        self.put_text(Path(echo.__file__).read_text(), f"{self.workdir}/echo.py")
        self._hz = int(self.exec("getconf CLK_TCK")[1].strip() or 100)

    # --- plumbing -----------------------------------------------------------------
    def exec(self, command: str, timeout: float = 60.0) -> tuple[int, str, str]:
        try:
            _, stdout, stderr = self.client.exec_command(command, timeout=timeout)
            out, err = stdout.read().decode(errors="replace"), stderr.read().decode(
                errors="replace")
            return stdout.channel.recv_exit_status(), out, err
        except (OSError, paramiko.SSHException) as exc:
            raise UserError(f"host {self.name}: SSH command failed: {exc}") from None

    def exec_checked(self, command: str) -> str:
        code, out, err = self.exec(command)
        if code != 0:
            raise UserError(f"host {self.name}: `{command}` failed: {err.strip()[-300:]}")
        return out

    def put_text(self, text: str, remote: str, mode: int = 0o644) -> None:
        with self.client.open_sftp() as sftp:
            with sftp.open(remote, "w") as f:
                f.write(text)
            sftp.chmod(remote, mode)

    def fetch(self, remote: str, local: Path) -> None:
        try:
            with self.client.open_sftp() as sftp:
                sftp.get(remote, str(local))
        except OSError:
            pass  # the process wrote nothing there

    # --- what the runner uses -----------------------------------------------------
    def bind_run(self, directory: Path) -> None:
        """Processes of the next run write into a fresh remote directory standing for the
        local `directory`."""
        self._local_run = directory
        self._remote_run = f"{self.workdir}/{directory.name}"
        self.exec_checked(f"rm -rf {shlex.quote(self._remote_run)} && "
                          f"mkdir -p {shlex.quote(self._remote_run)}")

    def translate(self, argv: Sequence[str]) -> list[str]:
        """The command as the host runs it: our paths mapped to the remote directory, the
        program resolved there."""
        out = [self.resolve(argv[0])]
        local = str(self._local_run) if self._local_run else None
        for arg in argv[1:]:
            if local and arg.startswith(local):
                arg = self._remote_run + arg[len(local):]
            out.append(arg)
        return out

    def resolve(self, program: str) -> str:
        """A program's path on the host: ours as copied, else found on its PATH, else the
        same absolute path as here."""
        if program in self._resolved:
            return self._resolved[program]
        base = PurePosixPath(program).name
        if self.copy_binaries and base in OURS:
            target = f"{self.workdir}/bin/{base}"
            with self.client.open_sftp() as sftp:
                sftp.put(str(find_binary(base)), target)
                sftp.chmod(target, 0o755)
            found: str | None = target
        else:
            found = self.which(base)
            if found is None and program.startswith("/") and \
                    self.exec(f"test -x {shlex.quote(program)}")[0] == 0:
                found = program
        if found is None:
            hint = " or set topology.copy_binaries = true" if base in OURS else ""
            raise UserError(f"host {self.name}: {base} not found; install it{hint}")
        self._resolved[program] = found
        return found

    def which(self, command: str) -> str | None:
        code, out, _ = self.exec(f"command -v {shlex.quote(command)}")
        return out.strip() if code == 0 and out.strip() else None

    def command(self, argv: Sequence[str], cpus: Sequence[int] = ()) -> list[str]:
        argv = self.translate(argv)
        return ["taskset", "-c", ",".join(map(str, cpus)), *argv] if cpus else argv

    def spawn(self, argv: Sequence[str], out: Path, cpus: Sequence[int] = ()) -> RemoteProcess:
        name = out.name
        base = f"{self._remote_run}/{name}"
        inner = (f"{shlex.join(self.command(argv, cpus))} >{shlex.quote(base)} 2>&1 & "
                 f"echo $! >{shlex.quote(base + '.pid')}; wait $!; "
                 f"echo $? >{shlex.quote(base + '.rc')}")
        self.exec_checked(f"cd {shlex.quote(self._remote_run)} && rm -f {base}.pid {base}.rc "
                          f"&& (setsid sh -c {shlex.quote(inner)} </dev/null >/dev/null 2>&1 &)")
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while time.monotonic() < deadline:
            code, text, _ = self.exec(f"cat {shlex.quote(base + '.pid')} 2>/dev/null")
            if code == 0 and text.strip().isdigit():
                proc = RemoteProcess(self, int(text.strip()), base + ".rc", base, out)
                self._spawned.append(proc)
                return proc
            time.sleep(0.05)
        raise UserError(f"host {self.name}: {argv[0]} did not start")

    def spawn_piped(self, argv: Sequence[str]) -> PipedRemote:
        return PipedRemote(self, shlex.join(self.translate(argv)))

    def run(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
        code, out, err = self.exec(shlex.join(self.translate(argv)), timeout=timeout)
        return subprocess.CompletedProcess(list(argv), code, out, err)

    def python(self) -> list[str]:
        return [self.resolve("python3"), f"{self.workdir}/echo.py"]

    def cpu_reader(self) -> Callable[[], tuple[float, float]]:
        """The host's cumulative CPU seconds from its /proc/stat (user + nice, system +
        irq + softirq)."""
        def read() -> tuple[float, float]:
            fields = self.exec_checked("head -1 /proc/stat").split()[1:]
            v = [int(x) for x in fields] + [0] * 10
            return (v[0] + v[1]) / self._hz, (v[2] + v[5] + v[6]) / self._hz
        return read

    def collect(self, directory: Path) -> None:
        """Copies every file the run's processes wrote into `directory` (not the
        bookkeeping: PID and exit-status files)."""
        with self.client.open_sftp() as sftp:
            for name in sftp.listdir(self._remote_run):
                if not name.endswith((".pid", ".rc")):
                    sftp.get(f"{self._remote_run}/{name}", str(directory / name))

    def versions(self) -> dict[str, str]:
        found = {}
        for program, flag in (("memcached", "-V"), ("redis-server", "--version"),
                              ("cachelab-proxy", "--version"), ("cachelab-load", "--version")):
            try:
                path = self.resolve(program)
            except UserError:
                continue
            found[program] = self.exec(f"{shlex.quote(path)} {flag}")[1].strip()[:200]
        found["kernel"] = self.exec("uname -r")[1].strip()
        return found

    # --- cleanup -----------------------------------------------------------------
    def remove_stale(self) -> None:
        """Kills what a dead harness of this controller left on the host, by the PIDs it
        recorded, and removes its directories."""
        prefix = f"/tmp/cachelab-ssh-{controller_tag()}-"
        listing = self.exec(f"ls -d {prefix}* 2>/dev/null")[1].split()
        for path in listing:
            owner = path[len(prefix):].split("-", 1)[0]
            if owner.isdigit() and not cgroups.pid_alive(int(owner)):
                self.exec(f"cat {shlex.quote(path)}/*/*.pid 2>/dev/null | "
                          f"xargs -r kill -9 2>/dev/null; rm -rf {shlex.quote(path)}")

    def close(self) -> None:
        """Stops what this harness started and is still running, removes the working
        directory, and closes the connection."""
        for proc in self._spawned:
            if proc.returncode is None:
                proc.kill()
        with contextlib.suppress(UserError):
            self.exec(f"rm -rf {shlex.quote(self.workdir)}")
        self.client.close()


T = TypeVar("T")
R = TypeVar("R")


def at_once(work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`work(item)` for every item at once, one thread each; the results in the items'
    order, or the first failure in that order once every call has ended."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="cachelab-ssh") as pool:
        return list(pool.map(work, items))


def _settle(pool: ThreadPoolExecutor) -> None:
    """Waits for every call the pool was given, through Ctrl-C (a call ends within the
    connect timeout), so that no host is connected behind the caller's back."""
    interrupted = None
    while True:
        try:
            pool.shutdown(wait=True)
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


class Cluster:
    """The SSH hosts of a run, connected, checked and bound to the run's directory."""

    def __init__(self, topology: Topology, layout: Layout, directory: Path) -> None:
        self.hosts: dict[str, SshHost] = {}
        self._spec = {h.name: h for h in topology.host}
        self._topology = topology
        self.layout = layout
        self.directory = directory

    def __enter__(self) -> Cluster:
        """Sets up every host at once; if one fails, the others are closed again and the
        first failure (in the layout's order) is raised."""
        names = [planned.name for planned in self.layout.hosts]
        pool = ThreadPoolExecutor(max_workers=max(len(names), 1),
                                  thread_name_prefix="cachelab-ssh")
        futures: dict[str, Future[SshHost]] = {}
        try:
            for name in names:
                futures[name] = pool.submit(self._set_up, name)
            for name in names:
                self.hosts[name] = futures[name].result()
        except BaseException:
            try:
                _settle(pool)
            finally:
                for name, future in futures.items():
                    if name not in self.hosts and future.exception() is None:
                        self.hosts[name] = future.result()
                self.__exit__()
            raise
        finally:
            pool.shutdown(wait=False)
        return self

    def _set_up(self, name: str) -> SshHost:
        t, h = self._topology, self._spec[name]
        assert h.address is not None  # the spec refuses an ssh host without one
        host = SshHost(h.name, h.address, user=h.user or t.user, key=h.key or t.key,
                       port=h.ssh_port, strict_host_keys=t.strict_host_keys,
                       copy_binaries=t.copy_binaries)
        try:
            host.bind_run(self.directory)
        except BaseException:
            host.close()
            raise
        return host

    def __exit__(self, *exc: object) -> None:
        at_once(SshHost.close, self.hosts.values())

    def collect(self) -> None:
        at_once(lambda host: host.collect(self.directory), self.hosts.values())

    def versions(self) -> dict[str, dict[str, str]]:
        return dict(zip(self.hosts, at_once(SshHost.versions, self.hosts.values()),
                        strict=True))
