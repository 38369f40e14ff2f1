//! The testbed binary (`rdmalb-testbed`): testsrv, traces, the replay client and the emulated cluster.

mod cluster;
mod reconfig;
mod server;
