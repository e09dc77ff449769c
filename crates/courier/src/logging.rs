//! Logging set-up for every `courier` command: a tracing filter (`--log`) and a format
//! (`--log-format text|json`), both on standard error.
//!
//! - `text`: tracing's human-readable lines; ANSI colours only when standard error is a terminal
//!   (and `NO_COLOR` is unset), so a log file or a pipe never holds escape sequences.
//! - `json`: one object per line for log pipelines:
//!   `{"timestamp", "level", "target", "message", "fields": {..}, "spans": [{"name", ..fields}]}` —
//!   `fields` holds the event's other fields (omitted when there are none), `spans` the spans the
//!   event happened in, outermost first, each with its fields (e.g. `reconcile` with
//!   `origin: "namespace/name"`; omitted outside any span).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colours only on a terminal).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. `filter` is tracing's EnvFilter syntax; when it does not parse,
/// `default` is used and a warning says so.
pub fn init(filter: Option<&str>, default: &str, format: LogFormat) {
    let env_filter = match EnvFilter::try_new(filter.unwrap_or(default)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "warning: invalid log filter {:?} ({e}); using {default:?}",
                filter.unwrap_or_default()
            );
            EnvFilter::new(default)
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_ansi(colour(&std::io::stderr())).try_init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(JsonLines)
            .try_init(),
    };
}

/// Colours only for a person at a terminal who did not ask for none (https://no-color.org).
fn colour(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Collects fields as JSON values: numbers and booleans stay typed, everything else is its
/// `Display` (for `%field`) or `Debug` text.
#[derive(Default)]
struct FieldMap(Map<String, Value>);

impl Visit for FieldMap {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            Value::String(format!("{value:?}")),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_string(), value.to_string().into());
    }
}

/// Stores each span's fields as a JSON object (the text tracing keeps with the span), so
/// [`JsonLines`] can put them back into the event's line.
struct JsonFields;

fn stored(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut map = FieldMap::default();
        fields.record(&mut map);
        write!(writer, "{}", Value::Object(map.0))
    }

    fn add_fields(
        &self,
        current: &mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut map = FieldMap(stored(&current.fields));
        fields.record(&mut map);
        current.fields = Value::Object(map.0).to_string();
        Ok(())
    }
}

/// One JSON object per event.
struct JsonLines;

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = FieldMap::default();
        event.record(&mut fields);
        let message = match fields.0.remove("message") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let spans: Vec<Value> = ctx
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
            .map(|span| {
                let mut m = Map::new();
                m.insert("name".into(), span.name().into());
                if let Some(f) = span.extensions().get::<FormattedFields<JsonFields>>() {
                    m.extend(stored(&f.fields));
                }
                Value::Object(m)
            })
            .collect();
        // Written key by key: serde_json's map would sort the keys, and a reader wants the
        // timestamp and level first.
        let mut line: Vec<(&str, Value)> = vec![
            ("timestamp", jiff::Timestamp::now().to_string().into()),
            ("level", meta.level().as_str().to_ascii_lowercase().into()),
            ("target", meta.target().into()),
            ("message", message.into()),
        ];
        if !fields.0.is_empty() {
            line.push(("fields", Value::Object(fields.0)));
        }
        if !spans.is_empty() {
            line.push(("spans", Value::Array(spans)));
        }
        writer.write_char('{')?;
        for (i, (key, value)) in line.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(writer, "{sep}\"{key}\":{value}")?;
        }
        writer.write_str("}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    /// The line shape, typed fields, span fields (also ones recorded after the span was created)
    /// and no `fields`/`spans` keys when there is nothing to put in them.
    #[test]
    fn json_lines_carry_message_fields_and_span_fields() {
        let buf = Buf::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("worker", cluster = "w1");
            let _o = outer.enter();
            let span = tracing::info_span!("reconcile", origin = %"team-a/job", attempt = tracing::field::Empty);
            span.record("attempt", 2u64);
            let _s = span.enter();
            tracing::warn!(epoch = 3, ok = false, reason = ?"quota", "mirror \"refused\"");
            drop(_s);
            drop(_o);
            tracing::info!("plain");
        });
        let text = String::from_utf8(buf.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first = &lines[0];
        assert_eq!(first["level"], "warn");
        assert_eq!(first["message"], "mirror \"refused\"");
        assert_eq!(first["target"], module_path!());
        assert_eq!(
            first["fields"],
            serde_json::json!({"epoch": 3, "ok": false, "reason": "\"quota\""})
        );
        assert_eq!(
            first["spans"],
            serde_json::json!([
                {"name": "worker", "cluster": "w1"},
                {"name": "reconcile", "origin": "team-a/job", "attempt": 2}
            ])
        );
        let ts = first["timestamp"].as_str().unwrap_or_default();
        assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{ts}");
        // Keys in a fixed order, timestamp first; no empty `fields` or `spans`.
        let second = text.lines().nth(1).unwrap_or_default();
        let keys: Vec<&str> = ["timestamp", "level", "target", "message"]
            .into_iter()
            .filter(|k| second.contains(&format!("\"{k}\":")))
            .collect();
        assert_eq!(keys.len(), 4, "{second}");
        assert!(second.starts_with("{\"timestamp\":"), "{second}");
        assert_eq!(lines[1].as_object().map(|o| o.len()), Some(4), "{second}");
    }
}
