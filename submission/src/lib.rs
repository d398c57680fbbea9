//! referee submission crate.

pub mod compare;
pub mod manifest;
pub mod package;
pub mod sign;
