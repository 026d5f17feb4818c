//! A local OpenAI-compatible server for the recorder's tests and benchmark: it answers every POST with one behaviour
//! (a captured SSE stream replayed with gaps, an HTTP error, a stream cut or stalled midway), on 127.0.0.1 and a port
//! of the system's choosing, through hyper's server. GETs (the recorder's questions about the server) get a 404.

// Test and benchmark code: a panic here is a failed test.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Request, Response};

/// What the server does with a POST.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// Streams these SSE payloads (`data: ...`), `gap` apart; `cut_after`: breaks the connection after that many;
    /// `stall_after`: stops sending (for a long while) after that many.
    Stream {
        events: Vec<String>,
        gap: Duration,
        cut_after: Option<usize>,
        stall_after: Option<usize>,
    },
    /// Answers with this status and body.
    Status(u16, String),
    /// Answers every request, GETs included, with this text (a server's `/metrics` page).
    Page(String),
    /// Answers each POST with what this gives for its path and JSON body: a status and a JSON answer (a server's
    /// JSON API, llama.cpp's `/tokenize`, `/completion`).
    Json(fn(&str, &serde_json::Value) -> (u16, serde_json::Value)),
}

impl Behavior {
    /// Replays a captured `.sse` file a millisecond apart, and stops sending (for a long while) after `after` of
    /// its payloads: a stream held open at a known point.
    pub fn stalling(sse: &str, after: usize) -> Self {
        match Self::replay(sse, Duration::from_millis(1)) {
            Behavior::Stream { events, gap, .. } => Behavior::Stream {
                events,
                gap,
                cut_after: None,
                stall_after: Some(after),
            },
            other => other,
        }
    }

    /// Replays a captured `.sse` file: its `data:` lines in order.
    pub fn replay(sse: &str, gap: Duration) -> Self {
        Behavior::Stream {
            events: sse
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned)
                .collect(),
            gap,
            cut_after: None,
            stall_after: None,
        }
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

/// The ids each POST carried: (`x-request-id`, `traceparent`), in arrival order.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, Option<String>)>>>;

/// The path and JSON body of each POST a [`Behavior::Json`] server answered, in arrival order.
pub type Posts = std::sync::Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>;

/// Streams after the first `free` held before their first payload until released: a recording kept going for as
/// long as a test needs it, whatever the machine's pace.
#[derive(Clone)]
struct Hold {
    free: usize,
    streams: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    released: tokio::sync::watch::Receiver<bool>,
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    behavior: Behavior,
    seen: Seen,
    posts: Posts,
    hold: Hold,
) -> Result<Response<Body>, Infallible> {
    let full = |status: u16, text: String| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(text)).map_err(|never| match never {}).boxed())
            .unwrap()
    };
    if let Behavior::Page(text) = &behavior {
        return Ok(Response::builder()
            .status(200)
            .header("content-type", "text/plain; version=0.0.4")
            .body(
                Full::new(Bytes::from(text.clone()))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .unwrap());
    }
    if req.method() == hyper::Method::GET {
        return Ok(full(404, "{\"error\": \"not here\"}".to_owned()));
    }
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let ids = (header("x-request-id"), header("traceparent"));
    seen.lock().unwrap().push(ids);
    let path = req.uri().path().to_owned();
    // Read the request body whole, as a server would, before answering.
    let body = req
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    match behavior {
        Behavior::Json(respond) => {
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            let (status, answer) = respond(&path, &body);
            posts.lock().unwrap().push((path, body));
            Ok(full(status, answer.to_string()))
        }
        Behavior::Status(code, text) => Ok(full(code, text)),
        Behavior::Page(text) => Ok(full(200, text)),
        Behavior::Stream {
            events,
            gap,
            cut_after,
            stall_after,
        } => {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
            let held = hold.streams.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= hold.free;
            let mut released = hold.released;
            tokio::spawn(async move {
                if held && released.wait_for(|r| *r).await.is_err() {
                    return;
                }
                for (i, e) in events.iter().enumerate() {
                    if cut_after == Some(i) {
                        // Let the chunks before it reach the wire: an error drops what hyper still buffers. Hyper
                        // takes each chunk from the channel to write it: once all are taken (however busy the
                        // machine), a moment for the write.
                        while tx.capacity() < tx.max_capacity() && !tx.is_closed() {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = tx.send(Err(std::io::Error::other("cut"))).await;
                        return;
                    }
                    if stall_after == Some(i) {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    if !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    if tx
                        .send(Ok(Frame::data(Bytes::from(format!("data: {e}\n\n")))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
            let stream = tokio_stream_of(rx);
            Ok(Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .body(BodyExt::boxed(StreamBody::new(stream)))
                .unwrap())
        }
    }
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A running server; it stops when dropped.
pub struct Server {
    /// Its base URL.
    pub url: String,
    /// The ids every POST carried.
    pub seen: Seen,
    /// What a [`Behavior::Json`] server was sent.
    pub posts: Posts,
    release: tokio::sync::watch::Sender<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Server {
    /// Lets the streams held by [`start_holding`] go on.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }
}

/// Starts a server with one behaviour on 127.0.0.1.
pub fn start(behavior: Behavior) -> Server {
    start_holding(behavior, usize::MAX)
}

/// As [`start`], holding every stream after the first `free` before its first payload until [`Server::release`].
pub fn start_holding(behavior: Behavior, free: usize) -> Server {
    let (release, released) = tokio::sync::watch::channel(false);
    let hold = Hold {
        free,
        streams: std::sync::Arc::default(),
        released,
    };
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let seen = Seen::default();
    let log = std::sync::Arc::clone(&seen);
    let posts = Posts::default();
    let posted = std::sync::Arc::clone(&posts);
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            url_tx
                .send(format!("http://{}", listener.local_addr().unwrap()))
                .unwrap();
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    accepted = listener.accept() => {
                        let Ok((socket, _)) = accepted else { continue };
                        let behavior = behavior.clone();
                        let log = std::sync::Arc::clone(&log);
                        let posted = std::sync::Arc::clone(&posted);
                        let hold = hold.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                answer(req, behavior.clone(), std::sync::Arc::clone(&log), std::sync::Arc::clone(&posted), hold.clone())
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                                .await;
                        });
                    }
                }
            }
        });
    });
    Server {
        url: url_rx.recv().unwrap(),
        seen,
        posts,
        release,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}
