//! The container's layout (SPEC.md 1.1): which one a new container gets,
//! the feature flag that announces the compact one, and the commit at which
//! a compact container that has grown moves its index to 4 KiB pages.
//!
//! The head length says which layout a file has; the descriptor's
//! `compact_layout` flag must agree with it, so that a file whose head and
//! descriptor disagree is reported as corrupt rather than read with the
//! wrong slot size.

use super::{Dataset, DescriptorJson};
use crate::commit::is_compact;
use crate::error::{Error, Result};
use crate::index::{self, Change, Entry, Key, PageReader, PageWriter, Root, COMPACT_PAGE, DEFAULT_PAGE};
use crate::spec::FEATURE_COMPACT;

/// How a new container is laid out (see [`DatasetBuilder::layout`](super::DatasetBuilder::layout)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// Compact when the declared data of all variables is at most
    /// [`COMPACT_LIMIT`] bytes, aligned otherwise.
    #[default]
    Auto,
    /// A head padded to a multiple of 128 bytes, 128-byte commit slots and
    /// 256-byte index pages while the container is below [`COMPACT_LIMIT`]
    /// bytes (format 1.4, feature `compact_layout`).
    Compact,
    /// A head padded to a multiple of 4096 bytes with room for the
    /// descriptor to double, 512-byte commit slots and 4096-byte index pages
    /// (every format 1.x reader reads it).
    Aligned,
}

/// The size below which [`Layout::Auto`] chooses the compact layout, and
/// below which a compact container keeps 256-byte index pages: 64 KiB.
pub const COMPACT_LIMIT: u64 = 64 << 10;

impl Layout {
    /// Whether a container described by `desc` gets the compact layout.
    pub(crate) fn is_compact_for(self, desc: &DescriptorJson) -> bool {
        match self {
            Layout::Compact => true,
            Layout::Aligned => false,
            Layout::Auto => declared_bytes(desc) <= COMPACT_LIMIT,
        }
    }
}

/// The bytes of every variable's declared extent (at level 0), saturating.
fn declared_bytes(desc: &DescriptorJson) -> u64 {
    desc.variables
        .iter()
        .map(|v| {
            let size = crate::spec::DType::from_name(&v.dtype).map_or(8, |t| t.size() as u64);
            v.axes.iter().map(|name| desc.axes.iter().find(|a| &a.name == name).map_or(0, |a| a.samples)).fold(size, u64::saturating_mul)
        })
        .fold(0, u64::saturating_add)
}

/// Lists `compact_layout` in `incompat` exactly when `compact`.
pub(crate) fn mark(desc: &mut DescriptorJson, compact: bool) {
    let listed = &mut desc.features.incompat;
    listed.retain(|f| f != FEATURE_COMPACT);
    if compact {
        listed.push(FEATURE_COMPACT.into());
    }
}

/// The index page size a new container of this layout starts with.
pub(crate) fn first_page_size(compact: bool) -> u32 {
    if compact {
        COMPACT_PAGE
    } else {
        DEFAULT_PAGE
    }
}

/// Checks that the descriptor lists `compact_layout` exactly when the head
/// is compact (SPEC.md 3.4).
pub(crate) fn check_flag(desc: &DescriptorJson, head_len: u64, desc_offset: u64) -> Result<()> {
    let listed = desc.features.incompat.iter().any(|f| f == FEATURE_COMPACT);
    match (is_compact(head_len), listed) {
        (true, false) => Err(Error::corrupt(
            "descriptor",
            0,
            desc_offset,
            format!("the head is {head_len} bytes, the compact layout, but \"incompat\" does not list {FEATURE_COMPACT:?}"),
        )),
        (false, true) => Err(Error::corrupt(
            "descriptor",
            0,
            desc_offset,
            format!("\"incompat\" lists {FEATURE_COMPACT:?} but the head is {head_len} bytes, the aligned layout"),
        )),
        _ => Ok(()),
    }
}

impl Dataset {
    /// The layout of the container: [`Layout::Compact`] or [`Layout::Aligned`].
    pub fn layout(&self) -> Layout {
        if is_compact(self.commit.head_len) {
            Layout::Compact
        } else {
            Layout::Aligned
        }
    }

    /// The size of the index pages of the current commit, in bytes: 4096,
    /// or 256 while a compact container is small (SPEC.md 1.1).
    pub fn index_page_size(&self) -> u32 {
        self.commit.page_size
    }

    /// The page size and new pages of the commit in progress: the merge of
    /// `changes` into the current tree, unless this is a compact container
    /// with small pages that would reach [`COMPACT_LIMIT`] bytes, in which
    /// case the whole index is written afresh with 4096-byte pages (none
    /// shared with the previous tree, which stays whole until the new slot
    /// is published, so a crash leaves the previous commit as it was).
    pub(super) fn index_pages(&self, changes: &[Change]) -> Result<(u32, PageWriter, Option<Root>, u64)> {
        let page_size = self.commit.page_size;
        let mut w = PageWriter { page_size: page_size as usize, base: self.end, buf: Vec::new() };
        let (root, entries) = index::merge(&self.reader, &*self.storage, self.commit.root, self.commit.entries, changes, &mut w)?;
        if page_size >= DEFAULT_PAGE || self.end + (w.buf.len() as u64) < COMPACT_LIMIT {
            return Ok((page_size, w, root, entries));
        }
        let mut all: std::collections::BTreeMap<Key, Entry> = self.committed_entries()?.into_iter().collect();
        for (k, e) in changes {
            match e {
                Some(e) => all.insert(*k, *e),
                None => all.remove(k),
            };
        }
        let fresh: Vec<Change> = all.into_iter().map(|(k, e)| (k, Some(e))).collect();
        let mut w = PageWriter { page_size: DEFAULT_PAGE as usize, base: self.end, buf: Vec::new() };
        let unused = PageReader::new(DEFAULT_PAGE, 0);
        let (root, entries) = index::merge(&unused, &*self.storage, None, 0, &fresh, &mut w)?;
        Ok((DEFAULT_PAGE, w, root, entries))
    }
}
