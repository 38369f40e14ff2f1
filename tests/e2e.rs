//! rdmalb's end-to-end tests, built as one test binary: real processes
//! (the `rdmalb` and `rdmalb-testbed` binaries, Debian's nginx), real
//! sockets on loopback, certificates generated at test time. One folder per
//! area; shared helpers are in [`support`].

mod support;

mod balance;
mod docs;
mod import;
mod proxy;
mod qos;
mod reconfig;
mod sidecar;
mod testbed;
mod window;
