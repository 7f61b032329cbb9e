"""Where processes run and how the harness reaches them.

- `host`: a `Host` (this machine, or an emulated host entered by a command prefix);
- `local`: starting memcached, Redis, the middleware and the load generator on a host;
  `procs`: the process handles, free ports, waiting for a listener;
- `netns`: the emulated data centre (namespaces, shaped links, delay lines);
  `cgroups`: CPU limits and accounting for its hosts (cgroup v2 or v1);
- `ssh`: real hosts over SSH, with the methods of `Host`;
- `linkprobe`: measuring round trip and bandwidth between hosts, with `echo` at the ends;
- `tls`: an experiment's throw-away certificate authority and the options that use it;
- `binaries`: locating the Rust binaries; `hostinfo`: the metadata and versions stamped
  on every run; `memcache_client`: a small blocking memcached client (demo, checks, tests).
"""
