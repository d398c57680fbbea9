//! referee submission crate.

pub mod manifest;
pub mod sign;
