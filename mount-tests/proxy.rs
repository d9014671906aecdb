//! A small fault-injecting HTTP/1.1 proxy for the remote fault tests: it forwards each request
//! to an upstream server (nginx) and, as told, answers with an error status instead, cuts a
//! response mid-body, or sends the body slowly. One request per upstream connection; the
//! whole upstream response is read before anything is sent on, so a fault is placed exactly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the next requests get.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The next this-many requests are answered with `status` and no body.
    pub fail: u32,
    /// Every request is answered with `status` (a persistent fault).
    pub fail_always: bool,
    pub status: u16,
    /// The next this-many GET responses with a body stop halfway through it.
    pub cut: u32,
    /// Every response body is sent in ten pieces with this pause before each.
    pub slow: Option<Duration>,
}

pub struct Proxy {
    pub port: u16,
    plan: Arc<Mutex<Plan>>,
    /// Request lines seen, with what was done (`"GET /x 503"`, `"GET /x cut"`, `"GET /x ok"`).
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let plan = Arc::new(Mutex::new(Plan::default()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, l, s) = (plan.clone(), log.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (p, l) = (p.clone(), l.clone());
                std::thread::spawn(move || serve(conn, upstream, &p, &l));
            }
        });
        Proxy {
            port,
            plan,
            log,
            stop,
        }
    }

    pub fn set(&self, plan: Plan) {
        *self.plan.lock().unwrap() = plan;
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request head (lines up to the empty one); `None` at end of stream.
fn read_head(r: &mut impl BufRead) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            return Some(lines);
        }
        lines.push(line);
    }
}

fn serve(client: TcpStream, upstream: u16, plan: &Mutex<Plan>, log: &Mutex<Vec<String>>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(120)));
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut client = client;
    while let Some(head) = read_head(&mut reader) {
        let Some(request_line) = head.first().cloned() else {
            return;
        };
        let what = request_line
            .rsplit_once(' ')
            .map_or(&*request_line, |r| r.0);
        let fault = {
            let mut p = plan.lock().unwrap();
            if p.fail_always || p.fail > 0 {
                p.fail = p.fail.saturating_sub(1);
                Some(p.status)
            } else {
                None
            }
        };
        if let Some(status) = fault {
            log.lock().unwrap().push(format!("{what} {status}"));
            let reply = format!("HTTP/1.1 {status} Injected\r\nContent-Length: 0\r\n\r\n");
            if client.write_all(reply.as_bytes()).is_err() {
                return;
            }
            continue;
        }
        let Some((resp_head, body)) = forward(&head, upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            return;
        };
        let (cut, slow) = {
            let mut p = plan.lock().unwrap();
            let cut = p.cut > 0 && what.starts_with("GET") && body.len() > 1;
            if cut {
                p.cut -= 1;
            }
            (cut, p.slow)
        };
        log.lock()
            .unwrap()
            .push(format!("{what} {}", if cut { "cut" } else { "ok" }));
        if client.write_all(&resp_head).is_err() {
            return;
        }
        if cut {
            let _ = client.write_all(&body[..body.len() / 2]);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        let pieces = if slow.is_some() { 10 } else { 1 };
        for piece in body.chunks(body.len().div_ceil(pieces).max(1)) {
            if let Some(d) = slow {
                std::thread::sleep(d);
            }
            if client.write_all(piece).is_err() {
                return;
            }
        }
    }
}

/// Sends the request upstream on a fresh connection; the response's head (with
/// `Connection: keep-alive`) and body.
fn forward(head: &[String], upstream: u16) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut up = TcpStream::connect(("127.0.0.1", upstream)).ok()?;
    let mut req = String::new();
    for line in head {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("host:") {
            // As a reverse proxy does: fake-gcs-server serves its XML API to its own host only.
            req.push_str(&format!("Host: 127.0.0.1:{upstream}\r\n"));
        } else if !lower.starts_with("connection:") {
            req.push_str(line);
            req.push_str("\r\n");
        }
    }
    req.push_str("Connection: close\r\n\r\n");
    up.write_all(req.as_bytes()).ok()?;
    let mut resp = Vec::new();
    up.read_to_end(&mut resp).ok()?;
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let (h, body) = resp.split_at(split);
    let mut out = String::new();
    for line in String::from_utf8_lossy(h)
        .split("\r\n")
        .filter(|l| !l.is_empty())
    {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: keep-alive\r\n\r\n");
    Some((out.into_bytes(), body.to_vec()))
}
