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
from pathlib import Path

import proxy_bench
from _common import BenchError, free_port, wait_listening
from proxy_bench import Servers, load, populate, start_cachelab, start_floor, stop

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


def workload_args(protocol: str, work: Workload) -> list[str]:
    """The load generator's flags for one trained workload, but its rate."""
    value, ratio, keys, _rate = work
    multiget = ["--multiget-keys", str(keys)] if keys > 1 else []
    return ["-P", protocol, "-d", str(value), "--ratio", ratio, *multiget]


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
    stop(proc)
    if proc.returncode != 0:
        raise BenchError(f"an instrumented proxy exited with {proc.returncode}, "
                         "not normally: its profile is lost")


def train(seconds: float, profiles: Path, workdir: Path) -> None:
    """Runs the instrumented binaries (proxy_bench's helpers, pointed at them) through
    every trained mode; each writes its profile into `profiles` as it exits."""
    os.environ["LLVM_PROFILE_FILE"] = str(profiles / "%p-%m.profraw")
    proxy_bench.BUILT = GEN_DIR / "release"
    out = workdir / "load.json"
    servers = Servers(2)
    extra: list[subprocess.Popen] = []
    try:
        cert, key = self_signed(workdir)
        tls_mc, redis = free_port(), free_port()
        user = ["-u", "root"] if os.geteuid() == 0 else []
        extra.append(subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(tls_mc),
                                       "-U", "0", "-t", "1", "-m", "64", *user, "-Z", "-o",
                                       f"ssl_chain_cert={cert},ssl_key={key}"],
                                      stderr=subprocess.DEVNULL))
        extra.append(subprocess.Popen(["redis-server", "--port", str(redis), "--bind",
                                       "127.0.0.1", "--save", "", "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL))
        for port in (tls_mc, redis):
            wait_listening(port)
        populate(servers.ports, 64, workdir)  # the GETs find values: the measured path
        for name, args, protocol, works in MODES:
            backends = ([redis] if protocol == "redis" else
                        servers.ports if "-s" in args else servers.ports[:1])
            target = start_cachelab(backends, "production", mode_args=args)
            try:
                print(f"training: {name} ({len(works)} workloads)", flush=True)
                for work in works:
                    load(target.port, workload_args(protocol, work), work[3], seconds, out)
            finally:
                stopped(target.proc)
        target = start_cachelab([tls_mc], "production", extra_args=[
            "--tls-cert", str(cert), "--tls-key", str(key), "--server-tls",
            "--server-tls-skip-verify"])
        try:
            print("training: TLS on both hops (1 workload)", flush=True)
            tls = [*workload_args("memcache_text", (64, "1:1", 1, None)), "--tls",
                   "--tls-skip-verify"]
            load(target.port, tls, None, seconds, out)
        finally:
            stopped(target.proc)
        floor_time = len(CLOSED_AND_OPEN) * (seconds + 2) + 5
        floor = start_floor(servers.ports[0], ["--exit-after", str(floor_time)])
        print(f"training: floor ({len(CLOSED_AND_OPEN)} workloads)", flush=True)
        for work in CLOSED_AND_OPEN:
            load(floor.port, workload_args("memcache_text", work), work[3], seconds, out)
        if floor.proc.wait(floor_time + 30) != 0:
            raise BenchError(f"the instrumented floor exited with {floor.proc.returncode}")
    finally:
        del os.environ["LLVM_PROFILE_FILE"]
        proxy_bench.BUILT = proxy_bench.BIN
        for proc in extra:
            stop(proc)
        servers.close()


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
