//! An OTLP receiver on a local port, for a watch: the spans a server's exporter sends, as vLLM and SGLang export them
//! with `--otlp-traces-endpoint`. Both of OTLP's transports are taken on the one port: gRPC (their exporters'
//! default: `TraceService/Export` over HTTP/2 without TLS) and HTTP (`POST /v1/traces`, protobuf or JSON, with
//! `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`), gzip or not. hyper serves the port on a thread of its own
//! and tells HTTP/1 from HTTP/2; each export is decoded there (a body that is no export is refused, answered with
//! why, and counted), and the watch takes what came at each look ([`Receiver::take`]), holding the exports of its
//! window ([`Receiver::forget_before`]).
//!
//! gRPC's unary call is a 5-byte frame around the message and a status in the trailers; that much is written here
//! rather than bringing tonic's server stack (tower, axum) into the build for one method.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{Request, Response, StatusCode};

use tokenscope_core::import::LivePart;
use tokenscope_core::import::otlp::{Span, export_spans};

/// The largest export taken: the OpenTelemetry SDKs' batch of 512 spans is far below it.
const BODY_AT_MOST: usize = 64 << 20;

/// What the port was sent since the watch last looked.
#[derive(Debug, Default)]
struct Inbox {
    exports: Vec<Vec<Span>>,
    troubles: Vec<String>,
    received: u64,
    refused: u64,
    /// Exports taken since the start: the next one's number.
    numbered: u64,
}

/// A receiver listening, and the exports it holds.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    /// What it stands for in the trace's files and messages: `otlp://ADDR/v1/traces`.
    name: PathBuf,
    inbox: Arc<Mutex<Inbox>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
    /// The exports of the window, oldest first, and each one's latest time.
    exports: Vec<Vec<Span>>,
    latest: Vec<i64>,
    /// Exports taken in all, and refused (not an export, too large, not a POST to /v1/traces).
    pub received: u64,
    pub refused: u64,
}

impl Receiver {
    /// Listens on `addr` (`127.0.0.1:4318`, or port 0 for any free one).
    ///
    /// # Errors
    /// The address cannot be read or bound: why.
    pub fn start(addr: &str) -> Result<Self, String> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        // One worker of its own: the watch's looks and the app's frames are not kept waiting by an export.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-receiver")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the receiver: {e}"))?;
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        runtime.spawn(serve(listener, Arc::clone(&inbox), stopped));
        Ok(Receiver {
            addr,
            name: PathBuf::from(format!("otlp://{addr}/v1/traces")),
            inbox,
            stop: Some(stop),
            runtime: Some(runtime),
            exports: Vec::new(),
            latest: Vec::new(),
            received: 0,
            refused: 0,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes what came since the last look: whether any span did, and what went wrong (each refused export's
    /// reason, the first few).
    pub fn take(&mut self) -> (bool, Vec<String>) {
        let (exports, troubles) = {
            let mut inbox = self.inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.received += std::mem::take(&mut inbox.received);
            self.refused += std::mem::take(&mut inbox.refused);
            (std::mem::take(&mut inbox.exports), std::mem::take(&mut inbox.troubles))
        };
        let gained = exports.iter().any(|e| !e.is_empty());
        for spans in exports.into_iter().filter(|e| !e.is_empty()) {
            let latest = spans
                .iter()
                .filter_map(|s| s.end_ns.or(s.start_ns))
                .max()
                .unwrap_or(i64::MIN);
            self.latest.push(latest);
            self.exports.push(spans);
        }
        (gained, troubles)
    }

    /// Forgets the exports whose spans all ended more than `keep_s` before the latest held.
    pub fn forget_before(&mut self, keep_s: f64) {
        let Some(&latest) = self.latest.iter().max() else {
            return;
        };
        let cutoff = latest.saturating_sub((keep_s * 1e9) as i64);
        let mut kept = self.latest.iter().map(|&t| t >= cutoff);
        self.exports.retain(|_| kept.next().unwrap_or(true));
        self.latest.retain(|&t| t >= cutoff);
    }

    /// Whether any span is held.
    pub fn has_spans(&self) -> bool {
        !self.exports.is_empty()
    }

    /// Whether an export (or a refusal to say) came since the last [`Self::take`]: what a waiting watch asks.
    pub fn waiting(&self) -> bool {
        let inbox = self.inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        !inbox.exports.is_empty() || !inbox.troubles.is_empty()
    }

    /// The spans held, as a source of the watch's trace.
    pub fn part(&self) -> LivePart<'_> {
        LivePart::Spans {
            path: &self.name,
            exports: &self.exports,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            // An exporter's connection still open is dropped, not waited for.
            runtime.shutdown_background();
        }
    }
}

/// Accepts connections until told to stop, each served on its own task.
async fn serve(
    listener: std::net::TcpListener,
    inbox: Arc<Mutex<Inbox>>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            let mut inbox = inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            inbox.troubles.push(format!("the receiver cannot listen: {e}"));
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors, say: waited out rather than tried again at once.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                };
                let inbox = Arc::clone(&inbox);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(req, Arc::clone(&inbox)));
                    // A connection the exporter drops is its own affair: the next export comes on another.
                    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

/// gRPC's path of the export (`opentelemetry.proto.collector.trace.v1.TraceService/Export`).
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// An answer's body: whole, with trailers for gRPC.
type Answer = Response<BoxBody<Bytes, std::convert::Infallible>>;

/// How an export came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Grpc,
    Protobuf,
    Json,
}

/// Answers one request: an export taken (an empty `ExportTraceServiceResponse`), or why not.
async fn answer(
    req: Request<hyper::body::Incoming>,
    inbox: Arc<Mutex<Inbox>>,
) -> Result<Answer, std::convert::Infallible> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default()
    };
    let kind = header("content-type");
    let transport = if kind.starts_with("application/grpc") {
        Transport::Grpc
    } else if kind.starts_with("application/json") {
        Transport::Json
    } else {
        Transport::Protobuf
    };
    // gRPC names its compression in its own header, each message flagged; OTLP/HTTP compresses the body.
    let packed = header(if transport == Transport::Grpc {
        "grpc-encoding"
    } else {
        "content-encoding"
    });
    let refuse = |status: StatusCode, why: String| {
        let mut inbox = inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inbox.refused += 1;
        if inbox.troubles.len() < 3 {
            inbox
                .troubles
                .push(format!("otlp: an export refused ({why}; counted, watch goes on)"));
        }
        reply(transport, Err((status, why)))
    };
    // OTLP/HTTP's path, or the root: an exporter given an endpoint posts to it as written.
    let path = req.uri().path();
    let known = if transport == Transport::Grpc {
        path == GRPC_EXPORT
    } else {
        path == "/v1/traces" || path == "/"
    };
    if req.method() != hyper::Method::POST || !known {
        let wanted = if transport == Transport::Grpc {
            GRPC_EXPORT
        } else {
            "/v1/traces"
        };
        let why = format!("{} {path}: only POST {wanted} is received", req.method());
        return Ok(refuse(StatusCode::NOT_FOUND, why));
    }
    let body = match Limited::new(req.into_body(), BODY_AT_MOST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(refuse(StatusCode::PAYLOAD_TOO_LARGE, format!("body unread: {e}"))),
    };
    let message = match transport {
        Transport::Grpc => grpc_message(&body, &packed),
        _ => unpack(body, &packed),
    };
    let message = match message {
        Ok(m) => m,
        Err(why) => return Ok(refuse(StatusCode::BAD_REQUEST, why)),
    };
    let number = inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner).numbered + 1;
    match export_spans(&message, transport == Transport::Json, number) {
        Ok(spans) => {
            let mut inbox = inbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            inbox.received += 1;
            inbox.numbered += 1;
            inbox.exports.push(spans);
            Ok(reply(transport, Ok(())))
        }
        Err(why) => Ok(refuse(StatusCode::BAD_REQUEST, why)),
    }
}

/// The message of a gRPC request body: one frame (a compressed flag, a 4-byte big-endian length, the message).
fn grpc_message(body: &[u8], packed: &str) -> Result<Bytes, String> {
    let (&flag, rest) = body.split_first().ok_or("an empty gRPC body")?;
    let len = rest
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or("a gRPC frame cut before its length")? as usize;
    let end = len.checked_add(4).ok_or("a gRPC frame longer than memory")?;
    let message = rest
        .get(4..end)
        .ok_or_else(|| format!("a gRPC frame of {len} bytes cut at {}", rest.len().saturating_sub(4)))?;
    // Export is a unary call: one message.
    if rest.len() > end {
        return Err(format!(
            "{} bytes after the gRPC message (Export takes one)",
            rest.len() - end
        ));
    }
    match (flag, packed) {
        (0, _) => Ok(Bytes::copy_from_slice(message)),
        (1, "" | "identity") => Err("a gRPC message flagged compressed without a grpc-encoding".to_owned()),
        (1, _) => unpack(Bytes::copy_from_slice(message), packed),
        _ => Err(format!("a gRPC frame flagged {flag}, neither 0 nor 1")),
    }
}

/// A body as its encoding left it: `gzip` and `deflate` unpacked (at most [`BODY_AT_MOST`] bytes), `identity` or
/// none taken as it is.
fn unpack(body: Bytes, encoding: &str) -> Result<Bytes, String> {
    let reader: Box<dyn std::io::Read + '_> = match encoding {
        "" | "identity" => return Ok(body),
        "gzip" => Box::new(flate2::read::GzDecoder::new(&body[..])),
        "deflate" => Box::new(flate2::read::ZlibDecoder::new(&body[..])),
        other => return Err(format!("a body encoded as {other}: gzip, deflate or none are read")),
    };
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(reader, BODY_AT_MOST as u64 + 1), &mut out)
        .map_err(|e| format!("{encoding} body unread: {e}"))?;
    if out.len() > BODY_AT_MOST {
        return Err(format!("a {encoding} body of more than {BODY_AT_MOST} bytes unpacked"));
    }
    Ok(Bytes::from(out))
}

/// An answer as OTLP gives it: an empty response message (`{}` in JSON; over gRPC framed, `grpc-status: 0` in the
/// trailers) when taken, else the reason (over gRPC, status 3 `INVALID_ARGUMENT` or 12 `UNIMPLEMENTED` with it).
fn reply(transport: Transport, result: Result<(), (StatusCode, String)>) -> Answer {
    let header = |v: &str| {
        hyper::header::HeaderValue::from_str(v).unwrap_or_else(|_| hyper::header::HeaderValue::from_static("-"))
    };
    if transport == Transport::Grpc {
        let (code, why) = match result {
            Ok(()) => ("0", String::new()),
            Err((StatusCode::NOT_FOUND, why)) => ("12", why),
            Err((_, why)) => ("3", why),
        };
        let mut trailers = hyper::HeaderMap::new();
        trailers.insert("grpc-status", header(code));
        if !why.is_empty() {
            trailers.insert(
                "grpc-message",
                header(&why.replace(|c: char| !c.is_ascii_graphic() && c != ' ', "_")),
            );
        }
        // The empty response message, framed; none when refused.
        let body = if code == "0" {
            Bytes::from_static(&[0, 0, 0, 0, 0])
        } else {
            Bytes::new()
        };
        let mut r = Response::new(Full::new(body).with_trailers(async move { Some(Ok(trailers)) }).boxed());
        r.headers_mut()
            .insert(hyper::header::CONTENT_TYPE, header("application/grpc"));
        return r;
    }
    let (status, kind, body) = match (result, transport) {
        (Ok(()), Transport::Json) => (StatusCode::OK, "application/json", Bytes::from_static(b"{}")),
        (Ok(()), _) => (StatusCode::OK, "application/x-protobuf", Bytes::new()),
        (Err((status, why)), _) => (status, "text/plain", Bytes::from(why)),
    };
    let mut r = Response::new(Full::new(body).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, header(kind));
    r
}
