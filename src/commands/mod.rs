//! Command handlers, one file per family; each handler parses its arguments (`crate::args`
//! holds the rules several families share), then calls the hand-out layer (`crate::handout`)
//! for what it hands out, or a data type's key view, and replies. No file here imports another.

pub(crate) mod fence;
pub(crate) mod im;
pub(crate) mod im_read;
pub(crate) mod msgid;
pub(crate) mod openid;
pub(crate) mod seq;
pub(crate) mod seqmap;
#[cfg(feature = "test-hooks")]
pub(crate) mod test_hooks;
pub(crate) mod uid;
