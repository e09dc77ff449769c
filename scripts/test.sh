#!/usr/bin/env bash
# Every check and test of the repository: formatting, lints, unit/property/integration/end-to-end tests
# (the e2e tests run the real binaries as separate processes; kubesim's replay of the recordings of a real
# API server in crates/kubesim/testdata is one of its integration tests). Needs kubectl and python3 with
# `helm-python-sdk` for the chart tests (.ci/run installs them); nothing outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo build --workspace --bins --locked
cargo test --workspace --locked
# The web view in a real browser against `courier sandbox` (Chromium, chromedriver and Selenium; .ci/run
# installs them; the test fails, never skips, without them).
python3 e2e/browser/test_ui.py
