//! The browser pages of sign-in: plain, accessible HTML without script, under a strict CSP.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

fn page(status: StatusCode, title: &str, body: &str, form_origin: Option<&str>) -> Response<Body> {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{t} · Gatehouse</title><link rel=\"stylesheet\" href=\"/status.css\"></head>\
<body><main>{body}</main></body></html>\n",
        t = escape(title)
    );
    // Form submissions, and the redirect that follows one, may only go to this origin
    // and the identity provider.
    let form_action = match form_origin {
        Some(o) => format!("'self' {o}"),
        None => "'self'".to_owned(),
    };
    let csp = format!(
        "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action {form_action}"
    );
    let mut resp = Response::new(Body::from(html));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    resp
}

/// The code entry form. It is never submitted automatically (RFC 8628 section 5.4).
pub fn device_form(
    status: StatusCode,
    code: &str,
    error: Option<&str>,
    idp_origin: &str,
) -> Response<Body> {
    let err = error
        .map(|e| {
            format!(
                "<p class=\"error\" role=\"alert\" id=\"error\">{}</p>",
                escape(e)
            )
        })
        .unwrap_or_default();
    let body = format!(
        "<h1>Sign in to Gatehouse</h1>\
<p class=\"sub\">Check that the code below is the one your terminal or Claude Code shows, then continue to your company sign-in.</p>\
{err}<form method=\"post\" action=\"/device\">\
<label for=\"user_code\">Code</label> \
<input name=\"user_code\" id=\"user_code\" value=\"{code}\" autocomplete=\"off\" autocapitalize=\"characters\" spellcheck=\"false\" required maxlength=\"16\"> \
<button type=\"submit\" id=\"continue\">Continue</button></form>",
        code = escape(code)
    );
    page(status, "Sign in", &body, Some(idp_origin))
}

pub fn result(status: StatusCode, ok: bool, detail: &str) -> Response<Body> {
    let (title, heading) = if ok {
        ("Signed in", "Signed in")
    } else {
        ("Sign-in failed", "Sign-in failed")
    };
    let body = format!(
        "<h1 id=\"result\">{heading}</h1><p id=\"detail\">{}</p>",
        escape(detail)
    );
    page(status, title, &body, None)
}

/// A team console sign-in that did not complete, with the way back.
pub fn console_result(status: StatusCode, detail: &str) -> Response<Body> {
    let body = format!(
        "<h1 id=\"result\">Console sign-in failed</h1><p id=\"detail\">{}</p>\
<p><a href=\"/console\" id=\"back\">Back to the console</a></p>",
        escape(detail)
    );
    page(status, "Console sign-in failed", &body, None)
}
