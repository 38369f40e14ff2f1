//! The reconfiguration agent: roles, site locks, claims and faults.

mod kill;
mod nginx;
mod race;
mod roles;
mod verbs;
