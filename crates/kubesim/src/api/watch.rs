//! WATCH: selector-filtered event streams framed as the real server frames them (one JSON object per
//! line), with resourceVersion resumption, 410 for expired versions, bookmarks and `timeoutSeconds`.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

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

/// Starts a watch; the receiver yields framed lines until the watch ends (timeout, client gone, the
/// server dropping watches, or the watcher falling too far behind).
pub fn start(
    api: Arc<Api>,
    s: Arc<Served>,
    mut o: WatchOpts,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
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
    let (tx, rx) = mpsc::channel(1024);
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
    tokio::spawn(async move {
        let deadline = o.timeout.map(|t| tokio::time::Instant::now() + t);
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(b).await.is_ok() }
        };
        if let Some((rv, oldest)) = expired {
            let status =
                ApiError::expired(format!("too old resource version: {rv} ({oldest})")).to_status();
            let _ = send(line(
                "ERROR",
                &serde_json::to_vec(&status).unwrap_or_default(),
            ))
            .await;
            return;
        }
        for st in &initial {
            if api.matches(&s, st, &o.list.label, &o.list.field)
                && !send(frame(&api, &s, EventType::Added, st)).await
            {
                return;
            }
        }
        if initial_end {
            let mut b = s.bookmark(api.store.current_rv());
            b["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            if !send(line(
                "BOOKMARK",
                &serde_json::to_vec(&b).unwrap_or_default(),
            ))
            .await
            {
                return;
            }
        }
        let Some((mut backlog, mut rx, mut seen)) = events else {
            return;
        };
        // Bookmarks: periodically, and once just before a requested timeout so the client can resume
        // from a recent version.
        let mut next_bookmark = tokio::time::Instant::now() + BOOKMARK_EVERY;
        if let (Some(d), Some(t)) = (deadline, o.timeout)
            && t > Duration::from_secs(1)
        {
            next_bookmark = next_bookmark.min(d - Duration::from_secs(1));
        }
        loop {
            for ev in std::mem::take(&mut backlog) {
                seen = seen.max(ev.rv);
                if let Some(b) = classify(&api, &s, &o, &ev)
                    && !send(b).await
                {
                    return;
                }
            }
            let timeout = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = timeout => return,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(next_bookmark), if o.bookmarks => {
                    let b = s.bookmark(api.store.current_rv());
                    if !send(line("BOOKMARK", &serde_json::to_vec(&b).unwrap_or_default())).await {
                        return;
                    }
                    next_bookmark = tokio::time::Instant::now() + BOOKMARK_EVERY;
                    if let Some(d) = deadline && d > tokio::time::Instant::now() + Duration::from_secs(1) {
                        next_bookmark = next_bookmark.min(d - Duration::from_secs(1));
                    } else if deadline.is_some() {
                        // The pre-timeout bookmark was sent; no more before the end.
                        next_bookmark = tokio::time::Instant::now() + Duration::from_secs(86_400);
                    }
                }
                r = rx.recv() => match r {
                    Ok(ev) => {
                        seen = seen.max(ev.rv);
                        if let Some(b) = classify(&api, &s, &o, &ev) && !send(b).await {
                            return;
                        }
                    }
                    // Behind the broadcast buffer: carry on from the retained events (what the
                    // real server's watch cache serves); only a watcher behind those too ends.
                    Err(broadcast::error::RecvError::Lagged(_)) => match api.store.watch(&s.table, Some(seen)) {
                        Ok(w) => {
                            // Sent first, at the top of the loop.
                            backlog = w.backlog;
                            rx = w.rx;
                        }
                        Err(_) => return,
                    },
                    // The server dropped its watches: end; the client resumes.
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    Ok(rx)
}

/// What a filtered watcher sees of an event: objects that start matching appear as ADDED, those that
/// stop matching as DELETED (carrying their new state), as the watch cache does.
fn classify(api: &Api, s: &Served, o: &WatchOpts, ev: &Event) -> Option<Bytes> {
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
    }?;
    if kind == EventType::Deleted
        && ev.kind == EventType::Modified
        && let Some(prev) = &ev.prev
    {
        // The watch cache sends the last state the watcher was entitled to see, at the new version.
        let st = Stored::new(ev.rv, prev.value());
        return Some(frame(api, s, kind, &st));
    }
    Some(frame(api, s, kind, &ev.obj))
}

fn frame(api: &Api, s: &Served, kind: EventType, st: &Stored) -> Bytes {
    let obj = api.render_stored(s, st);
    line(kind.as_str(), &obj)
}

/// The most a watch response writes at once when events queue up (the first event is sent whole
/// however large).
const CHUNK_MAX: usize = 64 * 1024;

/// The next piece of a watch response: the next framed line and the lines already queued behind it
/// (up to [`CHUNK_MAX`]), in order, so a burst of events costs one write (one HTTP chunk, one TLS
/// record run) instead of one per event. The real server does the same: its watch handler flushes
/// only when no further event is waiting (`k8s.io/apiserver/pkg/endpoints/handlers/watch.go`:
/// `if len(ch) == 0 { flusher.Flush() }`).
/// The bytes of the stream are unchanged. `None`: the watch ended.
pub async fn next_chunk(rx: &mut mpsc::Receiver<Bytes>) -> Option<Bytes> {
    let first = rx.recv().await?;
    let Ok(second) = rx.try_recv() else {
        return Some(first);
    };
    let mut b = BytesMut::with_capacity(first.len() + second.len());
    b.put_slice(&first);
    b.put_slice(&second);
    while b.len() < CHUNK_MAX {
        match rx.try_recv() {
            Ok(next) => b.put_slice(&next),
            Err(_) => break,
        }
    }
    Some(b.freeze())
}

/// `{"type":"…","object":…}\n`
pub fn line(kind: &str, obj: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(obj.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(obj);
    b.put_slice(b"}\n");
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queued lines come out together, in order and whole; a line alone comes out as it was
    /// sent; a burst larger than a chunk is split between lines, never inside one; nothing is
    /// lost or repeated.
    #[tokio::test]
    async fn queued_lines_are_joined_in_order_without_losing_one() {
        let (tx, mut rx) = mpsc::channel(4096);
        tx.send(line("ADDED", b"{}")).await.unwrap();
        assert_eq!(
            next_chunk(&mut rx).await.unwrap(),
            Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":{}}\n")
        );
        let mut sent = Vec::new();
        for i in 0..3000 {
            let l = line("MODIFIED", format!("{{\"n\":{i}}}").as_bytes());
            sent.extend_from_slice(&l);
            tx.send(l).await.unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        let mut chunks = 0;
        while let Some(c) = next_chunk(&mut rx).await {
            assert!(c.ends_with(b"\n"), "a chunk ends inside a line");
            assert!(c.len() < CHUNK_MAX + 64, "{} bytes in one chunk", c.len());
            got.extend_from_slice(&c);
            chunks += 1;
        }
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&sent)
        );
        assert!(
            (2..100).contains(&chunks),
            "{chunks} chunks for {} bytes",
            sent.len()
        );
    }
}
