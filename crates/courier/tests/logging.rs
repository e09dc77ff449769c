//! `--log-format text|json` of the real binary, with its standard error going to a file as in a
//! pod or under a process supervisor: `courier demo` runs the controller on in-process kubesim
//! clusters, so the logs include reconcile spans.
//!
//! Checked by breaking it: `.with_ansi(true)` for text puts escape sequences in the file (the text
//! case fails); dropping the span list from the JSON lines fails the json case.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `courier demo` with `args` before the subcommand and `env`; returns (stdout, stderr).
fn demo(name: &str, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("logging-{name}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let file = |p: &PathBuf| File::create(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let status = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(args)
        .args([
            "--log",
            "info,courier_controller=debug",
            "demo",
            "--speed",
            "20",
        ])
        .env_remove("COURIER_LOG")
        .env_remove("COURIER_LOG_FORMAT")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file(&out_path))
        .stderr(file(&err_path))
        .status()
        .unwrap_or_else(|e| panic!("running courier demo: {e}"));
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{e}"));
    let (out, err) = (read(&out_path), read(&err_path));
    assert!(
        status.success(),
        "courier demo failed ({status}):\n{out}\n{err}"
    );
    (out, err)
}

fn assert_no_escapes(what: &str, text: &str) {
    if let Some(line) = text.lines().find(|l| l.contains('\u{1b}')) {
        panic!("{what} holds an escape sequence although it is not a terminal: {line:?}");
    }
}

#[test]
fn text_logs_to_a_file_have_no_colour_codes() {
    let (out, err) = demo("text", &["--log-format", "text"], &[]);
    assert_no_escapes("stderr", &err);
    assert_no_escapes("stdout", &out);
    assert!(
        err.lines().any(|l| l.contains(" INFO ")),
        "no INFO line:\n{err}"
    );
    assert!(
        err.lines().any(|l| l.contains("reconcile{origin=default/")),
        "reconcile spans name their origin:\n{err}"
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_span_fields() {
    // Through the environment variable, as a Deployment would set it.
    let (out, err) = demo("json", &[], &[("COURIER_LOG_FORMAT", "json")]);
    assert_no_escapes("stderr", &err);
    assert_no_escapes("stdout", &out);
    let lines: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON object ({e}): {l}")))
        .collect();
    assert!(lines.len() > 5, "too few log lines:\n{err}");
    for l in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(l[key].is_string(), "{key} missing in {l}");
        }
        let level = l["level"].as_str().unwrap_or_default();
        assert!(
            ["error", "warn", "info", "debug", "trace"].contains(&level),
            "{l}"
        );
    }
    let in_reconcile: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["spans"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == "reconcile"))
        })
        .collect();
    assert!(
        !in_reconcile.is_empty(),
        "no line inside a reconcile span:\n{err}"
    );
    for l in in_reconcile {
        let origin = l["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "reconcile"))
            .and_then(|s| s["origin"].as_str())
            .unwrap_or_default();
        let (ns, name) = origin.split_once('/').unwrap_or_default();
        assert!(
            !ns.is_empty() && !name.is_empty(),
            "origin is namespace/name: {l}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["cluster"].is_string() && l["message"] == "mirror created"),
        "event fields are kept: {err}"
    );
}
