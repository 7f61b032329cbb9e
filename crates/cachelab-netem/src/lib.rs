//! cachelab-netem: a userspace delay line for kernels without `sch_netem`.
//!
//! `cachelab-delay` sits in a namespace between pairs of veths and really holds every
//! frame for a fixed one-way delay before sending it on, so TCP sees the delay as it would
//! between VMs (unlike a relay that terminates connections). One process, one thread,
//! serves every link of an emulated data centre.
//!
//! - [`queue`]: the FIFO of frames with their due times, limit and drop counting (no I/O).
//! - [`pool`]: reusable frame buffers, so forwarding allocates nothing (no I/O).
//! - [`stats`]: per-direction counters, send lateness, the JSON report (no I/O).
//! - [`link_arg`]: the `--link NAME:A:B:US[:US]` argument (no I/O).
//! - [`socket`]: `AF_PACKET` sockets that carry the virtio-net header with each frame.
//! - [`wake`]: the epoll set and the signalfd the loop sleeps on.
//! - [`forward`]: the loop over every link: epoll until a frame arrives or one is due.
//! - [`stop`]: an eventfd that stops the loop from another thread (tests).

pub mod forward;
pub mod link_arg;
pub mod pool;
pub mod queue;
pub mod socket;
pub mod stats;
pub mod stop;
pub mod wake;
