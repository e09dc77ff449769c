//! Fixture-driven tests (filled in below).
