//! kubesim: an in-memory Kubernetes API server that behaves like the real one, for Courier's tests,
//! benchmarks and sandbox.

pub mod api;
pub mod controllers;
pub mod errors;
pub mod gojson;
pub mod jobctl;
pub mod kinds;
pub mod schema;
pub mod selectors;
pub mod store;
pub mod structured;
pub mod testdata;
pub mod time;
pub mod validation;
