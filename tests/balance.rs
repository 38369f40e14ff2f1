//! Health, balancing, load-aware routing and agent-checks through real
//! proxies and sidecars.

mod admin;
mod agent_check;
mod health;
mod load_aware;
mod sticky;
