//! The error a handler returns: the lowest layer, with no FFI and no imid import, so every other
//! layer can build one. `entry::call` turns it into the reply (`host::Ctx::reply_error`).

use std::ffi::CStr;

/// An error reply. Every text starts with an uppercase code (`ERR`, `WRONGTYPE`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// A fixed text, replied without an allocation.
    Static(&'static CStr),
    /// A text made for this call.
    Text(String),
    /// Redis's own "wrong number of arguments for '<command>' command".
    WrongArity,
}

impl Error {
    /// The text as the client sees it.
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        match self {
            Error::Static(s) => s.to_string_lossy().into_owned(),
            Error::Text(s) => s.clone(),
            Error::WrongArity => "ERR wrong number of arguments".to_owned(),
        }
    }
}

/// An `ERR` reply naming the rule broken.
pub(crate) fn err(msg: impl std::fmt::Display) -> Error {
    Error::Text(format!("ERR {msg}"))
}

/// Redis's own WRONGTYPE text, as for a GET on a list.
pub(crate) const WRONGTYPE: Error =
    Error::Static(c"WRONGTYPE Operation against a key holding the wrong kind of value");

pub(crate) const SYNTAX: Error = Error::Static(c"ERR syntax error");

pub(crate) const INTERNAL: Error = Error::Static(c"ERR internal error");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts() {
        assert_eq!(err("x must be y").text(), "ERR x must be y");
        assert!(WRONGTYPE.text().starts_with("WRONGTYPE "));
        assert!(Error::WrongArity.text().starts_with("ERR "));
    }
}
