//! Endpoints checked before a client is made: object_store joins an endpoint into its request
//! URLs unchecked, and a request it cannot make (`127.0.0.1:4443`, `localhost:9000`: no
//! scheme) panics inside it (`request must be valid`) instead of failing. Every endpoint it
//! reads is checked here: `-o endpoint=` and each variable its builders take from the
//! environment (`AWS_ENDPOINT_URL`, `AZURE_STORAGE_ENDPOINT`, `GOOGLE_BASE_URL`, … under any
//! of their aliases).

use std::str::FromStr;

/// `value`, given as `what` (`endpoint=`, `AWS_ENDPOINT_URL`), if it is an `http://` or
/// `https://` URL with a host; else why not, with the URL it probably means.
pub fn check(what: &str, value: &str) -> Result<(), String> {
    let parsed = url::Url::parse(value).ok();
    let ok = parsed.is_some_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    });
    match (ok, value.contains("://")) {
        (true, _) => Ok(()),
        (false, false) => Err(format!(
            "{what} needs a URL with a scheme: http://{}",
            value.trim_start_matches('/')
        )),
        (false, true) => Err(format!(
            "{what} needs an http:// or https:// URL with a host, not {value}"
        )),
    }
}

/// Checks each of `keys` a builder holds (`value` of a key): the option's value is named
/// `endpoint=`, one from the environment by the variable that set it (`prefix`: the
/// variables the builder reads, `AWS_`, `AZURE_`, `GOOGLE_`).
pub(super) fn check_keys<K: FromStr + PartialEq>(
    keys: &[K],
    value: impl Fn(&K) -> Option<String>,
    option: Option<&str>,
    prefix: &str,
) -> Result<(), String> {
    for key in keys {
        let Some(v) = value(key) else { continue };
        let name = match option == Some(v.as_str()) {
            true => "endpoint=".to_string(),
            false => env_name(prefix, key).unwrap_or_else(|| format!("{prefix}… endpoint")),
        };
        check(&name, &v)?;
    }
    Ok(())
}

/// The variable of the environment that sets `key` (builders read every `PREFIX*` variable,
/// lower-cased, under any of a key's aliases).
fn env_name<K: FromStr + PartialEq>(prefix: &str, key: &K) -> Option<String> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .find(|k| {
            k.starts_with(prefix) && K::from_str(&k.to_ascii_lowercase()).is_ok_and(|x| &x == key)
        })
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn an_endpoint_without_a_scheme_is_refused_with_the_url_it_means() {
        for ok in [
            "http://127.0.0.1:4443",
            "https://s3.example.com",
            "http://127.0.0.1:10000/devstoreaccount1",
            "HTTP://Host:1/",
        ] {
            assert_eq!(check("endpoint=", ok), Ok(()), "{ok}");
        }
        let e = check("endpoint=", "127.0.0.1:4443").unwrap_err();
        assert_eq!(
            e,
            "endpoint= needs a URL with a scheme: http://127.0.0.1:4443"
        );
        let e = check("AWS_ENDPOINT_URL", "localhost:9000").unwrap_err();
        assert_eq!(
            e,
            "AWS_ENDPOINT_URL needs a URL with a scheme: http://localhost:9000"
        );
        for bad in ["ftp://h/", "http://", "s3://bucket"] {
            let e = check("endpoint=", bad).unwrap_err();
            assert!(e.contains("http:// or https://"), "{bad}: {e}");
        }
    }
}
