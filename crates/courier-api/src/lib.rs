//! courier-api: the names, the `WorkerCluster` custom resource and the condition/event reasons that
//! every Courier component, chart and test agrees on. No I/O.
//!
//! The names are fixed by `DESIGN.md` ("Names"); changing one is a breaking change for charts,
//! existing origin Jobs and mirrors on worker clusters.

pub mod names;
pub mod reasons;
pub mod worker_cluster;

pub use names::*;
pub use worker_cluster::{
    KubeconfigSecretRef, WorkerCluster, WorkerClusterSpec, WorkerClusterStatus, crd,
};
