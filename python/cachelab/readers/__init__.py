"""What the tools write, read into plain data; no processes are started here.

- `loadgen`: the load generator's command lines and its JSON report (`cachelab-load/1`);
- `proxy_stats`: the middleware's stats file (JSON lines, checked against its schema);
- `hdr`: HDR histograms (decoded and merged by `hdrhistogram`), their percentiles;
- `cpu`: the CPU utilisation of a host or a cgroup by state, every second;
- `selfcheck`: a run's trust figures from its load generators' reports.
"""
