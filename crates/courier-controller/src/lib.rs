//! courier-controller
