//! Command handlers, one file per family; each handler parses its arguments, calls the core,
//! the node or a data type's key view, and replies through `host::Ctx` as its last step. What
//! several families share: the sequence commands' arguments (`args`), the reserve protocol's
//! Redis side (`reserve`, SEQ.NEXT and SEQ.HNEXT), the FLOOR commands' rules (`floor`).

pub(crate) mod args;
pub(crate) mod fence;
pub(crate) mod floor;
pub(crate) mod im;
pub(crate) mod im_read;
pub(crate) mod msgid;
pub(crate) mod openid;
pub(crate) mod seq;
pub(crate) mod seqmap;
#[cfg(feature = "test-hooks")]
pub(crate) mod test_hooks;
pub(crate) mod uid;
