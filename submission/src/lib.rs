//! referee submission crate.
