//! kubesim: an in-memory Kubernetes API server that behaves like the real one, for Courier's tests,
//! benchmarks and sandbox.

pub mod errors;
pub mod kinds;
pub mod testdata;
pub mod validation;
