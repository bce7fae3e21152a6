//! Local-folder sources: the embedded default, so the service is useful
//! before anyone configures GitLab or Nextcloud. Same traits, same
//! semantics as the real ones (the contract suite runs against both).

mod grep;
mod search;
mod store;
mod wiki;

pub use search::LocalFileSearch;
pub use store::LocalFileStore;
pub use wiki::LocalWiki;
