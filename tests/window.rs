//! The node window and its transports across real processes and sockets.

mod conformance;
mod psk;
mod shm_process;
mod tcp;
