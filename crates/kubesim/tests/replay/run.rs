//! Sends a scenario's steps to a server and writes down the answers in the recordings' shape (before
//! normalisation): `{"scenario", "steps": [{"name", "request", "response", "during_watch"?}]}`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use kube::client::Body;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value, json};

use crate::plan::{Step, get_path, set_path, unset_path};

/// Like the recorder, so the default field manager is `apifixtures`.
const USER_AGENT: &str = "apifixtures/v1";
/// Pause between the attempts of an `until` read.
const POLL: Duration = Duration::from_millis(250);
/// Time a new watch gets to register before the steps during it are sent.
const WATCH_SETTLE: Duration = Duration::from_millis(200);
/// How long a watch is read beyond its `timeoutSeconds` before the server is said not to have closed it.
const WATCH_GRACE: Duration = Duration::from_secs(15);

/// One scenario run: the client, `${...}` variables, and the answers so far.
pub struct Run {
    client: kube::Client,
    vars: BTreeMap<String, Value>,
    out: Vec<Value>,
}

impl Run {
    /// `run` is the run id (part of `${ns}`, replaced by `<run>` in the recordings).
    pub fn new(client: kube::Client, scenario: &str, run: &str) -> Self {
        let ns: String = scenario.replace('_', "-").chars().take(40).collect();
        let vars = BTreeMap::from([
            ("run".to_owned(), json!(run)),
            ("ns".to_owned(), json!(format!("{ns}-{run}"))),
        ]);
        Self {
            client,
            vars,
            out: Vec::new(),
        }
    }

    /// Runs `steps` in order; returns the recorded steps' entries.
    pub async fn all(mut self, steps: &[Step]) -> Result<Vec<Value>, String> {
        for step in steps {
            if let Some(entries) = Box::pin(self.step(step)).await? {
                self.out.extend(entries);
            }
        }
        Ok(self.out)
    }

    /// One step; `Some(entries)` when it is recorded (a watch: its entry, then those of the steps
    /// sent during it).
    async fn step(&mut self, step: &Step) -> Result<Option<Vec<Value>>, String> {
        if step.sleep > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(step.sleep)).await;
        }
        let ctx = |e: String| format!("{}: {e}", step.name);
        let (request, body) = self.prepare(step).map_err(ctx)?;
        let mut entry = Map::new();
        entry.insert("name".into(), json!(step.name));
        entry.insert("request".into(), request);
        if let Some(during) = &step.during {
            let (response, during_entries) = self.watch(step, during).await.map_err(ctx)?;
            entry.insert("response".into(), response);
            let mut entries = vec![Value::Object(entry)];
            for mut d in during_entries {
                d["during_watch"] = json!(step.name);
                entries.push(d);
            }
            return Ok(step.recorded.then_some(entries));
        }
        let (response, parsed) = self.plain(step, body).await.map_err(ctx)?;
        for (var, path) in &step.save {
            let value = get_path(&parsed, path)
                .filter(|_| parsed.is_object() || parsed.is_array())
                .cloned()
                .unwrap_or(Value::Null);
            self.vars.insert(var.clone(), value);
        }
        entry.insert("response".into(), response);
        Ok(step.recorded.then(|| vec![Value::Object(entry)]))
    }

    /// The request as it goes into the document (the body built if the plan builds it), and the body
    /// to send (variables filled in).
    fn prepare(&self, step: &Step) -> Result<(Value, Option<Value>), String> {
        let mut request = step.request.clone();
        let body = match &step.built {
            Some(edit) => {
                let mut body = match &edit.from {
                    Some(var) => self
                        .vars
                        .get(var)
                        .cloned()
                        .ok_or_else(|| format!("no saved value {var}"))?,
                    None => step.request.get("body").cloned().unwrap_or(Value::Null),
                };
                for (path, value) in &edit.set {
                    set_path(&mut body, path, self.subst(value)?)?;
                }
                for path in &edit.unset {
                    unset_path(&mut body, path);
                }
                request["body"] = body.clone();
                Some(body)
            }
            None => step
                .request
                .get("body")
                .map(|b| self.subst(b))
                .transpose()?,
        };
        Ok((request, body))
    }

    /// Fills in `${var}`; a string that is exactly one reference takes the saved value as it is.
    fn subst(&self, v: &Value) -> Result<Value, String> {
        Ok(match v {
            Value::String(s) => {
                if let Some(var) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                    && !var.contains('$')
                {
                    let value = self.var(var)?;
                    if !value.is_string() {
                        return Ok(value.clone());
                    }
                }
                Value::String(self.subst_str(s)?)
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.subst(x)).collect::<Result<_, _>>()?)
            }
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| Ok((self.subst_str(k)?, self.subst(x)?)))
                    .collect::<Result<_, String>>()?,
            ),
            other => other.clone(),
        })
    }

    fn subst_str(&self, s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            let Some(len) = rest[i + 2..].find('}') else {
                break;
            };
            let var = &rest[i + 2..i + 2 + len];
            out.push_str(&rest[..i]);
            match self.var(var)? {
                Value::String(v) => out.push_str(v),
                Value::Null => {}
                other => out.push_str(&other.to_string()),
            }
            rest = &rest[i + 3 + len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn var(&self, name: &str) -> Result<&Value, String> {
        self.vars
            .get(name)
            .ok_or_else(|| format!("${{{name}}} is not set (save it in steps.yaml)"))
    }

    /// The HTTP request of a step.
    fn http_request(
        &self,
        step: &Step,
        body: Option<&Value>,
    ) -> Result<http::Request<Body>, String> {
        let req = &step.request;
        let method = req["method"].as_str().ok_or("no method")?;
        let mut uri = self.subst_str(req["path"].as_str().ok_or("no path")?)?;
        if let Some(Value::Object(query)) = req.get("query") {
            let pairs: Vec<String> = query
                .iter()
                .map(|(k, v)| {
                    let v = self.subst_str(v.as_str().unwrap_or_default())?;
                    Ok(format!("{}={}", enc(k), enc(&v)))
                })
                .collect::<Result<_, String>>()?;
            uri = format!("{uri}?{}", pairs.join("&"));
        }
        // Accept JSON unless the step asks otherwise; a body is JSON unless the step says what it is.
        let mut headers = vec![("Accept".to_owned(), "application/json".to_owned())];
        if let Some(Value::Object(h)) = req.get("headers") {
            for (k, v) in h {
                headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
                headers.push((k.clone(), self.subst_str(v.as_str().unwrap_or_default())?));
            }
        }
        let data = match body {
            None => Vec::new(),
            Some(Value::String(raw)) => raw.clone().into_bytes(),
            Some(v) => serde_json::to_vec(v).map_err(|e| e.to_string())?,
        };
        if body.is_some()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let mut b = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::USER_AGENT, USER_AGENT);
        for (k, v) in headers {
            b = b.header(k, v);
        }
        b.body(Body::from(data)).map_err(|e| e.to_string())
    }

    /// A plain request (repeated while its `until` does not hold): the response entry and the parsed body.
    async fn plain(&self, step: &Step, body: Option<Value>) -> Result<(Value, Value), String> {
        let deadline = Instant::now() + Duration::from_secs_f64(step.timeout);
        loop {
            let res = self
                .client
                .send(self.http_request(step, body.as_ref())?)
                .await
                .map_err(|e| format!("sending: {e}"))?;
            let code = res.status().as_u16();
            let ctype = header(&res, "content-type");
            let warning = header(&res, "warning");
            let bytes = res
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            let parsed = parse_body(&bytes, &ctype);
            let met = step.until.as_ref().is_none_or(|u| u.holds(code, &parsed));
            if met || Instant::now() > deadline {
                let mut resp = json!({"code": code, "content_type": ctype});
                if !warning.is_empty() {
                    resp["warning"] = json!(warning);
                }
                resp["body"] = parsed.clone();
                if !met {
                    resp["until_not_met"] = json!(true);
                }
                return Ok((resp, parsed));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A watch: opens it, sends `during` while it is open, reads it until the server closes it.
    async fn watch(&mut self, step: &Step, during: &[Step]) -> Result<(Value, Vec<Value>), String> {
        let res = self
            .client
            .send(self.http_request(step, None)?)
            .await
            .map_err(|e| format!("opening the watch: {e}"))?;
        let code = res.status().as_u16();
        let ctype = header(&res, "content-type");
        let transfer_encoding = header(&res, "transfer-encoding");
        let received = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = received.clone();
        let mut body = res.into_body();
        let mut reader = tokio::spawn(async move {
            while let Some(frame) = body.frame().await {
                let chunk = match frame {
                    Ok(f) => f.into_data().unwrap_or_default(),
                    Err(e) => Bytes::from(format!("<read error: {e}>")),
                };
                if let Ok(mut buf) = sink.lock() {
                    buf.extend_from_slice(&chunk);
                }
            }
        });
        tokio::time::sleep(WATCH_SETTLE).await;
        let mut entries = Vec::new();
        for d in during {
            if let Some(e) = Box::pin(self.step(d)).await? {
                entries.extend(e);
            }
        }
        let seconds = step
            .request
            .pointer("/query/timeoutSeconds")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(30);
        let wait = Duration::from_secs(seconds) + WATCH_GRACE;
        let closed = tokio::time::timeout(wait, &mut reader).await.is_ok();
        reader.abort();
        let raw = received.lock().map(|b| b.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&raw).into_owned();
        if code != 200 {
            let resp = json!({"code": code, "content_type": ctype,
                              "body": parse_body(raw.as_slice(), &ctype)});
            return Ok((resp, entries));
        }
        let terminated = text.ends_with('\n');
        let mut lines: Vec<&str> = text.split('\n').collect();
        if terminated {
            lines.pop();
        }
        let empty = text.is_empty();
        let events: Vec<Value> = if empty {
            Vec::new()
        } else {
            lines
                .iter()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({"<unparsed line>": l})))
                .collect()
        };
        let framing = if terminated || empty {
            "one JSON object per line"
        } else {
            "last line unterminated"
        };
        let resp = json!({"code": code, "content_type": ctype, "transfer_encoding": transfer_encoding,
                          "framing": framing, "stream_closed_by_server": closed, "events": events});
        Ok((resp, entries))
    }
}

fn enc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// A header's values joined by ", " ("" when absent).
fn header<B>(res: &http::Response<B>, name: &str) -> String {
    res.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ")
}

/// JSON when the content type says so (`{"<unparsed>": text}` if it is not), else the text.
fn parse_body(bytes: &[u8], ctype: &str) -> Value {
    let text = String::from_utf8_lossy(bytes).into_owned();
    if ctype.contains("json") {
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"<unparsed>": text}))
    } else {
        Value::String(text)
    }
}
