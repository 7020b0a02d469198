//! A key as the SEQ.H* commands see it: missing, a sequence map, or (WRONGTYPE, when opened)
//! anything else.

use super::TYPE;
use crate::core::idmp::{Entry, FieldRequest};
use crate::core::seq::Seq;
use crate::core::seqmap::{Batch, MapError, SeqMap, Written, MAX_NAME};
use crate::error::{err, Error};
use crate::host::key::TypedKey;
use crate::host::value::{Made, Word};
use crate::host::{Arg, Ctx};
use crate::node::{self, fence};

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

/// A refused field name's error.
pub(crate) fn field_error() -> Error {
    err(format_args!("field name must be 1..{MAX_NAME} bytes"))
}

impl From<WriteError> for Error {
    fn from(e: WriteError) -> Error {
        match e {
            WriteError::Map(MapError::Name) => field_error(),
            WriteError::Map(MapError::Full) => {
                err("sequence map full (its fields would pass 4 GiB)")
            }
            WriteError::Host(e) => e,
        }
    }
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

    /// A field's state: missing (no key, no field) is [`node::missing`].
    pub(crate) fn field(&self, field: &[u8]) -> Seq {
        self.get()
            .and_then(|m| m.get(field))
            .unwrap_or_else(node::missing)
    }

    /// Sets `field` to `s`, creating the map when the key is missing; a raise is charged to the
    /// gate (`node::fence::charge_raise`), as every write that is not a reservation is. A refused
    /// field changes nothing, and a map that this call created (so is empty) is deleted again.
    #[inline]
    pub(crate) fn set_field(&mut self, field: &[u8], s: Seq) -> Result<(), WriteError> {
        let old = self.field(field);
        self.write_field(field, old, s)
    }

    /// [`MapKey::set_field`] with the field's state `old` already read.
    fn write_field(&mut self, field: &[u8], old: Seq, s: Seq) -> Result<(), WriteError> {
        self.update(|m| m.set(field, s).map(drop))?;
        fence::charge_raise(s.value().saturating_sub(old.value()));
        Ok(())
    }

    /// Raises `field` to `to` (SEQ.HADVANCE, IM.READ's cursor, IM.CHANGE's trimmed marker),
    /// never lowers it, its gap mark kept; a raise is charged as [`MapKey::set_field`]'s. The
    /// field now, and whether it moved.
    pub(crate) fn raise_field(&mut self, field: &[u8], to: u64) -> Result<(Seq, bool), Error> {
        let old = self.field(field);
        let new = old.advance(to).ok_or_else(|| err("value out of range"))?;
        let moved = new.value() != old.value();
        if moved {
            self.write_field(field, old, new).map_err(Error::from)?;
        }
        Ok((new, moved))
    }

    /// Writes `batch` (SEQ.HSET), all or nothing: into a missing key, a map built at once (as an
    /// RDB load builds one, instead of growing it through every resize of its index); else
    /// field by field. What it raised is charged as [`MapKey::set_field`]'s.
    pub(crate) fn set_batch(&mut self, batch: &Batch) -> Result<Written, WriteError> {
        let written = if self.key.word().is_none() {
            let (m, w) = SeqMap::from_batch(batch).map_err(WriteError::Map)?;
            self.key.put(Made::Boxed(m))?;
            w
        } else {
            self.update(|m| m.set_batch(batch))?
        };
        if written.changed {
            fence::charge_raise(written.raised);
        }
        Ok(written)
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
