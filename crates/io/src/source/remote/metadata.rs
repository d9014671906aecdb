//! Whether an instance metadata service is there at all, asked once before a client that would
//! take its credentials from one is made. object_store asks the service for a token with the
//! retries of a data request (and again for every request that needs one), so off a cloud VM,
//! where nothing answers, `gs://` took 48 s and `az://` 23 s to say there were no credentials.
//! One connection attempt with a short wait tells it, as google-auth's ping does (3 s).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The longest the look takes, whatever the number of addresses.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// The link-local address of GCE's and Azure's metadata services.
pub(super) const LINK_LOCAL: &str = "169.254.169.254";

/// Whether any of `hosts` (`HOST` or `HOST:PORT`, port 80 if none) takes a TCP connection
/// within `PROBE_WAIT` in all. A connection is enough: what it then says is the client's to
/// read, with its retries, as on any VM.
pub(super) fn answers(hosts: &[String]) -> bool {
    let until = Instant::now() + PROBE_WAIT;
    let addrs: Vec<SocketAddr> = hosts.iter().flat_map(|h| addresses(h)).collect();
    addrs.iter().any(|a| {
        let left = until.saturating_duration_since(Instant::now());
        !left.is_zero() && TcpStream::connect_timeout(a, left).is_ok()
    })
}

fn addresses(host: &str) -> Vec<SocketAddr> {
    let with_port = match host.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => host.to_string(),
        _ => format!("{host}:80"),
    };
    with_port
        .to_socket_addrs()
        .map(|a| a.collect())
        .unwrap_or_default()
}

/// `HOST:PORT` of an `http(s)://` URL (the managed identity endpoint's), port 80 or 443 if none.
pub(super) fn host_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_is_told_at_once_and_an_open_one_answers() {
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = open.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let started = Instant::now();
        assert!(!answers(&[format!("127.0.0.1:{closed}")]));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(answers(&[
            format!("127.0.0.1:{closed}"),
            format!("127.0.0.1:{port}")
        ]));
        assert_eq!(
            host_of("http://127.0.0.1:9/metadata/identity").as_deref(),
            Some("127.0.0.1:9")
        );
        assert_eq!(
            host_of("http://169.254.169.254/x").as_deref(),
            Some("169.254.169.254:80")
        );
    }
}
