"""A profile-guided build of cachelab-proxy and of the floor (bench/floor).

    python bench/pgo.py [--train-time S]

Three steps:
1. build both with `-Cprofile-generate` into target/pgo-gen;
2. train them on loopback: memcached and redis-server started here on free ports, each
   proxy mode `make bench` measures (production, default, unshared, busy-poll, sharded
   multi-GETs, a Redis pool) and the floor, under cachelab-load in closed and open loop, GETs and
   SET:GET 1:1, values of 64 B and 4 KiB, TRAIN_TIME seconds each;
3. merge the profiles with LLVM's llvm-profdata (rustup's `llvm-tools` component, the
   same LLVM as rustc: `rustup component add llvm-tools`) and build both again with
   `-Cprofile-use` into target/pgo.
Both builds link with fat LTO and one codegen unit, so the profile guides inlining across
crates too (about 5 minutes in all).

The binaries are target/pgo/release/cachelab-proxy and cachelab-floor. The compiler lays
the trained paths out together and moves what they never run out of their way, so a
request's path is fetched from fewer cache lines: docs/performance.md has what it saves.
TLS is trained too (production mode, TLS on both hops, a throw-away certificate made with
openssl): code the training never runs is compiled as cold code, and measured slow.
`python bench/proxy_bench.py --pgo` measures these binaries (the load generator stays
target/release's). The binaries are removed before each build, so a failed one leaves
none; target/pgo-gen is kept, so the next build is incremental.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import BenchError, free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "target" / "release"
GEN_DIR = ROOT / "target" / "pgo-gen"
USE_DIR = ROOT / "target" / "pgo"
PGO_BIN = USE_DIR / "release"
PACKAGES = ("cachelab-proxy", "cachelab-floor")
TRAIN_TIME = 2.0
PRODUCTION = ["-t", "4", "--pipeline", "16", "--share-connections", "--merge-gets"]
# Each proxy configuration trained: its arguments, the protocol, and the workloads run
# through it (value size, SET:GET ratio, keys per GET, open-loop rate or None).
Workload = tuple[int, str, int, int | None]
CLOSED_AND_OPEN: list[Workload] = [(64, "0:1", 1, None), (64, "1:1", 1, None),
                                   (4096, "1:1", 1, None), (64, "0:1", 1, 20_000),
                                   (4096, "0:1", 1, 20_000)]
MODES: list[tuple[str, list[str], str, list[Workload]]] = [
    ("production", PRODUCTION, "memcache_text", CLOSED_AND_OPEN),
    ("default", ["-t", "64"], "memcache_text", CLOSED_AND_OPEN),
    ("unshared", ["-t", "4", "--pipeline", "16"], "memcache_text", [(64, "1:1", 1, None)]),
    ("busy-poll", [*PRODUCTION, "--busy-poll-us", "100"], "memcache_text",
     [(64, "0:1", 1, 20_000)]),
    ("sharded", ["-t", "4", "--pipeline", "16", "--share-connections", "-s"], "memcache_text",
     [(64, "1:4", 10, None)]),
    ("redis", ["--protocol", "redis", *PRODUCTION[:-1]], "redis",
     [(64, "1:1", 1, None), (64, "1:4", 10, None)]),
]


def llvm_profdata() -> Path:
    """rustc's own llvm-profdata: profiles are read by the LLVM that wrote them."""
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True,
                             check=True).stdout.strip()
    host = next(line.split(": ", 1)[1] for line in subprocess.run(
        ["rustc", "-vV"], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.startswith("host: "))
    tool = Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-profdata"
    if not tool.is_file():
        raise BenchError(f"no {tool}: install it with `rustup component add llvm-tools`")
    return tool


def cargo_build(target_dir: Path, rustflags: str) -> None:
    env = {**os.environ, "RUSTFLAGS": f"{os.environ.get('RUSTFLAGS', '')} {rustflags}".strip(),
           "CARGO_TARGET_DIR": str(target_dir)}
    # Link-time optimization over every crate, the same in both builds (so the profile's
    # functions are the built ones): the profile then guides inlining across crates too.
    env |= {"CARGO_PROFILE_RELEASE_LTO": "fat", "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "1"}
    argv = ["cargo", "build", "--release", *[a for p in PACKAGES for a in ("-p", p)]]
    if subprocess.run(argv, cwd=ROOT, env=env).returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` with RUSTFLAGS={env['RUSTFLAGS']} failed")


def started(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """A proxy or the floor with `-p 0`, and the port it printed."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.wait()
        raise BenchError(f"{' '.join(argv)} exited at start (exit code {proc.returncode})")
    port = int(line.rsplit(":", 1)[1])
    wait_listening(port)
    return proc, port


def drive(port: int, protocol: str, work: Workload, seconds: float, out: Path,
          extra: Sequence[str] = ()) -> None:
    value, ratio, keys, rate = work
    argv = [str(RELEASE / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port), "-P", protocol,
            "-d", str(value), "--ratio", ratio, "-t", "1", "-c", "20", "--key-minimum", "1",
            "--key-maximum", "10000", "--key-pattern", "R:R", "--test-time", str(seconds),
            "--json-out-file", str(out), *extra]
    if keys > 1:
        argv += ["--multiget-keys", str(keys)]
    if rate is not None:
        argv += ["--rate", str(rate)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if result.returncode != 0:
        raise BenchError(f"training load failed: {result.stderr.strip()[-300:]}")


def self_signed(workdir: Path) -> tuple[Path, Path]:
    """A throw-away certificate for 127.0.0.1 and its key, for the TLS training."""
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=cachelab-pgo",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def stopped(proc: subprocess.Popen) -> None:
    """SIGTERM, then the proxy's drain: a normal exit, which writes its profile."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired as e:
        proc.kill()
        proc.wait()
        raise BenchError("an instrumented proxy did not exit on SIGTERM: "
                         "its profile is lost") from e


def train(seconds: float, profiles: Path, workdir: Path) -> None:
    env = {**os.environ, "LLVM_PROFILE_FILE": str(profiles / "%p-%m.profraw")}
    user = ["-u", "root"] if os.geteuid() == 0 else []
    servers: list[subprocess.Popen] = []
    try:
        mc = [free_port(), free_port()]
        for port in mc:
            servers.append(subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(port),
                                             "-U", "0", "-t", "1", "-m", "64", *user],
                                            stderr=subprocess.DEVNULL))
        cert, key = self_signed(workdir)
        tls_mc = free_port()
        servers.append(subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(tls_mc),
                                         "-U", "0", "-t", "1", "-m", "64", *user, "-Z", "-o",
                                         f"ssl_chain_cert={cert},ssl_key={key}"],
                                        stderr=subprocess.DEVNULL))
        redis = free_port()
        servers.append(subprocess.Popen(["redis-server", "--port", str(redis), "--bind",
                                         "127.0.0.1", "--save", "", "--appendonly", "no"],
                                        stdout=subprocess.DEVNULL))
        for port in [*mc, tls_mc, redis]:
            wait_listening(port)
        for port in mc:  # the GETs find values: the hit path is the one measured
            subprocess.run([str(RELEASE / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port),
                            "-P", "memcache_text", "-t", "1", "-c", "4", "-d", "64",
                            "--key-minimum", "1", "--key-maximum", "10000", "--populate",
                            "--json-out-file", str(workdir / "populate.json")],
                           check=True, capture_output=True, timeout=120)
        for name, args, protocol, works in MODES:
            backends = [redis] if protocol == "redis" else mc if "-s" in args else mc[:1]
            proc, port = started([str(GEN_DIR / "release" / "cachelab-proxy"), "-p", "0", *args,
                                  "-m", *[f"127.0.0.1:{p}" for p in backends]], env)
            try:
                print(f"training: {name} ({len(works)} workloads)", flush=True)
                for work in works:
                    drive(port, protocol, work, seconds, workdir / "load.json")
            finally:
                stopped(proc)
        proc, port = started([str(GEN_DIR / "release" / "cachelab-proxy"), "-p", "0",
                              *PRODUCTION, "--tls-cert", str(cert), "--tls-key", str(key),
                              "--server-tls", "--server-tls-skip-verify",
                              "-m", f"127.0.0.1:{tls_mc}"], env)
        try:
            print("training: TLS on both hops (1 workload)", flush=True)
            drive(port, "memcache_text", (64, "1:1", 1, None), seconds, workdir / "load.json",
                  ["--tls", "--tls-skip-verify"])
        finally:
            stopped(proc)
        floor_works = CLOSED_AND_OPEN
        floor_time = len(floor_works) * (seconds + 1) + 5
        proc, port = started([str(GEN_DIR / "release" / "cachelab-floor"), "-p", "0", "-s",
                              f"127.0.0.1:{mc[0]}", "--exit-after", str(floor_time)], env)
        print(f"training: floor ({len(floor_works)} workloads)", flush=True)
        for work in floor_works:
            drive(port, "memcache_text", work, seconds, workdir / "load.json")
        if proc.wait(floor_time + 30) != 0:
            raise BenchError(f"the instrumented floor exited with {proc.returncode}")
    finally:
        for server in servers:
            server.terminate()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-time", type=float, default=TRAIN_TIME, metavar="S",
                        help=f"seconds of load per trained workload (default {TRAIN_TIME})")
    args = parser.parse_args()
    tool = llvm_profdata()
    for package in PACKAGES:
        (PGO_BIN / package).unlink(missing_ok=True)
    if not (RELEASE / "cachelab-load").is_file():
        raise BenchError("no target/release/cachelab-load: run `make build` first")
    with tempfile.TemporaryDirectory(prefix="cachelab-pgo-") as tmp:
        workdir = Path(tmp)
        profiles = workdir / "profiles"
        profiles.mkdir()
        cargo_build(GEN_DIR, f"-Cprofile-generate={profiles}")
        train(args.train_time, profiles, workdir)
        merged = USE_DIR / "merged.profdata"
        merged.parent.mkdir(parents=True, exist_ok=True)
        raw = sorted(str(p) for p in profiles.glob("*.profraw"))
        if not raw:
            raise BenchError("the training wrote no profile")
        subprocess.run([str(tool), "merge", "-o", str(merged), *raw], check=True)
    cargo_build(USE_DIR, f"-Cprofile-use={merged}")
    print(f"profile-guided binaries: {PGO_BIN / 'cachelab-proxy'}, {PGO_BIN / 'cachelab-floor'}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"pgo: {e}", file=sys.stderr)
        sys.exit(1)
