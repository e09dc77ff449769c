//! The read-only web view of the fleet (`courier run --ui-addr`): clusters, Jobs (filterable by
//! namespace, cluster and phase, sorted by age) and one Job (placement and why, origin and mirror
//! conditions, the events Courier recorded). Everything comes from the controller's caches: a page
//! view makes no request to any API server, except the access reviews of `auth.rs` when the view
//! is bound to a non-loopback address (cached briefly per token).
//!
//! - `model`: view models, pure functions of snapshots (unit-tested in `model_tests.rs`).
//! - `html`: the pages' HTML from the view models; `assets/`: the CSS and the small script that
//!   keeps pages live, embedded in the binary (no CDN, no build step).
//! - `auth`: TokenReview / SubjectAccessReview with bounded caches.
//! - `server`: the hyper server, routes, JSON endpoints.

mod auth;
mod html;
mod model;
mod server;

pub use server::serve;
