//! courier-core
