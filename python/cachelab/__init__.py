"""cachelab: a laboratory for in-memory object caches.

The public surface is the `cachelab` command (see `cachelab.cli`); the modules below it
are importable for notebooks and tests:

- `cachelab.binaries`: locating the Rust binaries (`cachelab-proxy`, `cachelab-load`).
- `cachelab.procs`, `cachelab.local`: process handles; starting memcached, Redis, the proxy
  and the load generator on this host.
- `cachelab.memcache_client`: a small blocking memcached text-protocol client.
- `cachelab.proxy_stats`: reading the proxy's JSON-lines stats file.
- `cachelab.analysis`: QoS, operational laws, factorial designs, queueing models.
"""

__version__ = "0.1.0"
