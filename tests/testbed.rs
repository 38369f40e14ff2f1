//! The testbed binary (`rdmalb-testbed`): testsrv, traces, the replay client, the emulated cluster and the attack client.

mod abuse;
mod cluster;
mod reconfig;
mod server;
