//! Reading libvds containers in place, from a web server or an S3 bucket
//! (cargo feature `remote`, off by default, so that the HTTP and S3 clients
//! reach only the programs that ask for them).
//!
//! A container is one file with an index, so it can be read where it lies
//! with HTTP range requests, as cloud-optimized GeoTIFFs are.
//! [`open`] takes an `http://`, `https://` or `s3://` URL and returns a
//! read-only [`Dataset`]; everything else is the library's ordinary API.
//! In a build with this feature, [`Dataset::open`], [`OpenOptions::open`]
//! and the C `vds_open` take such URLs too.
//!
//! `examples/remote_open.rs`:
//!
//! ```no_run
//! //! Opens a container by URL and reads one time slice of it.
//! use vds::{Order, Region};
//!
//! fn main() -> vds::Result<()> {
//!     let url = std::env::args().nth(1).unwrap_or_else(|| "s3://survey-bucket/2026/survey.vds".into());
//!     let ds = vds::remote::open(&url)?;
//!     let shape = ds.variable("amplitude")?.shape().to_vec();
//!     let slice: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[0, 0, shape[2] / 2], &[shape[0], shape[1], 1])?, Order::C)?;
//!     println!("{url}: {} values in the middle time slice", slice.len());
//!     Ok(())
//! }
//! ```
//!
//! # Round trips
//!
//! Opening fetches the object's first 256 KiB (the head, the commit slots
//! and, in a small or cloud-optimized container, the index) and its last
//! 256 KiB (where a commit leaves the root and the upper pages of the index)
//! with two concurrent range requests, one round trip; later reads of those
//! bytes are served from memory. Then the index above the leaves is read,
//! one merged request per level. A region read announces its chunks
//! (`Storage::will_read`), which are fetched [`CONCURRENCY`] requests at a
//! time, neighbours merged; the dataset's own caches keep index pages and
//! decoded chunks.
//! [`RemoteStorage::stats`] counts the requests.
//!
//! # Consistency
//!
//! Every request after the first carries `If-Match` with the ETag the
//! object had when it was opened, and every response's ETag and length are
//! compared with it: an object replaced while open is reported as an I/O
//! error ("changed since it was opened"), never read half old, half new.
//!
//! # Failures
//!
//! Timeouts, connection failures, 5xx and 429 responses and bodies cut
//! short are retried with exponential backoff (from 50 ms, at most
//! [`RETRIES`] times); then the read fails with an I/O error naming the URL
//! and the byte range.
//!
//! # Credentials and endpoints
//!
//! `s3://bucket/key` URLs take their configuration from the standard `AWS_*`
//! environment variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`),
//! `AWS_ENDPOINT_URL` for an S3-compatible store (MinIO, Ceph, moto, ...),
//! `AWS_SKIP_SIGNATURE=true` for a public bucket, and `AWS_ALLOW_HTTP=true`
//! for a plain-HTTP endpoint (implied when `AWS_ENDPOINT_URL` starts with
//! `http://`). `http://` and `https://` URLs need a server that answers range
//! requests (`206 Partial Content`), as nginx, Apache, S3 and every CDN do.
//!
//! # Threads and connections
//!
//! Requests run on a small tokio runtime owned by this module; the API is
//! blocking. Do not call it from inside another tokio runtime's async task.
//! Opens of the same server (or S3 bucket, with the same `AWS_*` settings)
//! share one client: its connections stay open between them, and its root
//! certificates are loaded once per process, not at every open. A child
//! process made by fork() builds its own runtime and clients at its first
//! request (the parent's threads do not exist in it), so containers opened
//! before the fork read on in both processes.

use crate::{Dataset, OpenOptions, Storage};
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart,
};
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use url::Url;

/// Bytes fetched from the start of the object when it is opened: enough
/// for the whole index of a cloud-optimized container of about 4,000
/// chunks, for a few milliseconds more than 64 KiB on a cloud link.
pub const HEAD_FETCH: u64 = 256 << 10;
/// Bytes fetched from the end of the object when it is opened.
pub const TAIL_FETCH: u64 = 256 << 10;
/// How many times a failed request is retried before the read fails.
pub const RETRIES: usize = 4;
/// How long one request may take, connecting included, before it is
/// abandoned and retried (see [`RemoteStorage::open_with_timeout`]).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Index pages read when a container opens (see
/// [`OpenOptions::index_prefetch`]): every page above the leaves of an
/// index of up to about 2.5 million chunks.
pub const INDEX_PREFETCH: u32 = 512;
/// Requests in flight at once for a batch of reads.
pub const CONCURRENCY: usize = 16;
/// Reads of a batch closer than this are fetched as one range (the bytes
/// between them are fetched and dropped).
pub const MERGE_GAP: u64 = 16 << 10;
/// The longest range merged reads make, so that a large batch still goes
/// out as concurrent requests (a single connection rarely fills a link).
pub const MERGE_MAX: u64 = 8 << 20;
/// How many clients (one per server, or per S3 bucket and settings) are
/// kept for later opens; past this many, all are dropped and built again
/// as needed (open containers keep theirs).
pub const STORES: usize = 32;

pub use crate::dataset::is_url;

/// Opens the container at `url` read-only.
///
/// # Errors
/// `Io` when the object cannot be fetched (not found, refused, every retry
/// failed), naming the URL; otherwise as [`OpenOptions::open`].
pub fn open(url: &str) -> crate::Result<Dataset> {
    open_with(url, &OpenOptions::new())
}

/// Opens the container at `url` read-only with `options` (memory limit,
/// cache size, `allow_external_paths`); external-file slots are fetched from
/// URLs relative to the container's.
///
/// # Errors
/// As [`open`]; `ReadOnly` when `options` asks for writing.
pub fn open_with(url: &str, options: &OpenOptions) -> crate::Result<Dataset> {
    let storage = Arc::new(RemoteStorage::open(url).map_err(|e| crate::Error::io(format!("opening {url}"), e))?);
    open_storage(&storage, options)
}

/// Opens the container in `storage` with `options`, always read-only (the
/// options' `write` is ignored); external-file slots are fetched from URLs
/// relative to the storage's. Keeping a clone of `storage` lets the caller
/// read its [`RemoteStorage::stats`].
///
/// # Errors
/// As [`open`].
pub fn open_storage(storage: &Arc<RemoteStorage>, options: &OpenOptions) -> crate::Result<Dataset> {
    let base = storage.clone();
    let mut options = options.clone();
    options.write(false).index_prefetch(INDEX_PREFETCH);
    options.slot_storage(Arc::new(move |name: &str| base.sibling(name).map(|s| Arc::new(s) as Arc<dyn Storage>)));
    let ds = options.open_storage(storage.clone()).map_err(|e| e.context(storage.url.as_str()))?;
    storage.remember_open();
    Ok(ds)
}

/// The objects whose last open in this process read nothing beyond their
/// first [`HEAD_FETCH`] bytes (a cloud-optimized or a small container), by
/// URL, with the version seen then: a later open of the same URL fetches
/// the head alone, and the tail too only when the version has changed. At
/// most [`HEAD_ONLY_URLS`]; past that, all are forgotten.
fn head_only() -> std::sync::MutexGuard<'static, std::collections::HashMap<String, Version>> {
    static HEAD_ONLY: OnceLock<std::sync::Mutex<std::collections::HashMap<String, Version>>> = OnceLock::new();
    HEAD_ONLY.get_or_init(std::sync::Mutex::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
/// How many URLs this process remembers as needing only their first
/// [`HEAD_FETCH`] bytes to open (see [`RemoteStorage::open`]).
pub const HEAD_ONLY_URLS: usize = 4096;

/// What tells two versions of an object apart, as [`same_object`] does:
/// ETag and length, or, without an ETag, length and date (seconds and
/// nanoseconds).
#[derive(Clone, PartialEq)]
struct Version {
    e_tag: Option<String>,
    size: u64,
    last_modified: Option<(i64, u32)>,
}

impl From<&ObjectMeta> for Version {
    fn from(m: &ObjectMeta) -> Version {
        let date = (m.last_modified.timestamp(), m.last_modified.timestamp_subsec_nanos());
        Version { e_tag: m.e_tag.clone(), size: m.size, last_modified: if m.e_tag.is_some() { None } else { Some(date) } }
    }
}

/// Counts of what a [`RemoteStorage`] fetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// HTTP requests sent (a retry made by the client counts once).
    pub requests: u64,
    /// Times a caller waited for the network: concurrent requests count once.
    pub round_trips: u64,
    /// Bytes received in response bodies.
    pub bytes: u64,
}

/// A read-only [`Storage`] over one object of a web server or an S3 bucket.
pub struct RemoteStorage {
    /// The client, and the process it was made in: a child made by fork()
    /// takes its own (see [`runtime`]).
    store: std::sync::Mutex<(u32, Arc<dyn ObjectStore>)>,
    timeout: Duration,
    url: Url,
    path: ObjectPath,
    /// The object as first seen: every later response must match it.
    meta: ObjectMeta,
    /// The first bytes of the object, and the last ones from `tail_at`.
    head: Vec<u8>,
    tail: Vec<u8>,
    tail_at: u64,
    requests: AtomicU64,
    round_trips: AtomicU64,
    bytes: AtomicU64,
    /// Ranges fetched ahead of their reads (Storage::will_read), by offset;
    /// each is dropped when read.
    ahead: std::sync::Mutex<std::collections::BTreeMap<u64, Vec<u8>>>,
    /// Bytes held in `ahead` and reserved for fetches ahead in flight: at
    /// most [`READ_AHEAD_MAX`], however many threads announce reads at once.
    ahead_bytes: AtomicU64,
    /// Whether any read has needed bytes beyond `head` (see [`head_only`]).
    beyond_head: std::sync::atomic::AtomicBool,
}

/// The most bytes fetched ahead of their reads that a storage holds.
pub const READ_AHEAD_MAX: u64 = 256 << 20;

impl std::fmt::Debug for RemoteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStorage")
            .field("url", &self.url.as_str())
            .field("size", &self.meta.size)
            .field("etag", &self.meta.e_tag)
            .finish_non_exhaustive()
    }
}

/// The runtime of this process. A child made by fork() has none of its
/// parent's threads, so the parent's runtime (and every client whose
/// connections it drove) would hang there: the child builds its own, and
/// the parent's copy is left alone, never dropped.
fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RT: std::sync::Mutex<Option<(u32, &'static tokio::runtime::Runtime)>> = std::sync::Mutex::new(None);
    let mut rt = RT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let pid = std::process::id();
    match *rt {
        Some((owner, runtime)) if owner == pid => Ok(runtime),
        _ => {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("vds-remote").enable_all().build()?;
            let runtime: &'static tokio::runtime::Runtime = Box::leak(Box::new(runtime));
            *rt = Some((pid, runtime));
            Ok(runtime)
        }
    }
}

fn client_options(allow_http: bool, timeout: Duration) -> ClientOptions {
    ClientOptions::new().with_allow_http(allow_http).with_connect_timeout(timeout.min(Duration::from_secs(10))).with_timeout(timeout)
}

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig { init_backoff: Duration::from_millis(50), max_backoff: Duration::from_secs(2), base: 2.0 },
        max_retries: RETRIES,
        retry_timeout: Duration::from_secs(120),
    }
}

/// The store serving `url` and the object's path in it: one store (one
/// client, its connection pool and its root certificates, which take
/// milliseconds to load) serves every open of the same server or bucket
/// with the same settings (see [`STORES`]).
fn store_for(url: &Url, timeout: Duration) -> io::Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let path = ObjectPath::from_url_path(url.path()).map_err(|e| bad(&e.to_string()))?;
    match url.scheme() {
        "http" | "https" => {
            let mut base = url.clone();
            base.set_path("/");
            base.set_query(None);
            base.set_fragment(None);
            let store = shared_store(format!("{base} {timeout:?}"), || {
                let store = HttpBuilder::new()
                    .with_url(base.as_str())
                    .with_client_options(client_options(url.scheme() == "http", timeout))
                    .with_retry(retry_config())
                    .build()
                    .map_err(|e| bad(&e.to_string()))?;
                Ok(Arc::new(store))
            })?;
            Ok((store, path))
        }
        "s3" => {
            let bucket = url.host_str().filter(|b| !b.is_empty()).ok_or_else(|| bad("an s3:// URL names a bucket: s3://bucket/key"))?;
            // The store reads its settings from the AWS_* variables when it
            // is built: a change of any of them builds another.
            let mut settings: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).collect();
            settings.sort();
            let store = shared_store(format!("s3://{bucket} {timeout:?} {settings:?}"), || {
                let http_endpoint = std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| e.starts_with("http://"));
                let allow_http = http_endpoint || std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
                let store = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(retry_config())
                    .with_client_options(client_options(allow_http, timeout))
                    .build()
                    .map_err(|e| bad(&e.to_string()))?;
                Ok(Arc::new(store))
            })?;
            Ok((store, path))
        }
        other => Err(bad(&format!("unsupported scheme {other:?} (http, https or s3)"))),
    }
}

/// The store built for `key` in this process, built by `build` the first
/// time (a child made by fork() builds its own: see [`runtime`]).
fn shared_store(key: String, build: impl FnOnce() -> io::Result<Arc<dyn ObjectStore>>) -> io::Result<Arc<dyn ObjectStore>> {
    type Stores = std::sync::Mutex<(u32, std::collections::HashMap<String, Arc<dyn ObjectStore>>)>;
    static BUILT: OnceLock<Stores> = OnceLock::new();
    let built = BUILT.get_or_init(Stores::default);
    let pid = std::process::id();
    {
        let mut stores = built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if stores.0 != pid {
            // The parent's clients: never dropped here, where their tasks cannot run.
            std::mem::forget(std::mem::take(&mut stores.1));
            stores.0 = pid;
        }
        if let Some(store) = stores.1.get(&key) {
            return Ok(Arc::clone(store));
        }
    }
    let store = build()?;
    let mut stores = built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if stores.1.len() >= STORES {
        stores.1.clear();
    }
    Ok(Arc::clone(stores.1.entry(key).or_insert(store)))
}

fn describe(url: &Url, range: &Range<u64>, e: object_store::Error) -> io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::Other,
    };
    let what = if let object_store::Error::Precondition { .. } = e {
        "the object changed since it was opened (its ETag no longer matches)".to_string()
    } else {
        e.to_string()
    };
    io::Error::new(kind, format!("GET {url} bytes {}..{}: {what}", range.start, range.end))
}

/// One range GET: the object's metadata, the range the server sent, and its
/// bytes. A body cut short is fetched again, [`RETRIES`] times at most.
async fn fetch(
    store: &dyn ObjectStore,
    url: &Url,
    path: &ObjectPath,
    range: GetRange,
    if_match: Option<String>,
    shown: Range<u64>,
    counter: &AtomicU64,
) -> io::Result<(ObjectMeta, Range<u64>, Vec<u8>)> {
    let mut attempt = 0;
    loop {
        counter.fetch_add(1, Ordering::Relaxed);
        let options = GetOptions { range: Some(range.clone()), if_match: if_match.clone(), ..GetOptions::default() };
        let result = store.get_opts(path, options).await.map_err(|e| describe(url, &shown, e))?;
        let (meta, got) = (result.meta.clone(), result.range.clone());
        let want = got.end - got.start;
        // The client retries a body that fails mid-way itself; a body
        // that ends early without an error is retried here.
        let why = match result.bytes().await {
            Ok(b) if b.len() as u64 == want => return Ok((meta, got, b.to_vec())),
            Ok(b) => format!("the response ended after {} of {want} bytes", b.len()),
            Err(e) => return Err(describe(url, &shown, e)),
        };
        if attempt >= RETRIES {
            return Err(io::Error::other(format!("GET {url} bytes {}..{}: {why} (after {RETRIES} retries)", shown.start, shown.end)));
        }
        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        attempt += 1;
    }
}

impl RemoteStorage {
    /// Opens the object at `url` (`http://`, `https://` or `s3://`): fetches
    /// its first [`HEAD_FETCH`] and last [`TAIL_FETCH`] bytes, concurrently;
    /// only the first when the last container opened from `url` in this
    /// process ([`open_storage`]) read nothing beyond them and the object
    /// is still the version it was then (same ETag, length and date).
    ///
    /// # Errors
    /// `InvalidInput` for a URL this module cannot open; `NotFound`,
    /// `PermissionDenied` or another I/O error naming the URL when the
    /// object cannot be fetched.
    pub fn open(url: &str) -> io::Result<RemoteStorage> {
        RemoteStorage::open_with_timeout(url, REQUEST_TIMEOUT)
    }

    /// [`RemoteStorage::open`] with requests abandoned after `timeout`
    /// ([`REQUEST_TIMEOUT`] by default): a request that takes longer is
    /// retried like a failed one, and when every retry has timed out the
    /// read fails with an I/O error naming the URL and byte range.
    ///
    /// # Errors
    /// As [`RemoteStorage::open`].
    pub fn open_with_timeout(url: &str, timeout: Duration) -> io::Result<RemoteStorage> {
        let url = Url::parse(url).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
        let (store, path) = store_for(&url, timeout)?;
        RemoteStorage::open_in(store, timeout, url, path)
    }

    fn open_in(store: Arc<dyn ObjectStore>, timeout: Duration, url: Url, path: ObjectPath) -> io::Result<RemoteStorage> {
        let requests = AtomicU64::new(0);
        let rt = runtime()?;
        let head_only = head_only().get(url.as_str()).cloned();
        let head_fetch = || fetch(&*store, &url, &path, GetRange::Bounded(0..HEAD_FETCH), None, 0..HEAD_FETCH, &requests);
        let tail_fetch = || fetch(&*store, &url, &path, GetRange::Suffix(TAIL_FETCH), None, 0..0, &requests);
        let (first, last) = rt.block_on(async {
            if head_only.is_some() {
                (head_fetch().await, None)
            } else {
                let (head, tail) = tokio::join!(head_fetch(), tail_fetch());
                (head, Some(tail))
            }
        });
        let (meta, _, head) = first?;
        let mut round_trips = 1;
        // Remembered as needing only its head, but another version now: its tail too.
        let last = match last {
            None if head_only.as_ref() != Some(&Version::from(&meta)) && meta.size > head.len() as u64 => {
                round_trips += 1;
                Some(rt.block_on(tail_fetch()))
            }
            last => last,
        };
        // The tail is an optimisation: if it failed, or came from another
        // version of the object, later reads fetch what they need.
        let (tail_at, tail) = match last {
            Some(Ok((m, got, bytes))) if same_object(&meta, &m) && got.end == meta.size => (got.start, bytes),
            _ => (meta.size, Vec::new()),
        };
        let bytes = (head.len() + tail.len()) as u64;
        Ok(RemoteStorage {
            store: std::sync::Mutex::new((std::process::id(), store)),
            timeout,
            url,
            path,
            meta,
            head,
            tail,
            tail_at,
            requests,
            round_trips: AtomicU64::new(round_trips),
            bytes: AtomicU64::new(bytes),
            ahead: std::sync::Mutex::default(),
            ahead_bytes: AtomicU64::new(0),
            beyond_head: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Records, once a container has opened, whether opening read anything
    /// beyond the head (see [`head_only`]).
    fn remember_open(&self) {
        let mut known = head_only();
        if self.beyond_head.load(Ordering::Relaxed) {
            known.remove(self.url.as_str());
            return;
        }
        if known.len() >= HEAD_ONLY_URLS {
            known.clear();
        }
        known.insert(self.url.to_string(), Version::from(&self.meta));
    }

    /// The object named `name` relative to this one's URL (an external-file
    /// slot), in the same store.
    ///
    /// # Errors
    /// As [`RemoteStorage::open`].
    pub fn sibling(&self, name: &str) -> io::Result<RemoteStorage> {
        let url = self
            .url
            .join(name)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} relative to {}: {e}", self.url)))?;
        if url.scheme() != self.url.scheme() || url.host() != self.url.host() || url.port() != self.url.port() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{url} is not in the store of {}", self.url)));
        }
        let path = ObjectPath::from_url_path(url.path()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
        RemoteStorage::open_in(self.store()?, self.timeout, url, path)
    }

    /// The client of this process (see [`runtime`]).
    fn store(&self) -> io::Result<Arc<dyn ObjectStore>> {
        let mut store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let pid = std::process::id();
        if store.0 != pid {
            let (fresh, _) = store_for(&self.url, self.timeout)?;
            std::mem::forget(std::mem::replace(&mut store.1, fresh));
            store.0 = pid;
        }
        Ok(Arc::clone(&store.1))
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// What this storage has fetched so far.
    pub fn stats(&self) -> Stats {
        Stats {
            requests: self.requests.load(Ordering::Relaxed),
            round_trips: self.round_trips.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    fn changed(&self, meta: &ObjectMeta) -> io::Error {
        io::Error::other(format!(
            "{} changed since it was opened (ETag {:?} and {} bytes then, ETag {:?} and {} bytes now): reopen it",
            self.url, self.meta.e_tag, self.meta.size, meta.e_tag, meta.size
        ))
    }
}

/// Whether two responses came from the same version of an object.
fn same_object(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.size == b.size && a.e_tag == b.e_tag && (a.e_tag.is_some() || a.last_modified == b.last_modified)
}

impl Storage for RemoteStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.meta.size)
    }

    fn gathers_reads(&self) -> bool {
        true
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        {
            let mut ahead = self.ahead.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(bytes) = ahead.get(&offset).filter(|b| b.len() == buf.len()) {
                buf.copy_from_slice(bytes);
                ahead.remove(&offset);
                self.ahead_bytes.fetch_sub(buf.len() as u64, Ordering::SeqCst);
                return Ok(());
            }
        }
        self.read_many(&mut [(offset, buf)])
    }

    fn will_read(&self, ranges: &[(u64, u64)]) {
        let mut bufs: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut reserved = 0u64;
        {
            let ahead = self.ahead.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for &(offset, len) in ranges {
                let in_memory =
                    offset.saturating_add(len) <= self.head.len() as u64 || offset >= self.tail_at || ahead.contains_key(&offset);
                if in_memory || offset.checked_add(len).is_none_or(|end| end > self.meta.size) {
                    continue;
                }
                // Reserve the range's bytes before allocating them, or skip it.
                let fits = |held: u64| held.checked_add(len).filter(|&t| t <= READ_AHEAD_MAX);
                if self.ahead_bytes.fetch_update(Ordering::SeqCst, Ordering::SeqCst, fits).is_err() {
                    continue;
                }
                reserved += len;
                bufs.push((offset, vec![0u8; len as usize]));
            }
        }
        let fetched = bufs.len() >= 2 && {
            let mut reads: Vec<(u64, &mut [u8])> = bufs.iter_mut().map(|(o, b)| (*o, b.as_mut_slice())).collect();
            // A failure here is met again, and reported, by the read itself.
            self.read_many(&mut reads).is_ok()
        };
        if !fetched {
            self.ahead_bytes.fetch_sub(reserved, Ordering::SeqCst);
            return;
        }
        let mut ahead = self.ahead.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (offset, bytes) in bufs {
            // Another thread's announcement of the same range: keep one.
            if let Some(old) = ahead.insert(offset, bytes) {
                self.ahead_bytes.fetch_sub(old.len() as u64, Ordering::SeqCst);
            }
        }
    }

    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        // Serve what the bytes fetched at open hold; list the rest.
        let mut wanted: Vec<(u64, usize)> = Vec::new();
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.meta.size).ok_or(io::ErrorKind::UnexpectedEof)?;
            if buf.is_empty() {
            } else if end <= self.head.len() as u64 {
                buf.copy_from_slice(&self.head[*offset as usize..end as usize]);
            } else if *offset >= self.tail_at {
                self.beyond_head.store(true, Ordering::Relaxed);
                let from = (*offset - self.tail_at) as usize;
                buf.copy_from_slice(&self.tail[from..from + buf.len()]);
            } else {
                self.beyond_head.store(true, Ordering::Relaxed);
                wanted.push((*offset, i));
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        // Neighbouring reads become one range.
        wanted.sort_unstable();
        let mut ranges: Vec<Range<u64>> = Vec::new();
        for &(offset, i) in &wanted {
            let end = offset + reads[i].1.len() as u64;
            match ranges.last_mut() {
                Some(last) if offset <= last.end.saturating_add(MERGE_GAP) && end.max(last.end) - last.start <= MERGE_MAX => {
                    last.end = last.end.max(end);
                }
                _ => ranges.push(offset..end),
            }
        }
        self.round_trips.fetch_add(ranges.len().div_ceil(CONCURRENCY) as u64, Ordering::Relaxed);
        let store = self.store()?;
        let store: &dyn ObjectStore = &*store;
        let fetched: Vec<(Range<u64>, Vec<u8>)> = runtime()?.block_on(async {
            use futures::stream::{StreamExt, TryStreamExt};
            futures::stream::iter(ranges.into_iter().map(|range| async move {
                let (meta, got, bytes) = fetch(
                    store,
                    &self.url,
                    &self.path,
                    GetRange::Bounded(range.clone()),
                    self.meta.e_tag.clone(),
                    range.clone(),
                    &self.requests,
                )
                .await?;
                self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                if !same_object(&self.meta, &meta) {
                    return Err(self.changed(&meta));
                }
                if got != range {
                    let url = &self.url;
                    return Err(io::Error::other(format!(
                        "GET {url} bytes {}..{}: the server sent bytes {}..{}",
                        range.start, range.end, got.start, got.end
                    )));
                }
                Ok((range, bytes))
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await
        })?;
        let mut fetched = fetched;
        fetched.sort_unstable_by_key(|(r, _)| r.start);
        for (offset, i) in wanted {
            // The range holding this read: the last one starting at or before it.
            let k = fetched.partition_point(|(r, _)| r.start <= offset) - 1;
            let (range, bytes) = &fetched[k];
            let from = (offset - range.start) as usize;
            let buf = &mut *reads[i].1;
            buf.copy_from_slice(&bytes[from..from + buf.len()]);
        }
        Ok(())
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{} is read-only", self.url)))
    }

    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{} is read-only", self.url)))
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Parts of a multipart upload by [`publish`]: 16 MiB (S3 takes 5 MiB to 5 GiB).
pub const PUBLISH_PART: u64 = 16 << 20;

/// Whether the object at `url` exists.
///
/// # Errors
/// `InvalidArgument` for a URL this module cannot open; `Io` when the store
/// does not answer.
pub fn exists(url: &str) -> crate::Result<bool> {
    let parsed = parse(url)?;
    let (store, path) = store_for(&parsed, REQUEST_TIMEOUT).map_err(|e| crate::Error::io(format!("checking {url}"), e))?;
    match runtime().map_err(|e| crate::Error::io("starting the network runtime", e))?.block_on(store.head(&path)) {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(crate::Error::io(format!("checking {url}"), io::Error::other(e.to_string()))),
    }
}

fn parse(url: &str) -> crate::Result<Url> {
    Url::parse(url).map_err(|e| crate::Error::new(crate::ErrorKind::InvalidArgument, format!("{url}: {e}")))
}

/// Uploads the container at `path` to `url` (an `s3://` URL), replacing
/// what is there: in one PUT up to [`PUBLISH_PART`] bytes, else as a
/// multipart upload of such parts, four in flight. Readers see the old
/// object or the new one, never a mix: S3 makes an object visible when its
/// upload completes, and a reader that opened the old one is told it
/// changed. Returns the bytes uploaded. The container is opened first, so
/// that only a readable container is published; its external-file slots
/// are not uploaded (`vds copy` folds them into the copy it publishes).
///
/// # Errors
/// `InvalidArgument` for a URL that is not `s3://`; as [`Dataset::open`]
/// for `path`; `Io` naming the URL when the upload fails (a failed
/// multipart upload is aborted).
pub fn publish(path: &std::path::Path, url: &str) -> crate::Result<u64> {
    publish_in_parts(path, url, PUBLISH_PART)
}

/// [`publish`] with parts of `part` bytes (for tests of multipart uploads).
#[doc(hidden)]
pub fn publish_in_parts(path: &std::path::Path, url: &str, part: u64) -> crate::Result<u64> {
    let parsed = parse(url)?;
    if parsed.scheme() != "s3" {
        return Err(crate::Error::new(crate::ErrorKind::InvalidArgument, format!("{url}: containers are published to s3:// URLs only")));
    }
    Dataset::open(path)?;
    let shown = path.display();
    let (store, key) = store_for(&parsed, REQUEST_TIMEOUT).map_err(|e| crate::Error::io(format!("publishing to {url}"), e))?;
    let mut file = std::fs::File::open(path).map_err(|e| crate::Error::io(format!("reading {shown}"), e))?;
    let len = file.metadata().map_err(|e| crate::Error::io(format!("reading {shown}"), e))?.len();
    let failed = |e: object_store::Error| crate::Error::io(format!("publishing {shown} to {url}"), io::Error::other(e.to_string()));
    let part = usize::try_from(part.max(1)).unwrap_or(usize::MAX);
    runtime().map_err(|e| crate::Error::io("starting the network runtime", e))?.block_on(async {
        use std::io::Read;
        if len <= part as u64 {
            let mut bytes = Vec::with_capacity(len as usize);
            file.read_to_end(&mut bytes).map_err(|e| crate::Error::io(format!("reading {shown}"), e))?;
            store.put(&key, PutPayload::from(bytes)).await.map_err(failed)?;
            return Ok(len);
        }
        let mut upload = WriteMultipart::new_with_chunk_size(store.put_multipart(&key).await.map_err(failed)?, part);
        let mut buf = vec![0u8; part];
        let mut sent = 0u64;
        while sent < len {
            let n = (len - sent).min(part as u64) as usize;
            if let Err(e) = file.read_exact(&mut buf[..n]) {
                let _ = upload.abort().await;
                return Err(crate::Error::io(format!("reading {shown}"), e));
            }
            if let Err(e) = upload.wait_for_capacity(4).await {
                let _ = upload.abort().await;
                return Err(failed(e));
            }
            upload.write(&buf[..n]);
            sent += n as u64;
        }
        upload.finish().await.map_err(failed)?;
        Ok(len)
    })
}
