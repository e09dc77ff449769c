//! kubesim: an in-memory Kubernetes API server that behaves like the real one, for Courier's tests,
//! benchmarks and sandbox.

pub mod admin;
pub mod admission;
pub mod api;
pub mod auth;
pub mod controllers;
pub mod controllers_hook;
pub mod errors;
pub mod faults;
pub mod gojson;
pub mod http;
pub mod instrument;
pub mod jobctl;
pub mod json;
pub mod kinds;
pub mod kubeconfig;
pub mod podlog;
pub mod protobuf;
pub mod record;
pub mod schema;
pub mod selectors;
pub mod sim;
pub mod store;
pub mod structured;
pub mod testdata;
pub mod time;
pub mod tls;
pub mod validation;

pub use sim::{Role, Sim, SimOptions};
