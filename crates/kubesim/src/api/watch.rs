//! WATCH: selector-filtered event streams framed as the real server frames them (one JSON object per
//! line), with resourceVersion resumption, 410 for expired versions, bookmarks and `timeoutSeconds`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use tokio::sync::broadcast;
use tokio::time::{Instant, Sleep};

use super::{Api, ListOpts, Served, parse_rv};
use crate::errors::{ApiError, go_quote};
use crate::store::{Event, EventType, Stored};

/// How often an idle watch with bookmarks enabled gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// A watch request after parsing.
#[derive(Debug, Clone, Default)]
pub struct WatchOpts {
    pub namespace: Option<String>,
    pub list: ListOpts,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: ADDED for existing objects, then a bookmark marking their end.
    pub send_initial_events: bool,
}

/// Starts a watch: the stream yields the response's chunks until the watch ends (timeout, the
/// server dropping watches, or the watcher falling behind the retained events). The connection's
/// task renders the events itself, straight into the chunk it writes: no task in between, so an
/// event costs one wakeup (the connection's) and one copy of the object, not three.
pub fn start(api: Arc<Api>, s: Arc<Served>, mut o: WatchOpts) -> Result<WatchStream, ApiError> {
    o.list.field = s.convert_field_selector(&o.list.field)?;
    let from = match o.list.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(parse_rv(rv).map_err(|m| {
            ApiError::bare(
                500,
                format!("resourceVersion: Invalid value: {}: {m}", go_quote(rv)),
            )
        })?),
    };
    let ns = o
        .namespace
        .clone()
        .or_else(|| o.list.field.exact("metadata.namespace").map(str::to_string));
    // `seen`: the version the stream is complete up to (the broadcast delivers what follows).
    let (initial, events, expired) = match from {
        None => {
            let (snap, rx) = api.store.snapshot_and_watch(&s.table, ns.as_deref());
            (snap.items, Some((Vec::new(), rx, snap.rv)), None)
        }
        Some(rv) => match api.store.watch(&s.table, Some(rv)) {
            Ok(w) => (Vec::new(), Some((w.backlog, w.rx, w.rv)), None),
            Err(oldest) => (Vec::new(), None, Some((rv, oldest))),
        },
    };
    let initial_end = from.is_none() && o.send_initial_events;
    let now = Instant::now();
    let deadline = o.timeout.map(|t| now + t);
    // Bookmarks: periodically, and once just before a requested timeout so the client can resume
    // from a recent version.
    let mut next_bookmark = now + BOOKMARK_EVERY;
    if let (Some(d), Some(t)) = (deadline, o.timeout)
        && t > Duration::from_secs(1)
    {
        next_bookmark = next_bookmark.min(d - Duration::from_secs(1));
    }
    let expired = expired.map(|(rv, oldest)| {
        let status =
            ApiError::expired(format!("too old resource version: {rv} ({oldest})")).to_status();
        serde_json::to_vec(&status).unwrap_or_default()
    });
    Ok(WatchStream {
        expired,
        initial: initial.into_iter(),
        initial_end,
        events: events.map(|(backlog, rx, seen)| Events {
            backlog: backlog.into(),
            rx,
            seen,
        }),
        deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
        bookmark: o
            .bookmarks
            .then(|| Box::pin(tokio::time::sleep_until(next_bookmark))),
        api,
        s,
        o,
        ended: false,
    })
}

/// An open watch (see [`start`]).
pub struct WatchStream {
    api: Arc<Api>,
    s: Arc<Served>,
    o: WatchOpts,
    /// The ERROR line's Status for a version older than the retained events: sent, then the end.
    expired: Option<Vec<u8>>,
    /// Objects that existed when a watch without a version started: ADDED first.
    initial: std::vec::IntoIter<Arc<Stored>>,
    /// `sendInitialEvents=true`: the bookmark after the initial objects is still to come.
    initial_end: bool,
    /// `None`: nothing follows the initial objects (an expired version).
    events: Option<Events>,
    /// Kept across events: a timer re-armed per event would cost a timer-wheel insertion each.
    deadline: Option<Pin<Box<Sleep>>>,
    bookmark: Option<Pin<Box<Sleep>>>,
    ended: bool,
}

struct Events {
    /// Retained events to send before the broadcast's.
    backlog: VecDeque<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
    /// The version the stream is complete up to.
    seen: u64,
}

/// What [`WatchStream::put_ready`] found.
enum Ready {
    /// A line was appended.
    Line,
    /// Nothing without waiting.
    Empty,
    /// The watch is over.
    End,
}

impl WatchStream {
    /// The next piece of the response: the next framed line and the lines ready behind it (up to
    /// [`CHUNK_MAX`]), in order, so a burst of events costs one write (one HTTP chunk, one TLS
    /// record run) instead of one per event. The real server does the same: its watch handler
    /// flushes only when no further event is waiting (`k8s.io/apiserver/pkg/endpoints/handlers/
    /// watch.go`: `if len(ch) == 0 { flusher.Flush() }`). `None`: the watch ended.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        // A stream that never runs dry still ends at its timeout and gets its bookmarks (after
        // the initial objects).
        let now = Instant::now();
        let due = |t: &Option<Pin<Box<Sleep>>>| t.as_ref().is_some_and(|t| t.deadline() <= now);
        if due(&self.deadline) {
            self.ended = true;
        } else if due(&self.bookmark)
            && self.expired.is_none()
            && self.initial.len() == 0
            && !self.initial_end
        {
            self.put_bookmark(&mut out);
        }
        while out.is_empty() {
            match self.put_ready(&mut out) {
                Ready::Line => {}
                Ready::End => return None,
                Ready::Empty => self.wait(&mut out).await,
            }
        }
        while out.len() < CHUNK_MAX {
            match self.put_ready(&mut out) {
                Ready::Line => {}
                Ready::Empty | Ready::End => break,
            }
        }
        Some(out.freeze())
    }

    /// Appends the next line that is ready without waiting.
    fn put_ready(&mut self, out: &mut BytesMut) -> Ready {
        if self.ended {
            return Ready::End;
        }
        if let Some(status) = self.expired.take() {
            put_line(out, "ERROR", &status);
            self.ended = true;
            return Ready::Line;
        }
        for st in self.initial.by_ref() {
            if self
                .api
                .matches(&self.s, &st, &self.o.list.label, &self.o.list.field)
            {
                put_frame(out, &self.api, &self.s, EventType::Added, &st);
                return Ready::Line;
            }
        }
        if std::mem::take(&mut self.initial_end) {
            let mut b = self.s.bookmark(self.api.store.current_rv());
            b["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            put_line(out, "BOOKMARK", &serde_json::to_vec(&b).unwrap_or_default());
            return Ready::Line;
        }
        let Some(ev) = self.events.as_mut() else {
            self.ended = true;
            return Ready::End;
        };
        loop {
            let event = match ev.backlog.pop_front() {
                Some(e) => e,
                None => match ev.rx.try_recv() {
                    Ok(e) => e,
                    Err(broadcast::error::TryRecvError::Empty) => return Ready::Empty,
                    Err(broadcast::error::TryRecvError::Lagged(_)) => {
                        if !ev.resume(&self.api, &self.s) {
                            self.ended = true;
                            return Ready::End;
                        }
                        continue;
                    }
                    // The server dropped its watches: end; the client resumes.
                    Err(broadcast::error::TryRecvError::Closed) => {
                        self.ended = true;
                        return Ready::End;
                    }
                },
            };
            ev.seen = ev.seen.max(event.rv);
            if classify(&self.api, &self.s, &self.o, &event, out) {
                return Ready::Line;
            }
        }
    }

    /// Waits for the next event (left for [`Self::put_ready`]), a bookmark (appended) or the end.
    async fn wait(&mut self, out: &mut BytesMut) {
        let Self {
            api,
            s,
            events,
            deadline,
            bookmark,
            ended,
            ..
        } = self;
        let Some(ev) = events.as_mut() else {
            *ended = true;
            return;
        };
        let timeout = async {
            match deadline.as_mut() {
                Some(d) => d.await,
                None => std::future::pending().await,
            }
        };
        let bookmark = async {
            match bookmark.as_mut() {
                Some(b) => b.await,
                None => std::future::pending().await,
            }
        };
        let bookmark_due = tokio::select! {
            _ = timeout => {
                *ended = true;
                false
            }
            _ = bookmark => true,
            r = ev.rx.recv() => {
                match r {
                    Ok(e) => ev.backlog.push_back(e),
                    // Behind the broadcast buffer: carry on from the retained events (what the
                    // real server's watch cache serves); only a watcher behind those too ends.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if !ev.resume(api, s) {
                            *ended = true;
                        }
                    }
                    // The server dropped its watches: end; the client resumes.
                    Err(broadcast::error::RecvError::Closed) => *ended = true,
                }
                false
            }
        };
        if bookmark_due {
            self.put_bookmark(out);
        }
    }

    /// Appends a bookmark at the current version and arms the next one.
    fn put_bookmark(&mut self, out: &mut BytesMut) {
        let b = self.s.bookmark(self.api.store.current_rv());
        put_line(out, "BOOKMARK", &serde_json::to_vec(&b).unwrap_or_default());
        let Some(timer) = self.bookmark.as_mut() else {
            return;
        };
        let now = Instant::now();
        let mut next = now + BOOKMARK_EVERY;
        match self.deadline.as_ref().map(|d| d.deadline()) {
            Some(d) if d > now + Duration::from_secs(1) => {
                next = next.min(d - Duration::from_secs(1));
            }
            // The pre-timeout bookmark was sent; no more before the end.
            Some(_) => next = now + Duration::from_secs(86_400),
            None => {}
        }
        timer.as_mut().reset(next);
    }
}

impl Events {
    /// Carries on from the retained events after `seen`; `false` when they no longer reach back.
    fn resume(&mut self, api: &Api, s: &Served) -> bool {
        match api.store.watch(&s.table, Some(self.seen)) {
            Ok(w) => {
                self.backlog = w.backlog.into();
                self.rx = w.rx;
                true
            }
            Err(_) => false,
        }
    }
}

/// What a filtered watcher sees of an event: objects that start matching appear as ADDED, those that
/// stop matching as DELETED (carrying their new state), as the watch cache does. Appends the line
/// to `out`; `false` when the watcher sees nothing of it.
fn classify(api: &Api, s: &Served, o: &WatchOpts, ev: &Event, out: &mut BytesMut) -> bool {
    let in_scope = |st: &Stored| {
        o.namespace.as_deref().is_none_or(|ns| st.namespace() == ns)
            && api.matches(s, st, &o.list.label, &o.list.field)
    };
    let now = in_scope(&ev.obj);
    let kind = match ev.kind {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Deleted => now.then_some(EventType::Deleted),
        EventType::Modified => {
            let before = ev.prev.as_deref().is_some_and(in_scope);
            match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            }
        }
    };
    let Some(kind) = kind else {
        return false;
    };
    if kind == EventType::Deleted
        && ev.kind == EventType::Modified
        && let Some(prev) = &ev.prev
    {
        // The watch cache sends the last state the watcher was entitled to see, at the new version.
        let st = Stored::new(ev.rv, prev.value());
        put_frame(out, api, s, kind, &st);
    } else {
        put_frame(out, api, s, kind, &ev.obj);
    }
    true
}

/// The most a watch response writes at once when events queue up (the first event is sent whole
/// however large).
const CHUNK_MAX: usize = 64 * 1024;

const LINE_HEAD: &[u8] = b"{\"type\":\"";
const LINE_OBJECT: &[u8] = b"\",\"object\":";
const LINE_END: &[u8] = b"}\n";

/// Appends `{"type":"…","object":<the rendered object>}\n`.
fn put_frame(out: &mut BytesMut, api: &Api, s: &Served, kind: EventType, st: &Stored) {
    out.put_slice(LINE_HEAD);
    out.put_slice(kind.as_str().as_bytes());
    out.put_slice(LINE_OBJECT);
    api.render_stored_into(s, st, out);
    out.put_slice(LINE_END);
}

/// Appends `{"type":"…","object":…}\n`.
fn put_line(out: &mut BytesMut, kind: &str, obj: &[u8]) {
    out.reserve(obj.len() + 32);
    out.put_slice(LINE_HEAD);
    out.put_slice(kind.as_bytes());
    out.put_slice(LINE_OBJECT);
    out.put_slice(obj);
    out.put_slice(LINE_END);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FieldValidation, Registry, WriteOpts};
    use crate::store::{Retention, Store};

    /// The full path the stream's lines must equal: the object rendered on its own
    /// (`Api::render`), then framed.
    fn reference_line(kind: &str, obj: &[u8]) -> String {
        format!(
            "{{\"type\":\"{kind}\",\"object\":{}}}\n",
            String::from_utf8_lossy(obj)
        )
    }

    fn create(api: &Api, s: &Served, ns: &str, body: serde_json::Value) -> String {
        let raw = serde_json::to_vec(&body).unwrap();
        let (obj, _) = crate::api::decode::decode_body(s, &raw, FieldValidation::Strict)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let opts = WriteOpts {
            manager: "test".into(),
            ..WriteOpts::default()
        };
        let w = api
            .create(s, ns, obj, &opts)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let served = match &w.obj {
            crate::api::ObjOut::Stored(st) => api.served_value(s, st),
            crate::api::ObjOut::Value(v) => v.clone(),
        };
        // The bytes as the answer to a GET renders them, and the object parsed back from the
        // stored one, so that neither rendering is only checked against itself.
        let line = reference_line("ADDED", &api.render(s, &w.obj));
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed, json!({"type": "ADDED", "object": served}));
        line
    }

    /// Reads chunks until `want` bytes came; checks each chunk ends a line and its last line
    /// starts within CHUNK_MAX bytes.
    async fn read(w: &mut WatchStream, want: usize) -> (String, usize) {
        let (mut got, mut chunks) = (String::new(), 0);
        while got.len() < want {
            let c = tokio::time::timeout(Duration::from_secs(10), w.next_chunk())
                .await
                .unwrap_or_else(|_| panic!("{} of {want} bytes, then nothing", got.len()))
                .unwrap_or_else(|| panic!("ended after {} of {want} bytes", got.len()));
            assert!(c.ends_with(b"\n"), "a chunk ends inside a line");
            let last = c[..c.len() - 1]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            assert!(last < CHUNK_MAX, "a line starts {last} bytes into a chunk");
            let text = std::str::from_utf8(&c).unwrap();
            for l in text.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:.200}"));
                assert_eq!(v["type"], "ADDED");
            }
            got.push_str(text);
            chunks += 1;
        }
        (got, chunks)
    }

    /// The stream renders each object straight into its chunk; its bytes equal every object
    /// rendered on its own and framed, in order, for a stored kind and a converted one
    /// (events.k8s.io Events are stored as core Events): the initial objects, then a burst of
    /// creates of varied sizes (one larger than a chunk) joined into few chunks, split only
    /// between lines.
    #[tokio::test]
    async fn streamed_chunks_equal_each_event_rendered_and_framed() {
        let api = Arc::new(Api::new(
            Arc::new(Store::new(Retention::default())),
            Registry::with_builtins(),
        ));
        let ns = api.registry.get("", "v1", "namespaces").unwrap();
        create(&api, &ns, "", json!({"metadata": {"name": "default"}}));
        let cm = api.registry.get("", "v1", "configmaps").unwrap();
        let ev = api.registry.get("events.k8s.io", "v1", "events").unwrap();
        let cm_body = |i: usize| {
            let size = if i == 7 {
                3 * CHUNK_MAX / 2
            } else {
                i * 37 % 3000
            };
            json!({"metadata": {"name": format!("c{i}"), "namespace": "default"},
                "data": {"v": "x".repeat(size)}})
        };
        let ev_body = |i: usize| {
            json!({"metadata": {"name": format!("e{i}"), "namespace": "default"},
                "eventTime": "2026-11-28T08:00:00.000000Z", "reportingController": "test/x",
                "reportingInstance": "i", "action": "Test", "reason": "Tested", "type": "Normal",
                "note": "n".repeat(i * 53 % 700),
                "regarding": {"kind": "ConfigMap", "name": "c0", "namespace": "default"}})
        };
        let mut cm_want = String::new();
        let mut ev_want = String::new();
        for i in 0..3 {
            cm_want.push_str(&create(&api, &cm, "default", cm_body(i)));
            ev_want.push_str(&create(&api, &ev, "default", ev_body(i)));
        }
        let opts = WatchOpts {
            namespace: Some("default".into()),
            ..WatchOpts::default()
        };
        let mut cm_watch = start(api.clone(), cm.clone(), opts.clone()).unwrap();
        let mut ev_watch = start(api.clone(), ev.clone(), opts).unwrap();
        let (got, chunks) = read(&mut cm_watch, cm_want.len()).await;
        assert_eq!(got, cm_want);
        assert_eq!(chunks, 1, "the initial objects come in one chunk");
        let (got, _) = read(&mut ev_watch, ev_want.len()).await;
        assert_eq!(got, ev_want);

        let (mut cm_burst, mut ev_burst) = (String::new(), String::new());
        for i in 3..300 {
            cm_burst.push_str(&create(&api, &cm, "default", cm_body(i)));
            ev_burst.push_str(&create(&api, &ev, "default", ev_body(i)));
        }
        let (got, chunks) = read(&mut cm_watch, cm_burst.len()).await;
        assert_eq!(got, cm_burst);
        assert!(
            (3..40).contains(&chunks),
            "{chunks} chunks for {} bytes",
            got.len()
        );
        let (got, _) = read(&mut ev_watch, ev_burst.len()).await;
        assert_eq!(got, ev_burst);
    }
}
