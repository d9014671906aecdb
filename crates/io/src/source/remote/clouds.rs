//! Which store a URL names, and the client of each: S3 (`s3://`), Google Cloud Storage
//! (`gs://`), Azure Blob / ADLS Gen2 (`az://`, `abfs[s]://`, `https://ACCOUNT.blob.core.windows.net/`)
//! and any HTTP(S) server. Only the client differs: blocks, read-ahead, single-flight,
//! retries, ETag checks and the memory budget are `RemoteStorage`'s, the same for every cloud.
//!
//! Credentials are found as each cloud's own tools find them, by object_store's builders:
//! - S3: `AWS_*` variables, `-o profile=` / `~/.aws` (`credentials`), instance credentials;
//! - GCS: `GOOGLE_APPLICATION_CREDENTIALS` or `GOOGLE_SERVICE_ACCOUNT` (a service account's
//!   JSON), gcloud's application-default credentials, the metadata server;
//!   `STORAGE_EMULATOR_HOST` (the variable Google's clients honour) points at an emulator and
//!   sends no credentials;
//! - Azure: `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`, a service principal's
//!   `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`, workload identity, the Azure
//!   CLI (`AZURE_USE_AZURE_CLI=true`), managed identity; `AZURE_STORAGE_USE_EMULATOR=true` for
//!   Azurite.
//!
//! `-o anonymous` signs nothing (public buckets and containers); `-o endpoint=` points any of
//! them at an emulator or a private endpoint. No secret is ever logged or put in an error.

use std::sync::Arc;

use object_store::{ClientOptions, ObjectStore, RetryConfig};

use super::blocks::{self, plain};
use super::{credentials, endpoints, metadata, RemoteSettings};

/// The store a URL names, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Named<'a> {
    S3 {
        bucket: &'a str,
    },
    Gcs {
        bucket: &'a str,
    },
    /// `account`: `None` for `az://` (the environment names it).
    Azure {
        account: Option<&'a str>,
        container: &'a str,
    },
    Http,
    /// `hdfs://NAMENODE[:PORT]` or `hdfs://NAMESERVICE` (HA, from `HADOOP_CONF_DIR`), and
    /// `viewfs://CLUSTER`: HDFS's own RPC, by the pure-Rust `hdfs-native` client.
    Hdfs,
    /// `webhdfs://HOST[:PORT]` and `swebhdfs://…`: HDFS over the NameNode's REST API.
    WebHdfs,
}

/// Whether `source` is a URL of a store this module opens.
pub(super) fn is_url(source: &str) -> bool {
    [
        "s3://",
        "gs://",
        "az://",
        "azure://",
        "abfs://",
        "abfss://",
        "http://",
        "https://",
        "hdfs://",
        "viewfs://",
        "webhdfs://",
        "swebhdfs://",
    ]
    .iter()
    .any(|s| source.starts_with(s))
}

/// The store `url` names, the URL up to its key (`base`), and the key.
pub(super) fn parse(url: &str) -> Result<(Named<'_>, &str, &str), String> {
    if url.contains(['?', '#']) {
        // A SAS URL's query is a credential: not read, and never repeated (`shown`).
        return Err("a query in the URL is not read (a SAS token goes in \
                    AZURE_STORAGE_SAS_TOKEN)"
            .into());
    }
    let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
    let (host, key) = rest.split_once('/').unwrap_or((rest, ""));
    let base = &url[..scheme.len() + 3 + host.len()];
    let named = match scheme {
        "s3" => Named::S3 { bucket: host },
        "gs" => Named::Gcs { bucket: host },
        "az" | "azure" => Named::Azure {
            account: None,
            container: host,
        },
        // Hadoop's form, `abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/…`; fsspec's, without
        // the account, is `az://`'s.
        "abfs" | "abfss" => match host.split_once('@') {
            Some((container, h)) => Named::Azure {
                account: Some(
                    azure_account(h).ok_or_else(|| format!("{h} is not an Azure storage host"))?,
                ),
                container,
            },
            None => Named::Azure {
                account: None,
                container: host,
            },
        },
        "http" | "https" => match azure_account(host) {
            // `https://ACCOUNT.blob.core.windows.net/CONTAINER/…`: the container is the first
            // component of the path.
            Some(account) => {
                let (container, key) = key.split_once('/').unwrap_or((key, ""));
                let base = &url[..url.len() - key.len()];
                let named = Named::Azure {
                    account: Some(account),
                    container,
                };
                return check(named, base.trim_end_matches('/'), key);
            }
            None => Named::Http,
        },
        "hdfs" | "viewfs" => Named::Hdfs,
        "webhdfs" | "swebhdfs" => Named::WebHdfs,
        _ => return Err(format!("{scheme}:// is not a store modelfs reads")),
    };
    check(named, base, key)
}

fn check<'a>(
    named: Named<'a>,
    base: &'a str,
    key: &'a str,
) -> Result<(Named<'a>, &'a str, &'a str), String> {
    let empty = match &named {
        Named::S3 { bucket } | Named::Gcs { bucket } => bucket.is_empty(),
        Named::Azure { container, .. } => container.is_empty(),
        // `hdfs:///path`: the default cluster (`fs.defaultFS`).
        Named::Http => base.ends_with("://"),
        Named::Hdfs | Named::WebHdfs => false,
    };
    if empty {
        let what = match named {
            Named::Azure { .. } => "container",
            Named::Http => "host",
            _ => "bucket",
        };
        return Err(format!("no {what} in the URL"));
    }
    Ok((named, base, key.trim_end_matches('/')))
}

/// The account of an Azure storage host (`ACCOUNT.blob.core.windows.net`, `….dfs.…`; any
/// case, `:443` allowed).
fn azure_account(host: &str) -> Option<&str> {
    let host = host.strip_suffix(":443").unwrap_or(host);
    let (account, domain) = host.split_once('.')?;
    let azure = ["blob.core.windows.net", "dfs.core.windows.net"]
        .iter()
        .any(|d| d.eq_ignore_ascii_case(domain));
    (azure && !account.is_empty()).then_some(account)
}

/// `url` as it may be shown: without a query or a fragment (a SAS token is one).
pub(super) fn shown(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or("")
}

/// The clients of `named`, sharing their credentials: `store` with the retries of a read,
/// `first` with a short budget for a source's first requests (`RemoteStorage::first`).
pub(super) struct Clients {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) first: Arc<dyn ObjectStore>,
}

/// The clients of `named`. Every endpoint they would use is checked first (`endpoints`), and
/// one that would take its credentials from a metadata service only if one is there
/// (`metadata`).
pub(super) fn client(
    named: &Named<'_>,
    base: &str,
    settings: &RemoteSettings,
    [retry, quick]: [RetryConfig; 2],
    client: ClientOptions,
) -> Result<Clients, String> {
    let endpoint = settings.endpoint.as_deref();
    if let Some(e) = endpoint {
        endpoints::check("endpoint=", e)?;
    }
    let plain_http =
        |e: Option<&str>| e.is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"));
    let clients =
        |store: Arc<dyn ObjectStore>, first: Arc<dyn ObjectStore>| Clients { store, first };
    Ok(match *named {
        Named::S3 { bucket } => {
            use object_store::aws::AmazonS3ConfigKey as K;
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(client)
                .with_skip_signature(settings.anonymous);
            b = credentials::apply(b, settings)?;
            let keys = [
                K::Endpoint,
                K::S3Endpoint,
                K::MetadataEndpoint,
                K::StsEndpoint,
                K::ContainerCredentialsFullUri,
            ];
            endpoints::check_keys(&keys, |k| b.get_config_value(k), endpoint, "AWS_")?;
            let store = b.clone().with_retry(retry).build().map_err(|e| plain(&e))?;
            let first = b
                .with_retry(quick)
                .with_credentials(Arc::clone(store.credentials()));
            clients(
                Arc::new(store),
                Arc::new(first.build().map_err(|e| plain(&e))?),
            )
        }
        Named::Gcs { bucket } => {
            use object_store::gcp::GoogleConfigKey as K;
            let emulator = match std::env::var("STORAGE_EMULATOR_HOST") {
                // Google's convention is HOST:PORT, plain HTTP.
                Ok(h) if !h.is_empty() => {
                    let h = match h.contains("://") {
                        true => h,
                        false => format!("http://{h}"),
                    };
                    endpoints::check("STORAGE_EMULATOR_HOST", &h)?;
                    Some(h)
                }
                _ => None,
            };
            let endpoint = endpoint.map(str::to_string).or(emulator.clone());
            let unsigned = settings.anonymous || emulator.is_some();
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(client.with_allow_http(plain_http(endpoint.as_deref())))
                .with_skip_signature(unsigned);
            if let Some(e) = &endpoint {
                b = b.with_base_url(e);
            }
            endpoints::check_keys(
                &[K::BaseUrl],
                |k| b.get_config_value(k),
                endpoint.as_deref(),
                "GOOGLE_",
            )?;
            let store = b
                .clone()
                .with_retry(retry)
                .build()
                .map_err(|e| gcs_error(&e))?;
            if !unsigned && gcs_uses_metadata(&b) && !metadata::answers(&gcs_metadata_hosts()) {
                return Err(blocks::no_metadata_service("GCS"));
            }
            let first = b
                .with_retry(quick)
                .with_credentials(Arc::clone(store.credentials()));
            clients(
                Arc::new(store),
                Arc::new(first.build().map_err(|e| gcs_error(&e))?),
            )
        }
        Named::Azure { account, container } => {
            use object_store::azure::AzureConfigKey as K;
            let mut b = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(container)
                .with_client_options(client)
                .with_skip_signature(settings.anonymous);
            if let Some(a) = account {
                b = b.with_account(a);
            }
            if let Some(e) = endpoint {
                b = b.with_endpoint(e.trim_end_matches('/').to_string());
                b = b.with_allow_http(plain_http(Some(e)));
                // Azurite's and any account's endpoint names its account (`…/devstoreaccount1`,
                // `https://ACCOUNT.blob.core.windows.net`): taken when nothing else names one.
                if b.get_config_value(&K::AccountName).is_none() {
                    if let Some(a) = account_of_endpoint(e) {
                        b = b.with_account(a);
                    }
                }
            }
            let keys = [
                K::Endpoint,
                K::MsiEndpoint,
                K::AuthorityHost,
                K::FabricTokenServiceUrl,
            ];
            endpoints::check_keys(&keys, |k| b.get_config_value(k), endpoint, "AZURE_")?;
            let emulator = truthy(b.get_config_value(&K::UseEmulator));
            if let (true, Ok(u)) = (emulator, std::env::var("AZURITE_BLOB_STORAGE_URL")) {
                endpoints::check("AZURITE_BLOB_STORAGE_URL", &u)?;
            }
            let store = b
                .clone()
                .with_retry(retry)
                .build()
                .map_err(|e| azure_error(&e))?;
            if !settings.anonymous && !emulator && azure_uses_managed_identity(&b) {
                let host = b
                    .get_config_value(&K::MsiEndpoint)
                    .and_then(|u| metadata::host_of(&u));
                if !metadata::answers(&[host.unwrap_or_else(|| metadata::LINK_LOCAL.into())]) {
                    return Err(blocks::no_metadata_service("MicrosoftAzure"));
                }
            }
            let first = b
                .with_retry(quick)
                .with_credentials(Arc::clone(store.credentials()));
            clients(
                Arc::new(store),
                Arc::new(first.build().map_err(|e| azure_error(&e))?),
            )
        }
        Named::Hdfs => {
            // Users, Kerberos tickets and delegation tokens as Hadoop's own clients find them
            // (`HADOOP_USER_NAME`, `KRB5CCNAME`, `HADOOP_TOKEN_FILE_LOCATION`), the cluster's
            // settings from `HADOOP_CONF_DIR`; the client retries and fails over itself, within
            // our budgets unless the cluster's settings say otherwise.
            let build = |retry: &RetryConfig| {
                hdfs_native_object_store::HdfsObjectStoreBuilder::new()
                    .with_url(base)
                    .with_config(hdfs_retries(retry))
                    .build()
                    .map_err(|e| plain(&e))
            };
            clients(Arc::new(build(&retry)?), Arc::new(build(&quick)?))
        }
        Named::WebHdfs => {
            let store = super::webhdfs::WebHdfs::new(base, retry, client.clone())?;
            let first = super::webhdfs::WebHdfs::new(base, quick, client)?;
            clients(Arc::new(store), Arc::new(first))
        }
        Named::Http => {
            let b = object_store::http::HttpBuilder::new()
                .with_url(base)
                .with_client_options(client.with_allow_http(true));
            let store = b.clone().with_retry(retry).build().map_err(|e| plain(&e))?;
            let first = b.with_retry(quick).build().map_err(|e| plain(&e))?;
            clients(Arc::new(store), Arc::new(first))
        }
    })
}

/// hdfs-native's failover and retry settings for a retry budget: its defaults (15 attempts,
/// sleeps growing to 15 s) take three minutes to give up on a NameNode that does not answer.
/// The cluster's own `HADOOP_CONF_DIR` settings are kept.
fn hdfs_retries(retry: &RetryConfig) -> std::collections::HashMap<String, String> {
    let conf = super::hadoop_conf::HadoopConf::from_env();
    // Sleeps of 0.5, 1, 2, 2, … s: as many as the budget holds.
    let attempts = 1 + (retry.retry_timeout.as_millis() / 2000).max(2);
    [
        ("dfs.client.failover.max.attempts", attempts.to_string()),
        ("dfs.client.failover.sleep.base.millis", "500".into()),
        ("dfs.client.failover.sleep.max.millis", "2000".into()),
    ]
    .into_iter()
    .filter(|(k, _)| conf.get(k).is_none())
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Whether `v`, a flag of a builder, is on (object_store's spellings).
fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "1" | "true" | "on" | "yes" | "y"
        )
    })
}

/// The account an Azure endpoint names: the first component of its path (Azurite's
/// `http://HOST:PORT/ACCOUNT`), else its host's (`https://ACCOUNT.blob.core.windows.net`).
fn account_of_endpoint(endpoint: &str) -> Option<String> {
    let u = url::Url::parse(endpoint).ok()?;
    let first = u.path_segments()?.next().filter(|s| !s.is_empty());
    match first {
        Some(a) => Some(a.to_string()),
        None => azure_account(u.host_str()?).map(str::to_string),
    }
}

/// Whether a GCS client of `b` would ask the metadata server for its token: no service
/// account, no application-default credentials (object_store's order).
fn gcs_uses_metadata(b: &object_store::gcp::GoogleCloudStorageBuilder) -> bool {
    use object_store::gcp::GoogleConfigKey as K;
    let given = [
        K::ServiceAccount,
        K::ServiceAccountKey,
        K::ApplicationCredentials,
        K::BearerToken,
    ]
    .iter()
    .any(|k| b.get_config_value(k).is_some());
    let adc = std::env::var_os("HOME").is_some_and(|h| {
        std::path::Path::new(&h)
            .join(".config/gcloud/application_default_credentials.json")
            .exists()
    });
    !given && !adc
}

/// The metadata server as object_store asks it: `GCE_METADATA_HOST` (or `_ROOT`) first, then
/// `GCE_METADATA_IP` or the link-local address. Its default name is not looked up: off GCE the
/// name does not resolve (or waits on DNS), on GCE the address answers.
fn gcs_metadata_hosts() -> Vec<String> {
    let var = |v: &str| std::env::var(v).ok().filter(|h| !h.is_empty());
    let host = var("GCE_METADATA_HOST").or_else(|| var("GCE_METADATA_ROOT"));
    let ip = var("GCE_METADATA_IP").unwrap_or_else(|| metadata::LINK_LOCAL.into());
    host.into_iter().chain([ip]).collect()
}

/// Whether an Azure client of `b` would take a managed identity's token (the last of
/// object_store's `resolve_credential_auto`, or asked for by name).
fn azure_uses_managed_identity(b: &object_store::azure::MicrosoftAzureBuilder) -> bool {
    use object_store::azure::AzureConfigKey as K;
    let has = |k: K| b.get_config_value(&k).is_some_and(|v| !v.is_empty());
    match b.get_config_value(&K::CredentialType).as_deref() {
        None | Some("auto") => {}
        Some(t) => return t == "managed_identity",
    }
    let principal = has(K::ClientId) && has(K::AuthorityId);
    let other = has(K::Token)
        || has(K::AccessKey)
        || (principal && (has(K::FederatedTokenFile) || has(K::ClientSecret)))
        || has(K::SasKey)
        || has(K::FabricTokenServiceUrl)
        || truthy(b.get_config_value(&K::UseAzureCli));
    !other
}

/// Where the credentials of `named` come from, as a refusal says it (`AZURE_STORAGE_ACCOUNT_KEY`,
/// `the metadata server`): the first source the client takes, in its own order. Names only,
/// never a value.
pub(super) fn credential_source(named: &Named<'_>, settings: &RemoteSettings) -> String {
    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty());
    let first = |sources: &[(&'static str, bool)], otherwise: &'static str| {
        sources
            .iter()
            .find(|(_, on)| *on)
            .map_or(otherwise, |(name, _)| name)
    };
    if settings.anonymous {
        return "none (-o anonymous)".into();
    }
    let source = match named {
        Named::S3 { .. } => match &settings.profile {
            Some(p) => return format!("profile {p}"),
            None => first(
                &[
                    ("AWS_ACCESS_KEY_ID", set("AWS_ACCESS_KEY_ID")),
                    ("AWS_PROFILE", set("AWS_PROFILE")),
                ],
                "~/.aws/credentials or the instance's role",
            ),
        },
        Named::Gcs { .. } => first(
            &[
                ("none (STORAGE_EMULATOR_HOST)", set("STORAGE_EMULATOR_HOST")),
                ("GOOGLE_SERVICE_ACCOUNT", set("GOOGLE_SERVICE_ACCOUNT")),
                (
                    "GOOGLE_SERVICE_ACCOUNT_KEY",
                    set("GOOGLE_SERVICE_ACCOUNT_KEY"),
                ),
                (
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    set("GOOGLE_APPLICATION_CREDENTIALS"),
                ),
            ],
            "gcloud's application-default credentials or the metadata server",
        ),
        // object_store's order (`resolve_credential_auto`).
        Named::Azure { .. } => {
            let principal = set("AZURE_CLIENT_ID") && set("AZURE_TENANT_ID");
            let emulator = "AZURE_STORAGE_USE_EMULATOR (the emulator's key)";
            let workload = "workload identity (AZURE_FEDERATED_TOKEN_FILE)";
            let secret = "the service principal (AZURE_CLIENT_SECRET)";
            first(
                &[
                    (emulator, set("AZURE_STORAGE_USE_EMULATOR")),
                    ("AZURE_STORAGE_TOKEN", set("AZURE_STORAGE_TOKEN")),
                    (
                        "AZURE_STORAGE_ACCOUNT_KEY",
                        set("AZURE_STORAGE_ACCOUNT_KEY"),
                    ),
                    (workload, principal && set("AZURE_FEDERATED_TOKEN_FILE")),
                    (secret, principal && set("AZURE_CLIENT_SECRET")),
                    ("AZURE_STORAGE_SAS_TOKEN", set("AZURE_STORAGE_SAS_TOKEN")),
                    ("the Azure CLI", set("AZURE_USE_AZURE_CLI")),
                ],
                "managed identity",
            )
        }
        Named::Http => "none",
        Named::Hdfs => {
            let kerberos = super::hadoop_conf::HadoopConf::from_env()
                .get("hadoop.security.authentication")
                .is_some_and(|a| a.eq_ignore_ascii_case("kerberos"));
            first(
                &[
                    ("a Kerberos ticket (KRB5CCNAME)", set("KRB5CCNAME")),
                    (
                        "delegation tokens (HADOOP_TOKEN_FILE_LOCATION)",
                        set("HADOOP_TOKEN_FILE_LOCATION"),
                    ),
                    // HADOOP_CONF_DIR says Kerberos: the GSSAPI library's default cache.
                    ("a Kerberos ticket (the default cache)", kerberos),
                    ("HADOOP_USER_NAME", set("HADOOP_USER_NAME")),
                ],
                "the login user (simple authentication)",
            )
        }
        Named::WebHdfs => first(
            &[("HADOOP_USER_NAME", set("HADOOP_USER_NAME"))],
            "the login user (simple authentication)",
        ),
    };
    source.to_string()
}

/// A GCS client that could not be made, said with what was tried.
fn gcs_error(e: &object_store::Error) -> String {
    format!(
        "{} (credentials tried: GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT, \
         gcloud's application-default credentials, the metadata server; -o anonymous for a \
         public bucket)",
        plain(e)
    )
}

/// An Azure client that could not be made, said with what was tried.
fn azure_error(e: &object_store::Error) -> String {
    let text = plain(e);
    if text.contains("account") || text.contains("Account") {
        return format!(
            "{text} (az:// names no account: set AZURE_STORAGE_ACCOUNT_NAME, or use \
             abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/…)"
        );
    }
    format!(
        "{text} (credentials tried: AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, \
         AZURE_CLIENT_ID/SECRET/TENANT_ID, workload identity, managed identity; \
         AZURE_USE_AZURE_CLI=true for the Azure CLI's; -o anonymous for a public container)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> (Named<'_>, &str, &str) {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn every_url_form_names_its_store_base_and_key() {
        let azure = |account, container| Named::Azure { account, container };
        let cases = [
            (
                "s3://b/m/ckpt",
                Named::S3 { bucket: "b" },
                "s3://b",
                "m/ckpt",
            ),
            ("gs://b/runs/", Named::Gcs { bucket: "b" }, "gs://b", "runs"),
            ("gs://b", Named::Gcs { bucket: "b" }, "gs://b", ""),
            ("hdfs://nn:8020/a/m", Named::Hdfs, "hdfs://nn:8020", "a/m"),
            ("hdfs://ns1/a", Named::Hdfs, "hdfs://ns1", "a"),
            ("hdfs:///a/m", Named::Hdfs, "hdfs://", "a/m"),
            ("viewfs://c/a", Named::Hdfs, "viewfs://c", "a"),
            (
                "webhdfs://nn:9870/a/m",
                Named::WebHdfs,
                "webhdfs://nn:9870",
                "a/m",
            ),
            ("swebhdfs://ns1/a", Named::WebHdfs, "swebhdfs://ns1", "a"),
            ("webhdfs:///a", Named::WebHdfs, "webhdfs://", "a"),
            ("az://c/m", azure(None, "c"), "az://c", "m"),
            ("abfs://c/m", azure(None, "c"), "abfs://c", "m"),
            (
                "abfss://c@acct.dfs.core.windows.net/m/x",
                azure(Some("acct"), "c"),
                "abfss://c@acct.dfs.core.windows.net",
                "m/x",
            ),
            (
                "https://acct.blob.core.windows.net/c/m/x",
                azure(Some("acct"), "c"),
                "https://acct.blob.core.windows.net/c",
                "m/x",
            ),
            ("http://h:8/a/b", Named::Http, "http://h:8", "a/b"),
            (
                "https://Acct.Blob.Core.Windows.Net:443/c/m",
                azure(Some("Acct"), "c"),
                "https://Acct.Blob.Core.Windows.Net:443/c",
                "m",
            ),
        ];
        for (url, named, base, key) in cases {
            assert_eq!(parsed(url), (named, base, key), "{url}");
        }
    }

    #[test]
    fn urls_without_their_store_are_refused() {
        for (url, why) in [
            ("gs:///m", "no bucket"),
            ("az:///m", "no container"),
            ("https://acct.blob.core.windows.net/", "no container"),
            ("abfss://c@example.com/m", "not an Azure storage host"),
            (
                "https://a.blob.core.windows.net/c/m?sv=1&sig=SECRET",
                "SAS token",
            ),
            ("ftp://h/m", "not a store"),
        ] {
            let e = parse(url).map(|_| ()).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
    }
}
