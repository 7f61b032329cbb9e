"""What the tools write, read into plain data; no processes are started here.

- `loadgen`: the load generator's command lines and its JSON report (`cachelab-load/1`);
- `proxy_stats`: the middleware's stats file (JSON lines, checked against its schema);
- `hdr`: HDR histograms (decoded and merged by `hdrhistogram`), their percentiles;
- `cpu`: the CPU utilisation of a host or a cgroup by state, every second;
- `selfcheck`: a run's trust figures from its load generators' reports;
- `capture`: a packet capture turned into a request trace, from `pcap` (the capture's TCP
  segments), `tcp` (each connection's bytes in order), `memcache_wire` and `resp_wire`
  (requests and replies as they arrive) and `wire` (what those give).
"""
