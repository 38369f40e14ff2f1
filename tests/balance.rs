//! Health, balancing and load-aware routing through real proxies and sidecars.

mod admin;
mod health;
mod load_aware;
