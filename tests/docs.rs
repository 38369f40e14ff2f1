//! The operator's documentation against the code: the README's minimal
//! config and the operations recipes, run as written, the configuration
//! reference's check (scripts/docs-check.sh) and the command-line help.

mod readme;
mod recipes;
mod reference;
