//! referee submission crate.

pub mod assemble;
pub mod compare;
pub mod manifest;
pub mod perf;
pub mod sign;
