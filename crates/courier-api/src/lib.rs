//! courier-api
