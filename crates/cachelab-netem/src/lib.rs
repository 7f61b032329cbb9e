//! cachelab-netem: a userspace delay line for kernels without `sch_netem`.
//!
//! `cachelab-delay` sits in a namespace between two veths and really holds every frame
//! for a fixed one-way delay before sending it on, so TCP sees the delay as it would
//! between VMs (unlike a relay that terminates connections).
//!
//! - [`queue`]: the FIFO of frames with their due times, limit and drop counting (no I/O).
//! - [`pool`]: reusable frame buffers, so forwarding allocates nothing (no I/O).
//! - [`stats`]: per-direction counters, send lateness, the JSON report (no I/O).
//! - [`socket`]: `AF_PACKET` sockets that carry the virtio-net header with each frame.
//! - [`forward`]: one direction's loop: `ppoll` until the head is due, drain, send.
//! - [`stop`]: the flag and eventfd that stop both directions.

pub mod forward;
pub mod pool;
pub mod queue;
pub mod socket;
pub mod stats;
pub mod stop;
