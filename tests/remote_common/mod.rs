//! Helpers of the remote tests: a container with every layer kind, the
//! comparison of a remote read with the local one, and the servers (nginx,
//! moto's S3 server) started on loopback and stopped by the tests.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, LodMethod, Order, Region, SlotPolicy, VariableBuilder};

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("vds-remote-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `dir/name`, a container with every layer kind: bricks with levels
/// of detail and 2-D tiles (deflate), a quantized variable, one with a
/// missing-value mask, one with margins, bool, constant and unwritten
/// chunks, and a variable whose chunks live in the external-file slot
/// `name.data`; several MiB, so that reading it takes range requests
/// beyond the bytes fetched at open.
pub fn every_layer(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let slot = format!("{name}.data");
    let axes = ["inline", "crossline", "time"];
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("inline", 40))
        .axis(Axis::new("crossline", 48))
        .axis(Axis::new("time", 200).unit("ms").coordinates(0.0, 796.0))
        .external_slot(&slot)
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &axes)
                .chunk(&[8, 8, 16])
                .codec(Codec::deflate(6))
                .partitioning(&[1, 48, 200])
                .levels_of_detail(3, &axes, LodMethod::Average),
        )
        .variable(VariableBuilder::new("quantized", DType::Float32, &axes).chunk(&[10, 12, 20]).quantization(DType::UInt8, -2.0, 2.0))
        .variable(VariableBuilder::new("masked", DType::Float64, &axes).chunk(&[10, 12, 20]).missing_mask(true))
        .variable(VariableBuilder::new("bordered", DType::Int16, &axes).chunk(&[8, 8, 8]).margin(1, 1))
        .variable(VariableBuilder::new("flags", DType::Bool, &["inline", "crossline"]).chunk(&[8, 8]))
        .variable(VariableBuilder::new("sparse", DType::Int32, &axes).chunk(&[5, 6, 10]))
        .variable(VariableBuilder::new("outside", DType::UInt16, &axes).chunk(&[10, 12, 20]).codec(Codec::deflate(1)))
        .create(&path)
        .unwrap();
    ds.set_slot_policy(SlotPolicy::ByVariable(vec![0, 0, 0, 0, 0, 0, 1])).unwrap();
    let n = 40 * 48 * 200;
    let full = Region::full(&[40, 48, 200]).unwrap();
    let wave: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.013).sin() * 1.5).collect();
    ds.write("amplitude", &full, Order::C, &wave).unwrap();
    ds.write("quantized", &full, Order::C, &wave).unwrap();
    let values: Vec<f64> = (0..n).map(|i| f64::from(i as u32) * 0.5).collect();
    let mask: Vec<bool> = (0..n).map(|i| i % 7 != 0).collect();
    ds.write_masked("masked", &full, Order::C, &values, &mask).unwrap();
    let ints: Vec<i16> = (0..n).map(|i| (i % 3000) as i16 - 1500).collect();
    ds.write("bordered", &full, Order::C, &ints).unwrap();
    let flags: Vec<bool> = (0..40 * 48).map(|i| i % 3 == 0).collect();
    ds.write("flags", &Region::full(&[40, 48]).unwrap(), Order::C, &flags).unwrap();
    // One constant chunk and one stored; the rest stays unwritten.
    ds.write("sparse", &Region::new(&[0, 0, 0], &[5, 6, 10]).unwrap(), Order::C, &[7i32; 300]).unwrap();
    let some: Vec<i32> = (0..300).collect();
    ds.write("sparse", &Region::new(&[5, 6, 10], &[5, 6, 10]).unwrap(), Order::C, &some).unwrap();
    let words: Vec<u16> = (0..n).map(|i| (i * 7 % 65536) as u16).collect();
    ds.write("outside", &full, Order::C, &words).unwrap();
    ds.close().unwrap();
    path
}

/// Writes `path`, an n^3 uint32 variable "noise" of incompressible values
/// in chunks of `chunk`^3, and returns the values (C order).
pub fn noise(path: &Path, n: u64, chunk: u64) -> Vec<u32> {
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", n))
        .axis(Axis::new("y", n))
        .axis(Axis::new("z", n))
        .variable(VariableBuilder::new("noise", DType::UInt32, &["x", "y", "z"]).chunk(&[chunk; 3]))
        .create(path)
        .unwrap();
    let values: Vec<u32> = (0..(n * n * n) as u32).map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995).collect();
    ds.write("noise", &Region::full(&[n; 3]).unwrap(), Order::C, &values).unwrap();
    ds.close().unwrap();
    values
}

/// Reads every layer of every variable of `remote` (each level of detail,
/// each partitioning, masks, slices and bricks) and compares it with `local`.
pub fn compare(local: &Dataset, remote: &Dataset) {
    assert_eq!(local.descriptor_json(), remote.descriptor_json());
    let mut layers = 0;
    for var in local.variables() {
        let name = var.name();
        let parts = var.partitionings().len().max(1);
        for lod in 0..var.levels_of_detail() {
            let shape = var.lod_shape(lod).unwrap();
            let region = Region::full(&shape).unwrap();
            let bytes = shape.iter().product::<u64>() as usize * var.dtype().size();
            for part in 0..parts {
                let part = u8::try_from(part).unwrap();
                let (mut a, mut b) = (vec![0u8; bytes], vec![1u8; bytes]);
                local.read_lod_bytes(name, lod, Some(part), &region, Order::C, &mut a).unwrap();
                remote.read_lod_bytes(name, lod, Some(part), &region, Order::Fortran, &mut b).unwrap();
                let mut c = vec![2u8; bytes];
                local.read_lod_bytes(name, lod, Some(part), &region, Order::Fortran, &mut c).unwrap();
                assert!(b == c, "{name} level {lod} partitioning {part} differs when read remotely");
                if var.has_mask() {
                    let m1 = local.read_mask(name, lod, Some(part), &region, Order::C).unwrap();
                    let m2 = remote.read_mask(name, lod, Some(part), &region, Order::C).unwrap();
                    assert_eq!(m1, m2, "mask of {name} level {lod} partitioning {part}");
                }
                layers += 1;
            }
        }
        if var.margin() != [0, 0] {
            let coords = vec![1; var.shape().len()];
            let (a, sa) = local.read_brick::<i16>(name, 0, &coords).unwrap();
            let (b, sb) = remote.read_brick::<i16>(name, 0, &coords).unwrap();
            assert_eq!((a, sa), (b, sb), "brick of {name}");
        }
    }
    let (a, sa) = local.read_slice::<f32>("amplitude", 0, &[(0, 3)], Order::C).unwrap();
    let (b, sb) = remote.read_slice::<f32>("amplitude", 0, &[(0, 3)], Order::C).unwrap();
    assert_eq!((a, sa), (b, sb), "inline slice 3");
    assert!(layers >= 10, "only {layers} layers compared");
    let report = remote.verify().unwrap();
    assert!(report.is_ok(), "remote verify: {report:?}");
}

/// A free port on 127.0.0.1 (free when asked; the server binds it soon after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for(port: u16, child: &mut Child, what: &str) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited with {status} before listening on port {port}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not listen on port {port} within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server process, killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub _dir: Option<TempDir>,
}

impl Server {
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn find(candidates: &[PathBuf], name: &str) -> Option<PathBuf> {
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .or_else(|| std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())))
}

/// nginx serving `root` on a loopback port; a test without nginx fails
/// (.ci/deps.sh installs it).
pub fn nginx(root: &Path) -> Server {
    let bin = find(&[PathBuf::from("/usr/sbin/nginx")], "nginx").expect("nginx is not installed: sh .ci/deps.sh installs it");
    let dir = TempDir::new("nginx");
    let port = free_port();
    let d = dir.0.display();
    let conf = format!(
        "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{ access_log {d}/access.log; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; root {}; }} }}\n",
        root.display()
    );
    std::fs::write(dir.0.join("nginx.conf"), conf).unwrap();
    let mut child = Command::new(bin)
        .arg("-p")
        .arg(&dir.0)
        .arg("-e")
        .arg(dir.0.join("error.log"))
        .arg("-c")
        .arg(dir.0.join("nginx.conf"))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, &mut child, "nginx");
    Server { child, port, _dir: Some(dir) }
}

/// moto's S3 server on a loopback port; a test without moto fails
/// (.ci/deps.sh installs it into target/pyenv).
pub fn moto() -> Server {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/moto_server");
    let bin = find(&[venv], "moto_server").expect("moto_server is not installed: sh .ci/deps.sh installs it into target/pyenv");
    let port = free_port();
    let mut child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, &mut child, "moto_server");
    Server { child, port, _dir: None }
}

/// Creates `bucket` in the moto server on `port` with an unsigned PUT
/// (moto does not check signatures).
pub fn create_bucket(port: u16, bucket: &str) {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "creating the bucket: {reply}");
}

/// Stores `bytes` as `key` in `bucket` of the moto server on `port` with an
/// unsigned PUT, as [`create_bucket`] makes the bucket.
pub fn put_object(port: u16, bucket: &str, key: &str, bytes: &[u8]) {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "PUT /{bucket}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", bytes.len())
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "storing {key}: {reply}");
}

/// What the fault server does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers with this status and no body.
    Status(u16),
    /// Sends the headers and half the body, then closes the connection.
    Truncate,
    /// Closes the connection without answering.
    Drop,
    /// Waits this long, then answers normally.
    Delay(Duration),
}

type Objects = std::collections::HashMap<String, (std::sync::Arc<Vec<u8>>, u64)>;

/// A small HTTP/1.1 server on loopback that answers range GETs (with ETag,
/// Content-Range and If-Match) for objects held in memory, and fails
/// requests as told: the faults queued with [`FaultServer::inject`] apply
/// to the next requests, one each; [`FaultServer::set_latency`] delays
/// every answer.
pub struct FaultServer {
    pub port: u16,
    objects: std::sync::Arc<std::sync::Mutex<Objects>>,
    latency: std::sync::Arc<std::sync::Mutex<Duration>>,
    link: std::sync::Arc<Link>,
    faults: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Fault>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The link the fault server's answers share: unlimited, or a number of
/// bytes per second that all bodies in flight divide between them.
#[derive(Default)]
pub struct Link {
    /// Bytes per second, 0 = unlimited.
    rate: std::sync::atomic::AtomicU64,
    /// When the link has sent everything handed to it so far.
    free_at: std::sync::Mutex<Option<Instant>>,
}

impl Link {
    /// Sends `body` on `conn` in pieces, each when the shared link has room.
    fn send(&self, conn: &mut TcpStream, body: &[u8]) {
        use std::io::Write;
        let rate = self.rate.load(std::sync::atomic::Ordering::Relaxed);
        if rate == 0 {
            let _ = conn.write_all(body);
            return;
        }
        for piece in body.chunks(64 << 10) {
            let done = {
                let mut free_at = self.free_at.lock().unwrap();
                let start = free_at.map_or(Instant::now(), |t| t.max(Instant::now()));
                let done = start + Duration::from_secs_f64(piece.len() as f64 / rate as f64);
                *free_at = Some(done);
                done
            };
            std::thread::sleep(done.saturating_duration_since(Instant::now()));
            if conn.write_all(piece).is_err() {
                return;
            }
        }
    }
}

impl FaultServer {
    pub fn start() -> FaultServer {
        use std::sync::{atomic::AtomicBool, atomic::AtomicU64, Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let objects: Arc<Mutex<Objects>> = Arc::default();
        let latency: Arc<Mutex<Duration>> = Arc::default();
        let link: Arc<Link> = Arc::default();
        let faults: Arc<Mutex<std::collections::VecDeque<Fault>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let (o, l, f, s, r, k) = (objects.clone(), latency.clone(), faults.clone(), stop.clone(), requests.clone(), link.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (o, f, r, k) = (o.clone(), f.clone(), r.clone(), k.clone());
                let delay = *l.lock().unwrap();
                std::thread::spawn(move || serve(conn, &o, &f, &r, delay, &k));
            }
        });
        FaultServer { port, objects, latency, link, faults, stop, requests, thread: Some(thread) }
    }

    /// Delays every answer by `latency` (a round trip to a distant server).
    pub fn set_latency(&self, latency: Duration) {
        *self.latency.lock().unwrap() = latency;
    }

    /// Limits the bytes per second all answers' bodies share (0: no limit).
    pub fn set_bandwidth(&self, bytes_per_second: u64) {
        self.link.rate.store(bytes_per_second, std::sync::atomic::Ordering::Relaxed);
    }

    /// Serves `bytes` at `/name`, replacing (with a new ETag) what was there.
    /// ETags are unique in the process, so that no two servers (one on a
    /// port another had) give the same ETag to different objects.
    pub fn put(&self, name: &str, bytes: Vec<u8>) {
        static VERSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let version = VERSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.objects.lock().unwrap().insert(name.to_string(), (std::sync::Arc::new(bytes), version));
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    pub fn inject(&self, faults: &[Fault]) {
        self.faults.lock().unwrap().extend(faults.iter().copied());
    }

    pub fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    mut conn: TcpStream,
    objects: &std::sync::Mutex<Objects>,
    faults: &std::sync::Mutex<std::collections::VecDeque<Fault>>,
    requests: &std::sync::atomic::AtomicU64,
    latency: Duration,
    link: &Link,
) {
    use std::io::{Read, Write};
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(latency);
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let target = lines.next().unwrap_or("").split(' ').nth(1).unwrap_or("/").trim_start_matches('/').to_string();
    let header = |name: &str| header_value(&head, name);
    let fault = faults.lock().unwrap().pop_front();
    let reply = |conn: &mut TcpStream, status: &str, headers: &str, body: &[u8]| {
        let _ = write!(conn, "HTTP/1.1 {status}\r\nConnection: close\r\n{headers}\r\n");
        link.send(conn, body);
    };
    match fault {
        Some(Fault::Drop) => return,
        Some(Fault::Status(code)) => return reply(&mut conn, &format!("{code} Injected"), "Content-Length: 0\r\n", b""),
        Some(Fault::Delay(d)) => std::thread::sleep(d),
        _ => {}
    }
    let Some((bytes, version)) = objects.lock().unwrap().get(&target).cloned() else {
        return reply(&mut conn, "404 Not Found", "Content-Length: 0\r\n", b"");
    };
    let etag = format!("\"v{version}\"");
    if header("if-match").is_some_and(|m| m != etag && m != "*") {
        return reply(&mut conn, "412 Precondition Failed", "Content-Length: 0\r\n", b"");
    }
    let len = bytes.len() as u64;
    let range = header("range").and_then(|r| {
        let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
        if a.is_empty() {
            let n: u64 = b.parse().ok()?;
            Some((len.saturating_sub(n), len - 1))
        } else {
            let a: u64 = a.parse().ok()?;
            let b: u64 = if b.is_empty() { len - 1 } else { b.parse::<u64>().ok()?.min(len - 1) };
            Some((a, b))
        }
    });
    let Some((a, b)) = range.filter(|&(a, b)| a <= b && b < len) else {
        return reply(&mut conn, "416 Range Not Satisfiable", &format!("Content-Range: bytes */{len}\r\nContent-Length: 0\r\n"), b"");
    };
    let body = &bytes[a as usize..=b as usize];
    let headers = format!("Content-Length: {}\r\nContent-Range: bytes {a}-{b}/{len}\r\nETag: {etag}\r\n", body.len());
    if fault == Some(Fault::Truncate) {
        return reply(&mut conn, "206 Partial Content", &headers, &body[..body.len() / 2]);
    }
    reply(&mut conn, "206 Partial Content", &headers, body);
}

/// `e` is an I/O error naming `url` and a byte range.
pub fn assert_names_url_and_range(e: &vds::Error, url: &str) {
    assert_eq!(e.kind(), vds::ErrorKind::Io, "{e}");
    let text = e.to_string();
    assert!(text.contains(url), "the error does not name {url}: {text}");
    assert!(text.contains("bytes "), "the error does not name the byte range: {text}");
}

/// A share of the requests to fail: every `every`-th request gets the next
/// fault of `faults`, in turn, unless the same request (its request line
/// and range, kept in the set) failed before: a retry always goes through.
type Share = Option<(u64, Vec<Fault>, std::collections::HashSet<Vec<u8>>)>;

/// A proxy on loopback in front of a real server (nginx, moto): it passes
/// each request on, one per connection, and fails the requests as told,
/// as [`FaultServer`] does for the objects it holds: the faults queued with
/// [`FaultProxy::inject`] apply to the next requests, one each, and
/// [`FaultProxy::fail_share`] fails a share of all requests.
pub struct FaultProxy {
    pub port: u16,
    faults: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Fault>>>,
    share: std::sync::Arc<std::sync::Mutex<Share>>,
    /// Requests the share failed.
    pub failed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy for the server on loopback port `upstream`.
    pub fn start(upstream: u16) -> FaultProxy {
        use std::sync::{atomic::AtomicBool, atomic::AtomicU64, Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let faults: Arc<Mutex<std::collections::VecDeque<Fault>>> = Arc::default();
        let share: Arc<Mutex<Share>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (f, sh, fd, s, r) = (faults.clone(), share.clone(), failed.clone(), stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (f, sh, fd, r) = (f.clone(), sh.clone(), fd.clone(), r.clone());
                std::thread::spawn(move || relay(conn, upstream, &f, &sh, &fd, &r));
            }
        });
        FaultProxy { port, faults, share, failed, requests, stop, thread: Some(thread) }
    }

    /// Fails every `every`-th request from now on (a share of 1 / `every`),
    /// with the faults of `faults` in turn; queued faults come first.
    pub fn fail_share(&self, every: u64, faults: &[Fault]) {
        *self.share.lock().unwrap() = Some((every.max(1), faults.to_vec(), std::collections::HashSet::new()));
    }

    pub fn inject(&self, faults: &[Fault]) {
        self.faults.lock().unwrap().extend(faults.iter().copied());
    }

    /// Faults still queued (none once the requests they were for were made).
    pub fn pending(&self) -> usize {
        self.faults.lock().unwrap().len()
    }

    /// Drops the queued faults: later requests pass unchanged.
    pub fn clear(&self) {
        self.faults.lock().unwrap().clear();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request from `client`, passed to `upstream` with `Connection: close`
/// (its body too, by Content-Length), and the answer passed back, each
/// changed by the next queued fault, or by the share's.
fn relay(
    mut client: TcpStream,
    upstream: u16,
    faults: &std::sync::Mutex<std::collections::VecDeque<Fault>>,
    share: &std::sync::Mutex<Share>,
    failed: &std::sync::atomic::AtomicU64,
    requests: &std::sync::atomic::AtomicU64,
) {
    use std::io::{Read, Write};
    let Some((head, mut body)) = read_message_head(&mut client) else { return };
    let length = header_value(&head, "content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    if !read_up_to(&mut client, &mut body, length) {
        return;
    }
    let n = requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    let fault = faults.lock().unwrap().pop_front().or_else(|| match &mut *share.lock().unwrap() {
        Some((every, list, before)) if n % *every == 0 && !list.is_empty() => {
            let line = head.split(|&b| b == b'\n').next().unwrap_or_default().to_vec();
            let request = [line, header_value(&head, "range").unwrap_or_default().into_bytes()].concat();
            before.insert(request).then(|| {
                failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                list[(n / *every) as usize % list.len()]
            })
        }
        _ => None,
    });
    match fault {
        Some(Fault::Drop) => return,
        Some(Fault::Status(code)) => {
            let _ = write!(client, "HTTP/1.1 {code} Injected\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        Some(Fault::Delay(d)) => std::thread::sleep(d),
        _ => {}
    }
    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
    if up.write_all(&with_connection_close(&head)).and_then(|()| up.write_all(&body)).is_err() {
        return;
    }
    // The answer's body: none for HEAD, else Content-Length bytes (so that a
    // server keeping the connection open despite `Connection: close` does
    // not stall the relay), else everything up to the end.
    let Some((answer_head, mut answer_body)) = read_message_head(&mut up) else { return };
    let head_request = head.starts_with(b"HEAD ");
    match header_value(&answer_head, "content-length").and_then(|v| v.parse::<usize>().ok()) {
        _ if head_request => answer_body.clear(),
        Some(n) => {
            if !read_up_to(&mut up, &mut answer_body, n) {
                return;
            }
        }
        None => {
            if up.read_to_end(&mut answer_body).is_err() {
                return;
            }
        }
    }
    let sent = if fault == Some(Fault::Truncate) { &answer_body[..answer_body.len() / 2] } else { &answer_body[..] };
    let _ = client.write_all(&with_connection_close(&answer_head)).and_then(|()| client.write_all(sent));
}

/// The bytes of an HTTP message up to and including its blank line, and
/// any bytes read after it.
fn read_message_head(conn: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    use std::io::Read;
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(p) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = data.split_off(p + 4);
            return Some((data, rest));
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads from `conn` until `data` holds `n` bytes; false if it ends first.
fn read_up_to(conn: &mut TcpStream, data: &mut Vec<u8>, n: usize) -> bool {
    use std::io::Read;
    while data.len() < n {
        let mut buf = vec![0u8; (n - data.len()).min(1 << 16)];
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(k) => data.extend_from_slice(&buf[..k]),
        }
    }
    true
}

fn header_value(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head).split("\r\n").find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// `head` (a request or status line and headers, ending in a blank line)
/// with its Connection header replaced by `Connection: close`.
fn with_connection_close(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if !line.split_once(':').is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("connection")) {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// A transparent TCP relay on loopback in front of a server: it passes the
/// bytes of every connection both ways unchanged and counts the connections
/// clients open through it. Its threads end with the test process.
pub struct ConnectionCounter {
    pub port: u16,
    pub connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ConnectionCounter {
    pub fn start(upstream: u16) -> ConnectionCounter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        ConnectionCounter { port, connections }
    }
}
