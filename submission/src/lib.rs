//! referee submission crate.

pub mod assemble;
pub mod compare;
pub mod figures;
pub mod fs;
pub mod manifest;
pub mod perf;
pub mod sign;
