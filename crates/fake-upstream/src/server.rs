//! Accept loop, per-connection hyper serving and the Anthropic API routes.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde::Deserialize;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{FakeConfig, Fault, default_error_message, default_error_type};
use crate::control;
use crate::prompt_cache::{self, CacheUsage, PromptCache};
use crate::record::{RecordStore, RecordedRequest, StreamTracker};
use crate::render::{MODELS_BODY, Rendered};
use crate::sse::{Abort, FakeBody, SseBody, StreamFault};

/// Largest request body accepted (bigger ones get 413 `request_too_large`).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Headers a real upstream sends that a gateway is expected to strip.
const UPSTREAM_ONLY_HEADERS: [(&str, &str); 5] = [
    ("anthropic-ratelimit-requests-limit", "1000"),
    ("anthropic-ratelimit-tokens-remaining", "99999"),
    ("cf-ray", "fake"),
    ("via", "1.1 fake"),
    ("anthropic-organization-id", "org-fake"),
];

/// State shared by the handle, the accept loop and every connection.
pub(crate) struct Shared {
    rendered: RwLock<Arc<Rendered>>,
    faults: Mutex<VecDeque<Fault>>,
    /// Credentials answered with a fixed status (a revoked or rate-limited key).
    key_refusals: Mutex<HashMap<String, (u16, Option<u32>)>>,
    pub(crate) records: RecordStore,
    recording: AtomicBool,
    next_id: AtomicU64,
    /// Tokens the federation exchange issued.
    pub(crate) issued: crate::platform::Issued,
    /// Entra ID tokens issued by the fake, with their scope, oldest first.
    pub(crate) entra_tokens: Mutex<Vec<(String, String)>>,
    /// This instance's prompt cache (used when the config's `prompt_cache` is on).
    prompt_cache: PromptCache,
}

impl Shared {
    pub(crate) fn new(config: FakeConfig) -> Shared {
        Shared {
            rendered: RwLock::new(Arc::new(Rendered::new(config))),
            faults: Mutex::new(VecDeque::new()),
            key_refusals: Mutex::new(HashMap::new()),
            records: RecordStore::default(),
            recording: AtomicBool::new(true),
            next_id: AtomicU64::new(0),
            issued: crate::platform::Issued::default(),
            entra_tokens: Mutex::new(Vec::new()),
            prompt_cache: PromptCache::default(),
        }
    }

    pub(crate) fn rendered(&self) -> Arc<Rendered> {
        self.rendered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_config(&self, config: FakeConfig) {
        let r = Arc::new(Rendered::new(config));
        *self
            .rendered
            .write()
            .unwrap_or_else(PoisonError::into_inner) = r;
    }

    pub(crate) fn push_fault(&self, fault: Fault) {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(fault);
    }

    pub(crate) fn refuse_key(&self, key: &str, status: u16, retry_after: Option<u32>) {
        self.key_refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned(), (status, retry_after));
    }

    /// The refusal for the request's credential (`x-api-key` or `Authorization: Bearer`).
    fn key_refusal(&self, headers: &http::HeaderMap) -> Option<Response<FakeBody>> {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let key = text("x-api-key")
            .or_else(|| text("authorization").and_then(|v| v.strip_prefix("Bearer ")))?;
        let (status, retry_after) = *self
            .key_refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)?;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error_type = default_error_type(status.as_u16());
        let mut resp = error_response(status, error_type, default_error_message(error_type));
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        Some(resp)
    }

    pub(crate) fn pop_fault(&self) -> Option<Fault> {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    pub(crate) fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }
}

/// Accepts connections until `token` is cancelled; connections run on `tracker`.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    token: CancellationToken,
    tracker: TaskTracker,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let stream = tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let token = token.clone();
        let builder = builder.clone();
        let tls = tls.clone();
        tracker.spawn(async move {
            let svc = service_fn(move |req| handle(shared.clone(), req));
            let served = async {
                match tls {
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                    }
                    Some(tls) => {
                        if let Ok(stream) = tls.accept(stream).await {
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                    }
                }
            };
            tokio::select! {
                () = served => {}
                () = token.cancelled() => {}
            }
        });
    }
}

/// Anthropic error envelope response.
pub(crate) fn error_response(
    status: StatusCode,
    error_type: &str,
    message: &str,
) -> Response<FakeBody> {
    let body =
        serde_json::json!({"type": "error", "error": {"type": error_type, "message": message}});
    json_response(status, Bytes::from(body.to_string()))
}

pub(crate) fn json_response(status: StatusCode, body: Bytes) -> Response<FakeBody> {
    let mut resp = Response::new(FakeBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub(crate) fn empty_response(status: StatusCode) -> Response<FakeBody> {
    let mut resp = Response::new(FakeBody::empty());
    *resp.status_mut() = status;
    resp
}

fn add_request_id(resp: &mut Response<FakeBody>, id: u64) {
    if let Ok(v) = HeaderValue::try_from(format!("req_fake_{id}")) {
        resp.headers_mut()
            .insert(HeaderName::from_static("request-id"), v);
    }
}

fn add_upstream_headers(resp: &mut Response<FakeBody>) {
    for (name, value) in UPSTREAM_ONLY_HEADERS {
        resp.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
}

/// Entry point of every request.
async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<FakeBody>, Abort> {
    let (parts, body) = req.into_parts();
    if parts.uri.path().starts_with("/_fake/") {
        return control::handle(&shared, &parts, body).await;
    }
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(()),
        Err(_) => return Err(Abort), // client went away while sending
    };
    let recording = shared.recording.load(Ordering::Relaxed);
    let bytes = body.clone().unwrap_or_default();
    let value = if recording && !bytes.is_empty() {
        serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let probe = probe(&bytes, &value);
    let path = parts.uri.path();
    let record = RecordedRequest {
        method: parts.method.as_str().to_owned(),
        path: path.to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: value,
        body_bytes: body.as_ref().map_or(MAX_BODY_BYTES, Bytes::len),
    };
    let index = shared.records.lock().push_request(record);
    if body.is_err() {
        return Ok(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            default_error_message("request_too_large"),
        ));
    }
    if parts.method == Method::POST
        && let Some(resp) = shared.key_refusal(&parts.headers)
    {
        return Ok(resp);
    }
    if let Some(entra) = crate::entra::classify(&parts.method, path) {
        let host = parts
            .headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()))
            .unwrap_or_default();
        return Ok(crate::entra::serve(&shared, entra, host, &bytes));
    }
    if parts.method == Method::POST
        && let Some(face) = crate::platform::classify(path)
    {
        return crate::platform::serve(&shared, face, &parts.headers, &bytes, index).await;
    }
    if parts.method == Method::POST
        && let Some(resp) = crate::platform::federated_refusal(&shared, &parts.headers)
    {
        return Ok(resp);
    }
    if parts.method == Method::POST
        && let Some(cloud) = crate::clouds::classify(path, &parts.headers)
    {
        return crate::clouds::serve(&shared, cloud, &parts.headers, &bytes, index).await;
    }
    if parts.method == Method::POST
        && let Some(resp) =
            crate::strict::messages_refusal(&shared, index, path, &parts.headers, &bytes)
    {
        return Ok(resp);
    }
    match (&parts.method, path) {
        (&Method::POST, "/v1/messages") => {
            let on = shared.rendered().config.prompt_cache;
            let cached = prompt_cache::usage(&shared.prompt_cache, on, &bytes);
            inference_with(&shared, false, index, probe, cached).await
        }
        (&Method::POST, "/v1/messages/count_tokens") => {
            inference(&shared, true, index, probe).await
        }
        (&Method::POST, "/v1/chat/completions") => {
            let n = shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
            let body = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            crate::openai::serve(&shared, (&body, &bytes), index, n)
        }
        (&Method::GET, "/v1/models") => Ok(json_response(
            StatusCode::OK,
            Bytes::from_static(MODELS_BODY.as_bytes()),
        )),
        (method, path) => Ok(error_response(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("Not found: {method} {path}"),
        )),
    }
}

/// The fields of a Messages request the fake cares about.
#[derive(Deserialize)]
pub(crate) struct Probe {
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    /// The conversation returned tool results (read only from a parsed body: recording on).
    #[serde(skip)]
    pub(crate) answers_tool: bool,
    /// The messages after the last assistant message return tool results (the turn's tools
    /// ran, rather than a new prompt arriving).
    #[serde(skip)]
    pub(crate) last_answers_tool: bool,
    /// The request asks for thinking.
    #[serde(skip)]
    pub(crate) thinking: bool,
}

/// Whether a Messages body's conversation already returned tool results: its tools ran,
/// so the scripted calls are not made again (a later turn of the same conversation, such
/// as Claude Code's notice that a background subagent finished, gets the plain reply).
pub(crate) fn answers_tool(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
        })
    })
}

/// Whether the messages after the last assistant message return tool results: the turn's
/// tools ran (rather than a new prompt arriving).
fn last_answers_tool(body: &Value) -> bool {
    let Some(messages) = body["messages"].as_array() else {
        return false;
    };
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    messages[since..].iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    })
}

impl Probe {
    /// The fields of a parsed body; `None` when it is not an object.
    pub(crate) fn of(value: &Value) -> Option<Probe> {
        let obj = value.as_object()?;
        Some(Probe {
            model: obj.get("model").and_then(Value::as_str).map(str::to_owned),
            stream: obj.get("stream").and_then(Value::as_bool),
            ..Probe::of_conversation(value)
        })
    }

    /// What a body's conversation says, with the model and streaming given by the caller
    /// (the cloud faces name them in the path).
    pub(crate) fn of_conversation(value: &Value) -> Probe {
        Probe {
            model: None,
            stream: None,
            answers_tool: answers_tool(value),
            last_answers_tool: last_answers_tool(value),
            thinking: crate::strict::wants_thinking(value),
        }
    }

    /// Whether the scripted tool calls were already answered, under `config`'s rule.
    fn tools_answered(&self, config: &FakeConfig) -> bool {
        if config.tool_uses_every_turn {
            self.last_answers_tool
        } else {
            self.answers_tool
        }
    }
}

/// Extracts model/stream from the already parsed `value` or, when it is not
/// available (recording off), from the raw bytes. `None` = not a JSON object.
fn probe(bytes: &[u8], value: &Value) -> Option<Probe> {
    if value.is_object() {
        return Probe::of(value);
    }
    if !value.is_null() || bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(bytes).ok()
}

/// `/v1/messages` (`count_tokens == false`) and `/v1/messages/count_tokens`.
pub(crate) async fn inference(
    shared: &Shared,
    count_tokens: bool,
    index: usize,
    probe: Option<Probe>,
) -> Result<Response<FakeBody>, Abort> {
    inference_with(shared, count_tokens, index, probe, None).await
}

/// [`inference`], answering with the prompt cache's usage when there is one.
async fn inference_with(
    shared: &Shared,
    count_tokens: bool,
    index: usize,
    probe: Option<Probe>,
    cached: Option<CacheUsage>,
) -> Result<Response<FakeBody>, Abort> {
    let mut rendered = shared.rendered();
    if let (Some(after), Some(true)) = (
        rendered.after_tool_result.clone(),
        probe.as_ref().map(|p| p.tools_answered(&rendered.config)),
    ) {
        rendered = after;
    }
    if let Some(usage) = cached {
        rendered = Arc::new(Rendered::new(usage.config(&rendered.config)));
    }
    if let (Some(thinking), Some(true)) = (
        rendered.thinking.clone(),
        probe.as_ref().map(|p| p.thinking && !count_tokens),
    ) {
        rendered = thinking;
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let mut delay = rendered.config.header_delay_ms;
    let mut stream_fault = StreamFault::None;
    let mut status_fault = None;
    match shared.pop_fault() {
        None => {}
        Some(Fault::ResetBeforeHeaders) => return Err(Abort),
        Some(Fault::HangBeforeHeaders { ms }) => delay = delay.saturating_add(ms),
        Some(Fault::MidStreamError { after_deltas }) => {
            stream_fault = StreamFault::Error(after_deltas)
        }
        Some(Fault::ResetMidStream { after_deltas }) => {
            stream_fault = StreamFault::Reset(after_deltas)
        }
        Some(Fault::Status {
            status,
            retry_after,
            error_type,
            message,
        }) => {
            status_fault = Some((status, retry_after, error_type, message));
        }
    }
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let mut resp = if let Some((status, retry_after, error_type, message)) = status_fault {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error_type =
            error_type.unwrap_or_else(|| default_error_type(status.as_u16()).to_owned());
        let message = message.unwrap_or_else(|| default_error_message(&error_type).to_owned());
        let mut resp = error_response(status, &error_type, &message);
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    } else if let Some(probe) = probe {
        let mut resp = answer(
            shared,
            &rendered,
            count_tokens,
            index,
            id,
            &probe,
            stream_fault,
        );
        add_upstream_headers(&mut resp);
        resp
    } else {
        error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "Request body is not a valid JSON object",
        )
    };
    add_request_id(&mut resp, id);
    Ok(resp)
}

/// A successful (possibly mid-stream faulted) answer to a valid request.
fn answer(
    shared: &Shared,
    rendered: &Arc<Rendered>,
    count_tokens: bool,
    index: usize,
    id: u64,
    probe: &Probe,
    fault: StreamFault,
) -> Response<FakeBody> {
    let overloaded = || {
        error_response(
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            "overloaded_error",
            "Overloaded",
        )
    };
    if count_tokens {
        let body = rendered.count_tokens_body.clone();
        return match fault {
            StreamFault::None => json_response(StatusCode::OK, body),
            StreamFault::Error(_) => overloaded(),
            StreamFault::Reset(_) => truncated_json(body),
        };
    }
    let model = rendered.model_json(probe.model.as_deref());
    if probe.stream == Some(true) {
        let tracker = StreamTracker::start(&shared.records, index, rendered.stream_usage.clone());
        let start = rendered.message_start(id, &model);
        let body = SseBody::new(rendered.clone(), start, fault, tracker);
        let mut resp = Response::new(FakeBody::Sse(Box::new(body)));
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return resp;
    }
    if let StreamFault::Error(_) = fault {
        return overloaded();
    }
    let tracker = StreamTracker::start(&shared.records, index, rendered.json_usage.clone());
    let body = rendered.json_message(id, &model);
    if let StreamFault::Reset(_) = fault {
        return truncated_json(body);
    }
    tracker.complete();
    json_response(StatusCode::OK, body)
}

/// 200 JSON answer cut after half its body, then a connection abort.
fn truncated_json(body: Bytes) -> Response<FakeBody> {
    let half = body.slice(..body.len() / 2);
    let mut resp = Response::new(FakeBody::truncated(half));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
