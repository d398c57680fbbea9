//! referee submission crate.

pub mod manifest;
pub mod package;
pub mod sign;
