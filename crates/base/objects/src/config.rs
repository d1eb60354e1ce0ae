//! How a bucket's client is set up: the way the AWS tools do it.
//!
//! - **Credentials**: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
//!   `AWS_SESSION_TOKEN`; else the profile `AWS_PROFILE` names (`default`
//!   when unset) in `~/.aws/credentials` and `~/.aws/config`
//!   (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`); else what
//!   `object_store` finds itself: web identity, the container's or the
//!   instance's role.
//! - **Endpoint**: `--s3-endpoint` ([`set_endpoint`]), else
//!   `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's
//!   `endpoint_url`; none means AWS itself. A self-hosted store (MinIO,
//!   Ceph, Garage, versitygw) is addressed path-style
//!   (`ENDPOINT/BUCKET/KEY`), which every one of them serves.
//! - **HTTPS** by default; plain HTTP only to the loopback (a store on the
//!   same machine) or with `AWS_ALLOW_HTTP=true`: credentials are signed,
//!   not encrypted, and the data would cross the network in the clear.
//! - **Region**: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's
//!   `region`, else `us-east-1` (what self-hosted stores expect).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, Checksum};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::ObjectError;

static ENDPOINT: Mutex<Option<String>> = Mutex::new(None);

/// The endpoint of every bucket opened after (`--s3-endpoint`).
pub fn set_endpoint(url: &str) {
    *ENDPOINT.lock().unwrap_or_else(|e| e.into_inner()) = Some(url.to_string());
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

/// One profile's keys, from the credentials file and the config file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub keys: HashMap<String, String>,
}

/// The sections of an AWS INI file: `[name]` to its `key = value` lines.
fn ini_sections(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
            continue;
        }
        if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
            out.entry(section.clone())
                .or_default()
                .insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    out
}

/// The profile `AWS_PROFILE` names (or `default`), if either file has it.
pub fn profile() -> Option<Profile> {
    let name = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)))
    };
    let mut keys = HashMap::new();
    // The config file names its sections `profile NAME` (but `default`).
    if let Some(text) =
        file("AWS_CONFIG_FILE", ".aws/config").and_then(|p| std::fs::read_to_string(p).ok())
    {
        let mut sections = ini_sections(&text);
        let section = sections
            .remove(&format!("profile {name}"))
            .or_else(|| sections.remove(&name));
        keys.extend(section.unwrap_or_default());
    }
    if let Some(text) = file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")
        .and_then(|p| std::fs::read_to_string(p).ok())
    {
        keys.extend(ini_sections(&text).remove(&name).unwrap_or_default());
    }
    (!keys.is_empty()).then_some(Profile { name, keys })
}

/// Whether `url`'s host is this machine's loopback.
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The client of bucket `bucket`, and where it sends requests (for
/// messages).
pub fn client(bucket: &str) -> Result<(AmazonS3, String), ObjectError> {
    // Client options first: setting them replaces every one of them,
    // allow_http (below) included.
    let options = ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(300));
    let mut b = AmazonS3Builder::from_env()
        .with_client_options(options)
        .with_bucket_name(bucket);
    let profile = if env("AWS_ACCESS_KEY_ID").is_none() {
        profile()
    } else {
        None
    };
    let from_profile = |k: &str| profile.as_ref().and_then(|p| p.keys.get(k).cloned());
    if let (Some(id), Some(secret)) = (
        from_profile("aws_access_key_id"),
        from_profile("aws_secret_access_key"),
    ) {
        b = b.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(t) = from_profile("aws_session_token") {
            b = b.with_token(t);
        }
    }
    let region = env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| from_profile("region"))
        .unwrap_or_else(|| "us-east-1".into());
    b = b.with_region(&region);
    let endpoint = ENDPOINT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| env("AWS_ENDPOINT"))
        .or_else(|| from_profile("endpoint_url"));
    let shown = match &endpoint {
        Some(e) => {
            let e = e.trim_end_matches('/').to_string();
            let http = e.starts_with("http://");
            if !http && !e.starts_with("https://") {
                return Err(ObjectError::Config(format!(
                    "the S3 endpoint {e} is not a URL: give https://HOST[:PORT] (--s3-endpoint \
                     or AWS_ENDPOINT_URL)"
                )));
            }
            let allowed = env("AWS_ALLOW_HTTP").is_some_and(|v| v.eq_ignore_ascii_case("true"));
            if http && !allowed && !is_loopback(&e) {
                return Err(ObjectError::Config(format!(
                    "the S3 endpoint {e} is plain HTTP to another machine: the data and the \
                     signed requests would cross the network unencrypted. Use https://, or set \
                     AWS_ALLOW_HTTP=true to allow it"
                )));
            }
            // Path-style: self-hosted stores seldom have a name per bucket.
            b = b
                .with_endpoint(&e)
                .with_allow_http(http)
                .with_virtual_hosted_style_request(false);
            e
        }
        None => format!("AWS S3 (region {region})"),
    };
    // Each request's body travels with its SHA-256, which the server
    // checks (x-amz-checksum-sha256; every part of a multipart upload).
    b = b.with_checksum_algorithm(Checksum::SHA256);
    // A store that does not answer is said so within seconds, not after
    // the default's three minutes of retries.
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 3,
        retry_timeout: Duration::from_secs(20),
    };
    let store = b
        .with_retry(retry)
        .build()
        .map_err(|e| ObjectError::Config(format!("s3://{bucket}: {e}")))?;
    Ok((store, shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_is_told_from_other_hosts() {
        for u in [
            "http://127.0.0.1:7070",
            "http://localhost:9000/",
            "http://[::1]:80",
            "http://key@127.0.0.2",
        ] {
            assert!(is_loopback(u), "{u}");
        }
        for u in [
            "http://10.0.0.1:7070",
            "https://s3.example.org",
            "http://[fe80::1]",
        ] {
            assert!(!is_loopback(u), "{u}");
        }
    }

    #[test]
    fn ini_files_give_their_sections() {
        let s = ini_sections(
            "# c\n[default]\naws_access_key_id = A\n[profile lab]\nregion=eu-west-1\n\
             endpoint_url = http://127.0.0.1:9000\n",
        );
        assert_eq!(s["default"]["aws_access_key_id"], "A");
        assert_eq!(s["profile lab"]["endpoint_url"], "http://127.0.0.1:9000");
    }
}
