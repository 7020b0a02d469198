//! Redis strings this module owns: the text a string config hands to Redis (its getter
//! borrows one; a setter's error is given away).

use redis_module::raw;

/// A Redis string this module owns, created without a context and freed on drop.
#[repr(transparent)]
pub(crate) struct HeldString(*mut raw::RedisModuleString);

/// A borrowed [`HeldString`], for a getter to hand to Redis.
#[derive(Clone, Copy)]
pub(crate) struct HeldRef(*mut raw::RedisModuleString);

impl HeldRef {
    /// The string, for a config getter to hand to Redis (which copies it).
    pub(crate) fn as_raw(self) -> *mut raw::RedisModuleString {
        self.0
    }
}

// SAFETY: the string is created, read (by Redis, through the getter) and freed only on Redis's
// main thread, inside config callbacks; the pointer is never dereferenced by this module.
unsafe impl Send for HeldString {}
// SAFETY: as above; shared references only copy the pointer.
unsafe impl Sync for HeldString {}

impl HeldString {
    pub(crate) fn new(bytes: &[u8]) -> Option<HeldString> {
        // SAFETY: CreateString is filled in at load; it copies `len` bytes from `ptr`; a null
        // context makes a string that lives until FreeString.
        let s = unsafe {
            raw::RedisModule_CreateString
                .map(|create| create(std::ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()))
        }?;
        (!s.is_null()).then_some(HeldString(s))
    }

    /// The string as a command argument (a key name to open), borrowed from it.
    pub(crate) fn as_arg(&self) -> &crate::host::Arg {
        // SAFETY: both are transparent wrappers of one `*mut RedisModuleString`; the reference
        // borrows `self`, so the string lives while the `Arg` is used.
        unsafe { &*(self as *const HeldString).cast::<crate::host::Arg>() }
    }

    pub(crate) fn borrow(&self) -> HeldRef {
        HeldRef(self.0)
    }

    /// Gives the string away (to Redis, which frees it), without freeing it here.
    pub(crate) fn into_raw(self) -> *mut raw::RedisModuleString {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl Drop for HeldString {
    fn drop(&mut self) {
        // SAFETY: the string was created with a null context and is freed exactly once, here.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeString {
                free(std::ptr::null_mut(), self.0);
            }
        }
    }
}
