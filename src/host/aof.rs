//! What the durability gate (`node::durable`) calls in Redis and the system: whether Redis's
//! background AOF fsync is pending (so that this iteration's AOF write may be postponed), the
//! AOF's files (from its manifest), and a thread of imid's own that fsyncs them.
//!
//! Redis (`appendfsync everysec`) postpones writing its AOF buffer, for up to 2 s, while its
//! background fsync runs, and replies meanwhile: a process crash then loses what was in the
//! buffer. It decides by `aofFsyncInProgress()` in `flushAppendOnlyFile`, the function every
//! supported server exports (it is linked with `-rdynamic`); where the server is one whose
//! source says so (Redis 7.0 to 8.6, Valkey 8.0 to 9.1), imid asks that function ([`probe`]),
//! a few instructions; elsewhere `INFO persistence`'s `aof_pending_bio_fsync`, the same job
//! count read through the formatted section (some microseconds).
//!
//! No module API says when an AOF byte is on disk; imid fsyncs the AOF files itself, in the
//! background ([`Fsyncer`]), after Redis has written what it must cover, and learns the
//! outcome on the main thread through `RedisModule_EventLoopAddOneShot`.

use super::server::ServerInfo;
use super::Ctx;
use redis_module::raw;
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

/// How [`fsync_pending`] asks: not yet resolved, through the server's function, through INFO.
static PROBE: AtomicU8 = AtomicU8::new(0);
const VIA_FUNCTION: u8 = 1;
const VIA_INFO: u8 = 2;
static FUNCTION: OnceLock<unsafe extern "C" fn() -> c_int> = OnceLock::new();

/// Resolves how to ask whether a background AOF fsync is pending (OnLoad): the server's own
/// `aofFsyncInProgress` when the server `version` (`(major, minor)`, Valkey's own numbers when
/// `valkey`) is one whose `flushAppendOnlyFile` is known to decide by it, else INFO. Returns
/// which, for the load's log line.
pub(crate) fn resolve_probe(version: (u32, u32), valkey: bool) -> &'static str {
    let known = if valkey {
        ((8, 0)..=(9, 1)).contains(&version)
    } else {
        ((7, 0)..=(8, 6)).contains(&version)
    };
    if known {
        // SAFETY: dlsym with RTLD_DEFAULT searches the executable's exported symbols; the name
        // is NUL-terminated. The symbol, when found, is `int aofFsyncInProgress(void)` in every
        // server version accepted above (their sources), taking nothing and reading server
        // state on the main thread, where imid calls it.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"aofFsyncInProgress".as_ptr()) };
        if !sym.is_null() {
            // SAFETY: the signature, as above.
            let f =
                unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(sym) };
            let _ = FUNCTION.set(f);
            PROBE.store(VIA_FUNCTION, Ordering::Relaxed);
            return "the server's own aofFsyncInProgress()";
        }
    }
    PROBE.store(VIA_INFO, Ordering::Relaxed);
    "INFO persistence (aof_pending_bio_fsync)"
}

/// Whether Redis's background AOF fsync is pending now, so that the AOF write at the end of
/// this event loop iteration may be postponed (`appendfsync everysec` only). Main thread only.
/// Unknown (the probe unresolved, INFO unreadable): pending, the safe answer.
#[inline]
pub(crate) fn fsync_pending() -> bool {
    match PROBE.load(Ordering::Relaxed) {
        VIA_FUNCTION => match FUNCTION.get() {
            // SAFETY: see `resolve_probe`; called on the main thread, like the server's own
            // calls.
            Some(f) => unsafe { f() != 0 },
            None => true,
        },
        _ => info_fsync_pending().unwrap_or(true),
    }
}

#[cold]
fn info_fsync_pending() -> Option<bool> {
    ServerInfo::read(c"persistence")?
        .int_field(c"aof_pending_bio_fsync")
        .map(|n| n != 0)
}

/// The AOF settings the gate follows, as `CONFIG GET` reads them (a context with a client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// `appendfsync`: `always`, `everysec` or `no`.
    pub(crate) fsync: Vec<u8>,
    /// `no-appendfsync-on-rewrite yes`: Redis skips its fsyncs while a child runs.
    pub(crate) no_fsync_on_rewrite: bool,
    /// The AOF directory (`dir`/`appenddirname`) and its manifest's file name.
    pub(crate) files: Option<(PathBuf, String)>,
}

impl Ctx {
    /// The AOF settings, `None` when a config cannot be read.
    pub(crate) fn aof_settings(&self) -> Option<Settings> {
        let fsync = self.config_text(c"appendfsync")?;
        let no_fsync_on_rewrite = self.config_yes(c"no-appendfsync-on-rewrite")?;
        let dir = self
            .config_text(c"dir")
            .map(|d| PathBuf::from(String::from_utf8_lossy(&d).into_owned()));
        // Redis 7.0+: the files are in `appenddirname`, listed by `<appendfilename>.manifest`.
        let sub = self.config_text(c"appenddirname");
        let name = self.config_text(c"appendfilename");
        let files = match (dir, sub, name) {
            (Some(d), Some(s), Some(n)) => Some((
                d.join(String::from_utf8_lossy(&s).into_owned()),
                format!("{}.manifest", String::from_utf8_lossy(&n)),
            )),
            _ => None,
        };
        Some(Settings {
            fsync,
            no_fsync_on_rewrite,
            files,
        })
    }

    fn config_text(&self, name: &CStr) -> Option<Vec<u8>> {
        self.config_get(name)
    }
}

/// The files a manifest lists (`file <name> seq <n> type <b|h|i>` lines; a name with spaces or
/// quotes is written quoted): the base and the incremental ones, which a restart loads. History
/// files (`h`) are left out: no restart reads them.
pub(crate) fn manifest_files(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let words = split_words(line)?;
            let mut name = None;
            let mut kind = None;
            let mut it = words.iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                match k.as_str() {
                    "file" => name = Some(v.clone()),
                    "type" => kind = Some(v.clone()),
                    _ => {}
                }
            }
            match kind.as_deref() {
                Some("b") | Some("i") => name,
                _ => None,
            }
        })
        .collect()
}

/// A manifest line's words, a double-quoted word unquoted (`\"` and `\\` inside); `None` for a
/// line that does not parse.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => w.push(chars.next()?),
                    x => w.push(x),
                }
            }
        } else {
            while let Some(&x) = chars.peek() {
                if x == ' ' {
                    break;
                }
                w.push(x);
                chars.next();
            }
        }
        words.push(w);
    }
    Some(words)
}

/// fsyncs the files `manifest` (in `dir`) lists: `Ok` once every one of them is on disk.
fn fsync_files(dir: &Path, manifest: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join(manifest))
        .map_err(|e| format!("read {}: {e}", dir.join(manifest).display()))?;
    let files = manifest_files(&text);
    if files.is_empty() {
        return Err(format!(
            "{} lists no AOF file",
            dir.join(manifest).display()
        ));
    }
    for f in files {
        let path = dir.join(&f);
        let file =
            std::fs::File::open(&path).map_err(|e| format!("open {}: {e}", path.display()))?;
        // fdatasync flushes the file's data (and the size it needs), as Redis's own fsync of
        // the AOF does; a read-only descriptor is enough on Linux.
        file.sync_data()
            .map_err(|e| format!("fsync {}: {e}", path.display()))?;
    }
    Ok(())
}

/// fsyncs the AOF files now, on the calling thread (the end of a load, when the server serves
/// nobody yet).
pub(crate) fn fsync_now(dir: &Path, manifest: &str) -> Result<(), String> {
    fsync_files(dir, manifest)
}

/// A finished fsync job: the point it covers, and how it went.
pub(crate) type Done = (u64, Result<(), String>);

/// imid's own fsync thread: one job at a time (the gate starts the next once one is done).
pub(crate) struct Fsyncer {
    jobs: Mutex<Option<Sender<(u64, PathBuf, String)>>>,
    done: Mutex<Vec<Done>>,
}

/// The main-thread callback a finished job wakes (`entry::durable`), handed down at load.
static WAKE: OnceLock<raw::RedisModuleEventLoopOneShotFunc> = OnceLock::new();

/// Installs the callback a finished fsync job runs on the main thread (OnLoad).
pub(crate) fn set_wake(f: raw::RedisModuleEventLoopOneShotFunc) {
    let _ = WAKE.set(f);
}

pub(crate) static FSYNCER: Fsyncer = Fsyncer {
    jobs: Mutex::new(None),
    done: Mutex::new(Vec::new()),
};

impl Fsyncer {
    /// Starts fsyncing the AOF files (`dir`, `manifest`) for `point`, in the background (the
    /// thread starts with the first job). `false` when the thread cannot take it.
    pub(crate) fn start(&'static self, point: u64, dir: PathBuf, manifest: String) -> bool {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.is_none() {
            let (tx, rx) = channel::<(u64, PathBuf, String)>();
            let spawned = std::thread::Builder::new()
                .name("imid-fsync".to_owned())
                .spawn(move || {
                    while let Ok((point, dir, manifest)) = rx.recv() {
                        let r = fsync_files(&dir, &manifest);
                        self.done
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((point, r));
                        wake();
                    }
                });
            if spawned.is_err() {
                return false;
            }
            *jobs = Some(tx);
        }
        jobs.as_ref()
            .is_some_and(|tx| tx.send((point, dir, manifest)).is_ok())
    }

    /// The jobs finished since the last call (main thread).
    pub(crate) fn take_done(&self) -> Vec<Done> {
        std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Asks the main thread to run the wake callback (from the fsync thread).
fn wake() {
    let Some(f) = WAKE.get().copied().flatten() else {
        return;
    };
    // SAFETY: RedisModule_EventLoopAddOneShot may be called from any thread (its list is under
    // a mutex, and it wakes the event loop through a pipe); its pointer was filled in at load
    // and is only read since; the callback lives as long as the module and takes no data.
    unsafe {
        if let Some(add) = raw::RedisModule_EventLoopAddOneShot {
            add(Some(f), std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_lists_the_base_and_incremental_files() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\n\
                    file appendonly.aof.1.incr.aof seq 1 type i\n\
                    file appendonly.aof.2.incr.aof seq 2 type i\n\
                    file \"a b\\\"c.aof.3.incr.aof\" seq 3 type i\n\
                    file old.aof.0.base.rdb seq 0 type h\n";
        assert_eq!(
            manifest_files(text),
            [
                "appendonly.aof.1.base.rdb",
                "appendonly.aof.1.incr.aof",
                "appendonly.aof.2.incr.aof",
                "a b\"c.aof.3.incr.aof"
            ]
        );
        assert!(manifest_files("file \"unterminated type i\n").is_empty());
    }
}
