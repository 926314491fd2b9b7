//! The cloud faces of the fake: Amazon Bedrock (`/model/{id}/invoke`,
//! `/model/{id}/invoke-with-response-stream` in AWS event-stream framing with CRCs,
//! `/model/{id}/count-tokens`), Vertex AI (`.../publishers/anthropic/models/{m}:rawPredict`,
//! `:streamRawPredict`, `count-tokens:rawPredict`, and a service-account token endpoint at
//! `/token`), Microsoft Foundry (`/anthropic/v1/messages`) and the Messages API on AWS
//! ([`crate::aws_faces`]: Bedrock Mantle, Claude Platform on AWS). Each checks what its real
//! service requires before answering: a SigV4 `Authorization` or a bearer token (Bedrock),
//! a bearer token (Vertex), `x-api-key` or an Entra ID token the fake issued
//! ([`crate::entra`]) (Foundry), and the body shape (no `model`, an
//! `anthropic_version`). Answers are the same rendered messages as the Anthropic face.

use std::pin::Pin;
use std::task::{Context, Poll};

use aws_smithy_types::event_stream::{Header, HeaderValue as EsValue, Message};
use base64::Engine;
use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body::{Body, Frame};
use serde_json::{Value, json};

use crate::config::Fault;
use crate::server::{Probe, Shared, error_response, inference, json_response};
use crate::sse::{Abort, FakeBody};
use crate::strict::{Family, claude_refusal};

/// A request for one of the cloud faces.
pub(crate) enum Cloud {
    Bedrock {
        model: String,
        op: BedrockOp,
    },
    Vertex {
        model: String,
        op: VertexOp,
    },
    Foundry {
        count: bool,
    },
    Token,
    /// STS `AssumeRole` (form-encoded `POST /`).
    Sts,
    /// Bedrock Mantle or Claude Platform on AWS ([`crate::aws_faces`]).
    Aws {
        face: crate::aws_faces::AwsFace,
        count: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BedrockOp {
    Invoke,
    Stream,
    Count,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum VertexOp {
    Raw,
    Stream,
    Count,
}

/// A percent-decoded path segment (the SDK encodes `:` in model ids).
fn decode(segment: &str) -> String {
    let b = segment.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(v) if b[i] == b'%' => {
                out.push(v);
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cloud face a path (and, for the AWS faces, its headers) belongs to, if any.
pub(crate) fn classify(path: &str, headers: &HeaderMap) -> Option<Cloud> {
    if let Some((face, count)) = crate::aws_faces::classify(path, headers) {
        return Some(Cloud::Aws { face, count });
    }
    if path == "/token" {
        return Some(Cloud::Token);
    }
    if path == "/" {
        return Some(Cloud::Sts);
    }
    if let Some(rest) = path.strip_prefix("/anthropic/v1/messages") {
        return match rest {
            "" => Some(Cloud::Foundry { count: false }),
            "/count_tokens" => Some(Cloud::Foundry { count: true }),
            _ => None,
        };
    }
    if let Some(rest) = path.strip_prefix("/model/") {
        let (model, op) = rest.rsplit_once('/')?;
        let op = match op {
            "invoke" => BedrockOp::Invoke,
            "invoke-with-response-stream" => BedrockOp::Stream,
            "count-tokens" => BedrockOp::Count,
            _ => return None,
        };
        return Some(Cloud::Bedrock {
            model: decode(model),
            op,
        });
    }
    let (_, tail) = path.split_once("/publishers/anthropic/models/")?;
    let (model, verb) = tail.rsplit_once(':')?;
    let op = match (model, verb) {
        ("count-tokens", "rawPredict") => VertexOp::Count,
        (_, "rawPredict") => VertexOp::Raw,
        (_, "streamRawPredict") => VertexOp::Stream,
        _ => return None,
    };
    Some(Cloud::Vertex {
        model: decode(model),
        op,
    })
}

/// An error as AWS services send it: the type in `x-amzn-errortype`, `{"message"}`.
fn aws_error(status: StatusCode, kind: &str, message: &str) -> Response<FakeBody> {
    let mut r = json_response(status, Bytes::from(json!({"message": message}).to_string()));
    if let Ok(v) = HeaderValue::from_str(kind) {
        r.headers_mut().insert("x-amzn-errortype", v);
    }
    r
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// A count's body without its `model` (Vertex's count names the model in the body, as the
/// Messages API does; the strict key check is the rawPredict one).
fn without_model(body: &Value, count: bool) -> Value {
    let mut body = body.clone();
    if count && let Some(obj) = body.as_object_mut() {
        obj.remove("model");
    }
    body
}

fn body_shape_error(body: &Value, keeps_model: bool) -> Option<String> {
    let obj = body.as_object()?;
    if obj
        .get("anthropic_version")
        .and_then(Value::as_str)
        .is_none()
    {
        return Some("anthropic_version: field required".into());
    }
    if !keeps_model && obj.contains_key("model") {
        return Some("model: extraneous key (the model is in the URL)".into());
    }
    None
}

pub(crate) async fn serve(
    shared: &Shared,
    cloud: Cloud,
    headers: &HeaderMap,
    raw: &[u8],
    index: usize,
) -> Result<Response<FakeBody>, Abort> {
    let body = &serde_json::from_slice::<Value>(raw).unwrap_or(Value::Null);
    match cloud {
        Cloud::Token => Ok(token(shared)),
        Cloud::Sts => Ok(assume_role(headers, raw)),
        Cloud::Aws { face, count } => {
            crate::aws_faces::serve(shared, face, count, headers, (body, raw), index).await
        }
        Cloud::Foundry { count } => {
            let bearer = header(headers, "authorization").strip_prefix("Bearer ");
            let why = match (header(headers, "x-api-key"), bearer) {
                ("", None) => Some("missing x-api-key"),
                ("", Some(t)) if !crate::entra::issued_for_foundry(shared, t) => {
                    Some("the Entra ID token was not issued for this resource")
                }
                _ => None,
            };
            if let Some(why) = why {
                return Ok(error_response(
                    StatusCode::UNAUTHORIZED,
                    "authentication_error",
                    why,
                ));
            }
            let bytes = raw.len();
            if let Some(why) = claude_refusal(
                shared,
                index,
                Family::Anthropic,
                headers,
                body,
                bytes,
                count,
            ) {
                return Ok(error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &why,
                ));
            }
            let probe = Probe::of(body);
            inference(shared, count, index, probe).await
        }
        Cloud::Vertex { model, op } => {
            if !header(headers, "authorization").starts_with("Bearer ") {
                return Ok(error_response(
                    StatusCode::UNAUTHORIZED,
                    "authentication_error",
                    "missing bearer token",
                ));
            }
            let count = op == VertexOp::Count;
            let why = body_shape_error(body, count).or_else(|| {
                let body = &without_model(body, count);
                claude_refusal(
                    shared,
                    index,
                    Family::Vertex,
                    headers,
                    body,
                    raw.len(),
                    count,
                )
            });
            if let Some(why) = why {
                return Ok(error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &why,
                ));
            }
            let probe = Probe {
                model: Some(if count {
                    body["model"].as_str().unwrap_or_default().to_owned()
                } else {
                    model
                }),
                stream: Some(op == VertexOp::Stream),
                ..Probe::of_conversation(body)
            };
            inference(shared, op == VertexOp::Count, index, Some(probe)).await
        }
        Cloud::Bedrock { model, op } => {
            bedrock(shared, headers, (body, raw.len()), index, model, op).await
        }
    }
}

/// Bedrock: a SigV4 signature or a bearer key, an InvokeModel body, AWS-style errors.
async fn bedrock(
    shared: &Shared,
    headers: &HeaderMap,
    (body, bytes): (&Value, usize),
    index: usize,
    model: String,
    op: BedrockOp,
) -> Result<Response<FakeBody>, Abort> {
    let auth = header(headers, "authorization");
    if !auth.starts_with("AWS4-HMAC-SHA256 Credential=") && !auth.starts_with("Bearer ") {
        return Ok(aws_error(
            StatusCode::FORBIDDEN,
            "AccessDeniedException",
            "Missing Authentication Token",
        ));
    }
    if op == BedrockOp::Count {
        // A queued status fault makes the count fail as AWS would refuse it.
        if let Some(Fault::Status {
            status, message, ..
        }) = shared.pop_fault()
        {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
            let message =
                message.unwrap_or_else(|| "not authorized to perform: bedrock:CountTokens".into());
            return Ok(aws_error(status, "AccessDeniedException", &message));
        }
        return Ok(bedrock_count(shared, body));
    }
    if let Some(why) = body_shape_error(body, false) {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            &why,
        ));
    }
    if body.get("stream").is_some() {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "extraneous key [stream] is not permitted",
        ));
    }
    if model.starts_with("fake.unknown") {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The provided model identifier is invalid.",
        ));
    }
    if let Some(why) = claude_refusal(shared, index, Family::Bedrock, headers, body, bytes, false) {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            &why,
        ));
    }
    let probe = Probe {
        model: Some(model),
        stream: Some(op == BedrockOp::Stream),
        ..Probe::of_conversation(body)
    };
    let resp = inference(shared, false, index, Some(probe)).await?;
    Ok(bedrock_answer(resp))
}

/// `{"input":{"invokeModel":{"body":"<base64>"}}}` -> `{"inputTokens": N}`.
fn bedrock_count(shared: &Shared, body: &Value) -> Response<FakeBody> {
    let invoke = body["input"]["invokeModel"]["body"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let Some(inner) = invoke.and_then(|b| serde_json::from_slice::<Value>(&b).ok()) else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "input.invokeModel.body must be base64 JSON",
        );
    };
    if let Some(why) = body_shape_error(&inner, false) {
        return aws_error(StatusCode::BAD_REQUEST, "ValidationException", &why);
    }
    let n = shared.rendered().config.input_tokens;
    json_response(
        StatusCode::OK,
        Bytes::from(json!({"inputTokens": n}).to_string()),
    )
}

/// STS AssumeRole: temporary keys whose id names the role session (`ASIA` + its hex), so
/// a test can tell which session signed a later request.
fn assume_role(headers: &HeaderMap, form: &[u8]) -> Response<FakeBody> {
    if !header(headers, "authorization").starts_with("AWS4-HMAC-SHA256 Credential=") {
        return aws_error(StatusCode::FORBIDDEN, "AccessDenied", "missing signature");
    }
    let text = String::from_utf8_lossy(form);
    let field = |name: &str| {
        text.split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .map(decode)
    };
    if field("Action").as_deref() != Some("AssumeRole") {
        return aws_error(StatusCode::BAD_REQUEST, "InvalidAction", "only AssumeRole");
    }
    let session = field("RoleSessionName").unwrap_or_default();
    let role = field("RoleArn").unwrap_or_default();
    let key_id: String = format!(
        "ASIA{}",
        session
            .bytes()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    );
    let xml = format!(
        "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>\
         <Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>fake-secret</SecretAccessKey>\
         <SessionToken>fake-session-token</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>\
         <AssumedRoleUser><AssumedRoleId>AROAFAKE:{session}</AssumedRoleId><Arn>{role}/{session}</Arn></AssumedRoleUser>\
         </AssumeRoleResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></AssumeRoleResponse>"
    );
    let mut r = json_response(StatusCode::OK, Bytes::from(xml));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    r
}

fn token(shared: &Shared) -> Response<FakeBody> {
    let n = shared.rendered().config.input_tokens;
    json_response(
        StatusCode::OK,
        Bytes::from(json!({"access_token": format!("fake-google-token-{n}"), "expires_in": 3600, "token_type": "Bearer"}).to_string()),
    )
}

/// A Messages answer in Bedrock's shape: a stream re-framed as an event stream, an error
/// in AWS's error shape.
fn bedrock_answer(resp: Response<FakeBody>) -> Response<FakeBody> {
    let (mut parts, body) = resp.into_parts();
    if !parts.status.is_success() {
        let kind = match parts.status.as_u16() {
            429 => "ThrottlingException",
            400 => "ValidationException",
            403 => "AccessDeniedException",
            404 => "ResourceNotFoundException",
            503 | 529 => "ServiceUnavailableException",
            _ => "InternalServerException",
        };
        let mut out = aws_error(
            parts.status,
            kind,
            "upstream error for account 123456789012",
        );
        if let Some(v) = parts.headers.get(http::header::RETRY_AFTER) {
            out.headers_mut()
                .insert(http::header::RETRY_AFTER, v.clone());
        }
        return out;
    }
    let is_sse = parts
        .headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !is_sse {
        return Response::from_parts(parts, body);
    }
    parts.headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    parts.headers.insert(
        "x-amzn-bedrock-content-type",
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        FakeBody::EventStream(Box::new(EventStreamBody {
            inner: body,
            buf: BytesMut::new(),
        })),
    )
}

/// Re-frames an SSE body as AWS event-stream messages.
pub(crate) struct EventStreamBody {
    inner: FakeBody,
    buf: BytesMut,
}

fn encode(message: &Message) -> Bytes {
    let mut out = Vec::new();
    match aws_smithy_eventstream::frame::write_message_to(message, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(_) => Bytes::new(),
    }
}

fn string(name: &'static str, value: &'static str) -> Header {
    Header::new(name, EsValue::String(value.into()))
}

/// One SSE event (`event: x\ndata: {...}`) as an event-stream message; pings are dropped
/// (Bedrock sends none), `error` becomes an exception.
fn reframe(event: &[u8]) -> Option<Bytes> {
    let text = std::str::from_utf8(event).ok()?;
    let data = text.lines().find_map(|l| l.strip_prefix("data: "))?;
    let kind = text
        .lines()
        .find_map(|l| l.strip_prefix("event: "))
        .unwrap_or("message");
    match kind {
        "ping" => None,
        "error" => {
            let payload = json!({"message": "Model stream error for account 123456789012", "originalStatusCode": 529});
            let m = Message::new(Bytes::from(payload.to_string()))
                .add_header(string(":message-type", "exception"))
                .add_header(string(":exception-type", "modelStreamErrorException"))
                .add_header(string(":content-type", "application/json"));
            Some(encode(&m))
        }
        _ => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(data.as_bytes());
            let payload = json!({"bytes": b64, "p": "abcdefghij"});
            let m = Message::new(Bytes::from(payload.to_string()))
                .add_header(string(":event-type", "chunk"))
                .add_header(string(":content-type", "application/json"))
                .add_header(string(":message-type", "event"));
            Some(encode(&m))
        }
    }
}

impl Body for EventStreamBody {
    type Data = Bytes;
    type Error = Abort;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        let this = &mut *self;
        loop {
            // Whole events already buffered go out first.
            let mut out = BytesMut::new();
            while let Some(end) = this.buf.windows(2).position(|w| w == b"\n\n") {
                let event = this.buf.split_to(end + 2);
                if let Some(frame) = reframe(&event) {
                    out.extend_from_slice(&frame);
                }
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out.freeze()))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                other => return other,
            }
        }
    }
}
