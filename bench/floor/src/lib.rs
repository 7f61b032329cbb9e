//! The floor of CPU per request on this machine, for `make bench`: `cachelab-floor`, a
//! bare epoll proxy, and `cachelab-floor-load`, a bare closed-loop client. Each does
//! nothing but move requests and replies, so what it costs is what the kernel's
//! loopback TCP path and the wake-ups cost any program of its kind here. Not products.

pub mod frames;
