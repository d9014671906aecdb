//! S3 settings beyond what `AmazonS3Builder::from_env` reads (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`, instance
//! credentials): the `-o endpoint=/region=` options, and a named profile of the shared
//! credentials and config files (`-o profile=`, `AWS_PROFILE`, `~/.aws/credentials`,
//! `~/.aws/config`), which object_store does not read. Nothing here is ever logged.

use std::collections::HashMap;
use std::path::PathBuf;

use object_store::aws::AmazonS3Builder;

use super::RemoteSettings;

pub(super) fn apply(
    mut b: AmazonS3Builder,
    settings: &RemoteSettings,
) -> Result<AmazonS3Builder, String> {
    let endpoint = settings
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    if let Some(e) = &endpoint {
        b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
    }
    let env_keys = std::env::var_os("AWS_ACCESS_KEY_ID").is_some();
    let profile = settings
        .profile
        .clone()
        .or_else(|| std::env::var("AWS_PROFILE").ok());
    // An explicit profile wins over the environment's keys; otherwise the keys win (as in the
    // AWS CLI), and the `default` profile is the fallback.
    let profile = match (profile, env_keys) {
        (Some(p), _) => Some((p, true)),
        (None, false) => Some(("default".to_string(), false)),
        (None, true) => None,
    };
    let mut region = settings.region.clone();
    if let Some((name, required)) = profile {
        let creds = section(
            &aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            &name,
        );
        let config_name = if name == "default" {
            name.clone()
        } else {
            format!("profile {name}")
        };
        let config = section(&aws_file("AWS_CONFIG_FILE", "config"), &config_name);
        match (
            creds.get("aws_access_key_id"),
            creds.get("aws_secret_access_key"),
        ) {
            (Some(id), Some(secret)) => {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(t) = creds.get("aws_session_token") {
                    b = b.with_token(t);
                }
            }
            _ if required => return Err(format!("profile '{name}' has no access keys")),
            _ => {}
        }
        if region.is_none() && std::env::var_os("AWS_REGION").is_none() {
            region = config.get("region").cloned();
        }
    }
    if let Some(r) = region {
        b = b.with_region(r);
    }
    Ok(b)
}

fn aws_file(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws").join(name))
}

/// The `key = value` pairs of `[name]` in an INI file (empty if either is missing).
fn section(path: &Option<PathBuf>, name: &str) -> HashMap<String, String> {
    let text = path
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    parse_section(&text, name)
}

fn parse_section(text: &str, name: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = h.trim() == name;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.insert(k.trim().to_lowercase(), v.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_section() {
        let text = "[default]\naws_access_key_id = A\n[profile p]\nregion=eu-west-1\n# c\n";
        assert_eq!(parse_section(text, "default")["aws_access_key_id"], "A");
        assert_eq!(parse_section(text, "profile p")["region"], "eu-west-1");
        assert!(parse_section(text, "other").is_empty());
    }
}
