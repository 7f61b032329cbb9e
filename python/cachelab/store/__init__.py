"""The results database: its schema and migrations (`schema`), the check that a database
is one this cachelab understands (`check`), the records written and read (`records`), and
the `Store` that opens it and owns every read and write (`db`). Nothing outside this
package runs SQL; callers get typed records.
"""

from cachelab.store.db import FILENAME, Store
from cachelab.store.reads import RUN_TABLES, WELFORD_METRICS
from cachelab.store.records import (
    HOPS,
    CapacityRecord,
    CapacityTrial,
    ClientClock,
    ClientOpTotals,
    ClientPlacement,
    ClientTiming,
    EmulatorCpuSample,
    HostCpuSample,
    LateRun,
    LinkRecord,
    MiddlewareOp,
    MiddlewareQueue,
    MiddlewareRate,
    ProcessCpu,
    RunCheck,
    RunHost,
    RunRecord,
    RunStart,
    RunSummary,
    ServerService,
    StoredCapacity,
    StoredExperiment,
    StoredInterval,
    StoredPoint,
    StoredRun,
    Table,
    TlsSession,
    WindowKey,
)
from cachelab.store.schema import MIGRATIONS, Migration, migrate

__all__ = [
    "FILENAME", "HOPS", "MIGRATIONS", "RUN_TABLES", "WELFORD_METRICS", "CapacityRecord",
    "CapacityTrial", "ClientClock", "ClientOpTotals", "ClientPlacement",
    "ClientTiming", "EmulatorCpuSample", "HostCpuSample", "LateRun", "LinkRecord",
    "Migration", "MiddlewareOp", "MiddlewareQueue", "MiddlewareRate", "ProcessCpu",
    "RunCheck", "RunHost", "RunRecord", "RunStart",
    "RunSummary", "ServerService", "Store", "StoredCapacity", "StoredExperiment",
    "StoredInterval", "StoredPoint", "StoredRun", "Table", "TlsSession", "WindowKey",
    "migrate",
]
