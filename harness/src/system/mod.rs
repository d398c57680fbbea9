//! What a system is: the facts the machine tells about itself, probed from
//! `/proc`, `/sys` and `nvidia-smi` ([`probe`]), and the system-description
//! JSON built from them and from what the user gives, checked against the
//! ruleset's required fields ([`describe`]). Probing knows nothing of
//! descriptions; neither knows of runs, sessions or commands.

pub mod describe;
pub mod probe;

pub use describe::{
    Description, Source, SystemIdentity, SystemReport, SystemRequest, describe, discovered_fields,
    system_description,
};
pub use probe::{Accelerator, HostFacts, IoFacts};
