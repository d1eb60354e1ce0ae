//! What went wrong with a request, in words that say what to do about it.

use std::io;

/// An object store's failure. The message names the endpoint and the fix;
/// the caller puts the object's URL in front.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The setup is wrong before any request is made (the URL, the
    /// endpoint, the credentials' sources).
    #[error("{0}")]
    Config(String),
    #[error("{message}")]
    Request {
        kind: io::ErrorKind,
        message: String,
    },
}

/// What the server said: the code in an S3 error body.
fn s3_code(text: &str) -> Option<&str> {
    let from = text.find("<Code>")? + "<Code>".len();
    let len = text[from..].find("</Code>")?;
    Some(&text[from..from + len])
}

/// The text of `e` and of every error under it.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// Whether a client error under `e` is a failure to reach the server.
fn unreachable(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = next {
        if let Some(h) = s.downcast_ref::<object_store::client::HttpError>() {
            return matches!(
                h.kind(),
                object_store::client::HttpErrorKind::Connect
                    | object_store::client::HttpErrorKind::Timeout
            );
        }
        next = s.source();
    }
    false
}

impl ObjectError {
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ObjectError::Config(_) => io::ErrorKind::InvalidInput,
            ObjectError::Request { kind, .. } => *kind,
        }
    }

    /// Whether the store could not be reached at all (it is down, or the
    /// network is), as opposed to a refusal.
    pub fn is_unreachable(&self) -> bool {
        self.kind() == io::ErrorKind::NotConnected
    }

    /// `e`, from a request to `bucket` at `endpoint`.
    pub fn from_store(bucket: &str, endpoint: &str, e: object_store::Error) -> ObjectError {
        use object_store::Error as E;
        let text = chain_text(&e);
        let code = s3_code(&text).map(str::to_string);
        let said = code
            .as_deref()
            .map(|c| format!(" (the server says {c})"))
            .unwrap_or_default();
        let (kind, message) = match &e {
            _ if code.as_deref() == Some("NoSuchBucket") => (
                io::ErrorKind::Other,
                format!(
                    "the bucket {bucket} does not exist at {endpoint}: create it first (`aws s3 \
                     mb s3://{bucket}`, or the store's own tool), or check the bucket's name and \
                     the endpoint (--s3-endpoint, AWS_ENDPOINT_URL)"
                ),
            ),
            E::NotFound { .. } => (
                io::ErrorKind::NotFound,
                format!("no such object in the bucket {bucket} at {endpoint}"),
            ),
            E::Unauthenticated { .. } | E::PermissionDenied { .. } => (
                io::ErrorKind::PermissionDenied,
                format!(
                    "access to the bucket {bucket} was refused by {endpoint}{said}: check the \
                     credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, with \
                     AWS_SESSION_TOKEN for temporary ones; or the profile AWS_PROFILE names in \
                     ~/.aws/credentials) and that they may read, write and list \
                     s3://{bucket}"
                ),
            ),
            E::Generic { source, .. } if unreachable(source.as_ref()) => (
                io::ErrorKind::NotConnected,
                format!(
                    "cannot reach the S3 endpoint {endpoint} ({}): is the server running and \
                     the endpoint right (--s3-endpoint, AWS_ENDPOINT_URL)?",
                    short_cause(&text)
                ),
            ),
            _ if code.is_some() => (
                io::ErrorKind::Other,
                format!(
                    "{endpoint} refused the request{said}: {}",
                    short_cause(&text)
                ),
            ),
            _ => (io::ErrorKind::Other, format!("{endpoint}: {text}")),
        };
        ObjectError::Request { kind, message }
    }
}

/// The innermost part of an error chain's text, which names the cause.
fn short_cause(text: &str) -> &str {
    text.rsplit(": ")
        .find(|p| !p.trim().is_empty())
        .unwrap_or(text)
        .trim()
}

impl From<ObjectError> for io::Error {
    fn from(e: ObjectError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_code_is_found() {
        let body = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?>\
                    <Error><Code>InvalidAccessKeyId</Code><Message>x</Message></Error>";
        assert_eq!(s3_code(body), Some("InvalidAccessKeyId"));
        assert_eq!(s3_code("no xml"), None);
        assert_eq!(
            short_cause("a: b: Connection refused (os error 111)"),
            "Connection refused (os error 111)"
        );
    }
}
