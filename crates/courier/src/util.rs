//! Small helpers shared by the commands: durations, ages, tables, API error classification, clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use jiff::Timestamp;
use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Parses a duration the way Kubernetes tools write them: `90s`, `15m`, `1h30m`, `500ms`, `1.5s`, or
/// a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration; write it like 30s, 15m or 1h30m".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return seconds(secs, s);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "invalid duration {s:?}: expected a number before {rest:?} (write it like 30s, 15m or 1h30m)"
            ));
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| {
            format!(
                "invalid duration {s:?}: {:?} is not a number",
                &rest[..num_len]
            )
        })?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "invalid duration {s:?}: a unit (ms, s, m, h) must follow every number"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {other:?} (use ms, s, m or h)"
                ));
            }
        };
        total += value * factor;
    }
    seconds(total, s)
}

fn seconds(secs: f64, original: &str) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "invalid duration {original:?}: must be zero or positive"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {original:?}: {e}"))
}

/// A short human form of a duration, as kubectl prints ages: `12s`, `5m`, `3h`, `2d`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 {
        format!("{s}s")
    } else if s < 2 * 3600 {
        format!("{}m", s / 60)
    } else if s < 48 * 3600 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

/// Age of an object created at `t` (`<unknown>` when absent).
pub fn age(t: Option<Timestamp>) -> String {
    match t {
        Some(t) => {
            let secs = Timestamp::now().duration_since(t).as_secs().max(0);
            short_duration(Duration::from_secs(secs.unsigned_abs()))
        }
        None => "<unknown>".into(),
    }
}

// Tables live with the rest of the output code (`bench` uses them from here).
#[cfg(feature = "sandbox")]
pub use crate::output::render_table;

/// Field manager of the CLI's writes.
pub const FIELD_MANAGER: &str = "courier-cli";

/// The HTTP status of an API error, if the error is one.
pub fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    api_code(e) == Some(404)
}

pub fn is_conflict(e: &kube::Error) -> bool {
    api_code(e) == Some(409)
}

/// The message of an API error without the `ApiError: ... (ErrorResponse ...)` wrapping.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

/// The management cluster's client configuration. `in_cluster_first` is the controller's order
/// (`courier run`: in-cluster, then `$KUBECONFIG`); client commands prefer the kubeconfig.
pub async fn management_config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    in_cluster_first: bool,
) -> anyhow::Result<Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    if let Some(path) = kubeconfig {
        let kc = read_kubeconfig(path)?;
        return Config::from_custom_kubeconfig(kc, &options)
            .await
            .with_context(|| {
                format!(
                    "using the management kubeconfig {}{}",
                    path.display(),
                    context
                        .map(|c| format!(" (context {c})"))
                        .unwrap_or_default()
                )
            });
    }
    if in_cluster_first
        && context.is_none()
        && let Ok(config) = Config::incluster()
    {
        return Ok(config);
    }
    match Config::from_kubeconfig(&options).await {
        Ok(config) => Ok(config),
        Err(kubeconfig_error) => {
            if !in_cluster_first
                && context.is_none()
                && let Ok(config) = Config::incluster()
            {
                return Ok(config);
            }
            bail!(
                "no management cluster to talk to: {kubeconfig_error}. Pass --kubeconfig FILE (or set \
                 KUBECONFIG), or run inside a pod with a service account"
            )
        }
    }
}

/// Reads a kubeconfig file with an error that names the file.
pub fn read_kubeconfig(path: &Path) -> anyhow::Result<Kubeconfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read kubeconfig file {}", path.display()))?;
    Kubeconfig::from_yaml(&text)
        .with_context(|| format!("{} is not a valid kubeconfig", path.display()))
}

/// `~`-free absolute form of a path for messages.
pub fn display_path(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| PathBuf::from(p))
        .display()
        .to_string()
}

/// Whether `name` is a DNS-1123 subdomain (object names of WorkerClusters and Secrets).
pub fn dns_subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let first = name.as_bytes()[0];
    let last = name.as_bytes()[name.len() - 1];
    if !ok_chars || !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Some(
            "must consist of lower case alphanumeric characters, '-' or '.', and must start and end \
             with an alphanumeric character (e.g. 'eu-1')"
                .into(),
        );
    }
    None
}

/// Whether `name` is a DNS-1123 label (namespace names): a subdomain of at most 63 characters
/// without dots.
pub fn dns_label_problem(name: &str) -> Option<String> {
    if name.contains('.') || name.len() > 63 {
        return Some(
            "must be at most 63 lower case alphanumeric characters or '-', starting and ending \
             with an alphanumeric character (e.g. 'team-a')"
                .into(),
        );
    }
    dns_subdomain_problem(name)
}

/// Parses `key=value` for `--label`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!(
            "{s:?} is not key=value; write labels like --label region=eu"
        ));
    };
    if let Some(p) = courier_core::selector::label_key_problem(k) {
        return Err(format!("label key {k:?}: {p}"));
    }
    if let Some(p) = courier_core::selector::label_value_problem(v) {
        return Err(format!("label value {v:?} of {k:?}: {p}"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5x").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("10 ").is_ok());
        assert!(parse_duration("1m5").unwrap_err().contains("unit"));
    }

    #[test]
    fn ages() {
        assert_eq!(short_duration(Duration::from_secs(5)), "5s");
        assert_eq!(short_duration(Duration::from_secs(600)), "10m");
        assert_eq!(short_duration(Duration::from_secs(3 * 3600)), "3h");
        assert_eq!(short_duration(Duration::from_secs(3 * 86400)), "3d");
    }

    #[test]
    fn names_and_labels() {
        assert!(dns_subdomain_problem("eu-1").is_none());
        assert!(dns_subdomain_problem("EU").is_some());
        assert!(dns_subdomain_problem("-a").is_some());
        assert!(dns_subdomain_problem("").is_some());
        assert_eq!(parse_label("region=eu"), Ok(("region".into(), "eu".into())));
        assert!(parse_label("region").unwrap_err().contains("key=value"));
        assert!(parse_label("bad key=x").unwrap_err().contains("label key"));
        assert!(parse_label("k=-x").unwrap_err().contains("label value"));
    }
}
