//! # libvds: chunked N-dimensional arrays in one crash-safe file
//!
//! libvds stores seismic volumes, model grids, image stacks and climate
//! fields as chunked, optionally compressed N-dimensional arrays in a single
//! file (plus optional external data files). The file starts with a version
//! line and a JSON descriptor, so `head -n 2 file.vds` shows what is inside;
//! a checksummed, copy-on-write B+tree indexes the chunks, and commits are
//! atomic. The format is specified byte by byte in SPEC.md.
//!
//! ## Contents
//! - [`DatasetBuilder`] and [`VariableBuilder`] describe and create a file.
//! - [`Dataset`] opens, reads, writes and commits; [`OpenOptions`] for more control.
//! - [`Region`] selects a box (with optional step); [`Order`] is the caller's memory order.
//! - [`Error`] and [`ErrorKind`]: one error type for everything.
//!
//! ## Example
//! ```
//! use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};
//! # let dir = std::env::temp_dir().join(format!("vds-doc-lib-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let path = dir.join("example.vds");
//! # let _ = std::fs::remove_file(&path);
//! // A 3-D volume of 32-bit floats in 16^3 chunks, deflate-compressed.
//! let mut ds = DatasetBuilder::new()
//!     .axis(Axis::new("inline", 40))
//!     .axis(Axis::new("crossline", 30))
//!     .axis(Axis::new("depth", 20).unit("m").coordinates(1000.0, 1190.0))
//!     .variable(VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "depth"])
//!         .chunk(&[16, 16, 16])
//!         .codec(Codec::deflate(6)))
//!     .create(&path)?;
//! let volume: Vec<f32> = (0..40 * 30 * 20).map(|i| (i as f32 * 0.01).sin()).collect();
//! ds.write("amplitude", &Region::full(&[40, 30, 20])?, Order::C, &volume)?;
//! ds.close()?;
//!
//! // Read one inline slice back.
//! let ds = Dataset::open(&path)?;
//! let slice: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[7, 0, 0], &[1, 30, 20])?, Order::C)?;
//! assert_eq!(slice[..], volume[7 * 600..8 * 600]);
//! # Ok::<(), vds::Error>(())
//! ```
//!
//! ## API themes
//! - **Errors.** Every fallible call returns [`Result`]; [`Error::kind`] says
//!   what to do next, [`Error::location`] says where a file is damaged.
//!   No input — file bytes or arguments — makes the library panic.
//! - **Memory order.** On disk, the last axis varies fastest. Every read and
//!   write takes an [`Order`]: `Order::C` (last axis fastest) or
//!   `Order::Fortran` (first axis fastest).
//! - **Typed buffers.** Reads and writes take slices of an [`Element`] type,
//!   checked against the variable's [`DType`] before any byte moves.
//! - **Commits.** Writes are copy-on-write and become durable and visible
//!   atomically at [`Dataset::commit`] or [`Dataset::close`]; dropping a
//!   dataset discards uncommitted writes.
//! - **Threads.** A `Dataset` is `Send + Sync`; reads take `&self`, writes `&mut self`.
//!   One writer per file at a time (an advisory lock enforces it).

#![warn(missing_docs)]

mod array;
mod cache;
mod codec;
mod commit;
mod dataset;
mod error;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
mod hash;
mod index;
#[cfg(feature = "remote")]
pub mod remote;
mod spec;
mod storage;
mod wire;

pub use array::{Element, Order, Region, RegionPieces};
pub use dataset::{
    default_block_shape, default_chunk_shape, is_url, CompactReport, Dataset, DatasetBuilder, Durability, Layout, MergeReport, OpenOptions,
    Recovery, SlotOpener, SlotPolicy, Space, Stats, VarRef, VariableBuilder, VerifyReport, COMPACT_LIMIT, DEFAULT_BLOCKS_MIN_CHUNK,
    DEFAULT_BLOCK_BYTES, DEFAULT_CHUNK_BYTES, DEFAULT_MEMORY_LIMIT, FILE_LOCKING_ENV,
};
pub use error::{Error, ErrorKind, Location, Result};
/// The JSON library of attribute values, re-exported so that callers use the same version.
pub use serde_json;
pub use spec::{
    Axis, Codec, Compression, DType, LodMethod, Predictor, Quantization, Scalar, Variable, FORMAT_MAJOR, FORMAT_MINOR, MAX_CHUNK_BYTES,
    MAX_DIMS, MAX_LODS, MAX_MARGIN, MAX_PARTITIONINGS, MAX_VARIABLES,
};
pub use storage::{FileStorage, MemoryStorage, Storage};
