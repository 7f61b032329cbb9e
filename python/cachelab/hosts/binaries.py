"""Locating the Rust binaries built by `make build`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cachelab.errors import UserError

#: The repository root when running from a checkout
#: (python/cachelab/hosts/binaries.py -> ../../..).
REPO_ROOT = Path(__file__).resolve().parents[3]


def find_binary(name: str) -> Path:
    """Returns the path of a cachelab binary.

    Looks in `$CACHELAB_BIN_DIR`, then the checkout's `target/release`, then `PATH`, so
    a development build wins over an installed one.
    """
    candidates = []
    if env_dir := os.environ.get("CACHELAB_BIN_DIR"):
        candidates.append(Path(env_dir) / name)
    candidates.append(REPO_ROOT / "target" / "release" / name)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    if found := shutil.which(name):
        return Path(found)
    raise UserError(f"{name} not found: run `make build` (or set CACHELAB_BIN_DIR)")
