//! batch/v1 Jobs.

pub mod indexes;
