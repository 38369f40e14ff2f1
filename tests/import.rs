//! `rdmalb import` through the binary: the corpus of HAProxy configurations
//! with their expected TOML and notes ([`corpus`]), and the same requests
//! sent to the real HAProxy and to rdmalb running the imported config in
//! front of the same nginx servers ([`haproxy`]).

mod cookie_dates;
mod corpus;
mod differential;
mod haproxy;
