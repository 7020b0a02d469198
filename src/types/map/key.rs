//! A key as the SEQ.H* commands see it: missing, a sequence map, or (WRONGTYPE, when opened)
//! anything else.

use super::TYPE;
use crate::core::idmp::{Entry, FieldRequest};
use crate::core::seq::Seq;
use crate::core::seqmap::{Batch, MapError, SeqMap, Written};
use crate::error::Error;
use crate::host::key::TypedKey;
use crate::host::value::{Made, Word};
use crate::host::{Arg, Ctx};

/// A map key, open for reading or writing; it borrows the call's context and the key's name
/// (`'a`) like the [`TypedKey`] it wraps. Dropped after a write, it queues a map the write left
/// with background work for the cron (`super::idle`).
pub(crate) struct MapKey<'a> {
    key: TypedKey<'a, SeqMap>,
    ctx: &'a Ctx,
    name: &'a Arg,
}

impl Drop for MapKey<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(m) = self.key.value_mut() {
            super::idle::after_write(self.ctx, self.name, m);
        }
    }
}

/// Why a write to a map key failed.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The map refused the field (nothing changed).
    Map(MapError),
    Host(Error),
}

impl From<Error> for WriteError {
    fn from(e: Error) -> WriteError {
        WriteError::Host(e)
    }
}

impl<'a> MapKey<'a> {
    /// Opens `name` for reading; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_read(ctx: &'a Ctx, name: &'a Arg) -> Result<MapKey<'a>, Error> {
        Self::open(ctx, name, false)
    }

    /// Opens `name` for writing; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_write(ctx: &'a Ctx, name: &'a Arg) -> Result<MapKey<'a>, Error> {
        Self::open(ctx, name, true)
    }

    #[inline]
    fn open(ctx: &'a Ctx, name: &'a Arg, write: bool) -> Result<MapKey<'a>, Error> {
        TypedKey::open(ctx, &TYPE, name, write).map(|key| MapKey { key, ctx, name })
    }

    /// The map, or `None` for a missing key.
    #[inline]
    pub(crate) fn get(&self) -> Option<&SeqMap> {
        match self.key.value()? {
            Word::Boxed(m) => Some(m),
            Word::Inline(_) => None,
        }
    }

    /// The map to change in place (the key must have been opened for writing), created empty
    /// when the key is missing. Redis keeps the key's TTL: the value is changed, not replaced.
    #[inline(always)]
    pub(crate) fn get_or_create(&mut self) -> Result<&mut SeqMap, Error> {
        if self.key.word().is_none() {
            self.key.put(Made::Boxed(SeqMap::new()))?;
        }
        self.key
            .value_mut()
            .ok_or(Error::Static(c"ERR internal error: no map"))
    }

    /// Sets `field` to `s`, creating the map when the key is missing. A refused field changes
    /// nothing, and a map that this call created (so is empty) is deleted again.
    #[inline]
    pub(crate) fn set_field(&mut self, field: &[u8], s: Seq) -> Result<(), WriteError> {
        self.update(|m| m.set(field, s).map(drop))
    }

    /// Writes `batch` (SEQ.HSET), all or nothing: into a missing key, a map built at once (as an
    /// RDB load builds one, instead of growing it through every resize of its index); else
    /// field by field.
    pub(crate) fn set_batch(&mut self, batch: &Batch) -> Result<Written, WriteError> {
        if self.key.word().is_none() {
            let (m, w) = SeqMap::from_batch(batch).map_err(WriteError::Map)?;
            self.key.put(Made::Boxed(m))?;
            return Ok(w);
        }
        self.update(|m| m.set_batch(batch))
    }

    /// Runs `f` on the map (created when missing); when it fails and the map is left empty, the
    /// key is deleted, so a failed write never leaves an empty map behind.
    #[inline(always)]
    pub(crate) fn update<T>(
        &mut self,
        f: impl FnOnce(&mut SeqMap) -> Result<T, MapError>,
    ) -> Result<T, WriteError> {
        let m = self.get_or_create()?;
        match f(m) {
            Ok(v) => Ok(v),
            Err(e) => {
                if m.is_empty() {
                    self.delete();
                }
                Err(WriteError::Map(e))
            }
        }
    }

    /// Records an IDMP token in the map's window (created when the map has none): the `drop`
    /// oldest tokens go, `e` is appended. The map must exist (a field was just set).
    pub(crate) fn record_token(
        &mut self,
        drop: usize,
        e: Entry<FieldRequest>,
    ) -> Result<(), Error> {
        self.get_or_create()?
            .tokens
            .get_or_insert_with(Box::default)
            .apply(drop, e);
        Ok(())
    }

    /// Deletes the key (its last field was removed).
    pub(crate) fn delete(&mut self) {
        self.key.delete();
    }
}
