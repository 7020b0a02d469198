//! A slow disk and a power loss (`tests/modules/slowdisk.c`, an LD_PRELOAD library wrapping
//! fsync and fdatasync): [`SlowDisk`] makes every flush of a server take as long as the test
//! says, and logs what each flush made durable, so that [`SlowDisk::power_loss`] can cut the
//! server's AOF files back to their last completed fsync, as a host crash would.

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `tests/modules/slowdisk.c` built once per test process.
pub fn slowdisk_lib() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        let dir = temp_dir("slowdisk");
        let so = dir.join("slowdisk.so");
        let src = root().join("tests/modules/slowdisk.c");
        let st = Command::new("gcc")
            .args(["-O2", "-Wall", "-fPIC", "-shared", "-o"])
            .arg(&so)
            .arg(&src)
            .arg("-ldl")
            .status()
            .expect("gcc (scripts/deps.sh installs it)");
        assert!(st.success(), "gcc failed on {}", src.display());
        so
    })
}

/// The disk of one or more servers ([`Launch::slow_disk`]): how long each flush takes, and the
/// log of what the flushes made durable.
pub struct SlowDisk {
    dir: PathBuf,
}

impl Default for SlowDisk {
    fn default() -> Self {
        SlowDisk::new()
    }
}

impl SlowDisk {
    /// A healthy disk (no delay) until [`SlowDisk::set_ms`].
    pub fn new() -> SlowDisk {
        let dir = temp_dir("disk");
        std::fs::write(dir.join("ctl"), "0").expect("write the slow disk's control file");
        SlowDisk { dir }
    }

    pub(super) fn env(&self) -> Vec<(String, String)> {
        let path = |f: &str| self.dir.join(f).display().to_string();
        vec![
            (
                "LD_PRELOAD".to_owned(),
                slowdisk_lib().display().to_string(),
            ),
            ("SLOWDISK_CTL".to_owned(), path("ctl")),
            ("SLOWDISK_LOG".to_owned(), path("log")),
        ]
    }

    /// From now on every fsync and fdatasync sleeps `ms` before it starts.
    pub fn set_ms(&self, ms: u64) {
        std::fs::write(self.dir.join("ctl"), ms.to_string())
            .expect("write the slow disk's control file");
    }

    /// The largest size each file was made durable at (by any flush logged so far).
    fn durable_sizes(&self) -> std::collections::HashMap<PathBuf, u64> {
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let mut sizes = std::collections::HashMap::new();
        for line in log.lines() {
            let Some((path, size)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(size) = size.parse::<u64>() else {
                continue;
            };
            let e = sizes.entry(PathBuf::from(path)).or_insert(0);
            *e = (*e).max(size);
        }
        sizes
    }

    /// A power loss of a stopped server whose data is in `dir`: every AOF file of its
    /// `appendonlydir` cut back to the size its last completed flush made durable (0 when none
    /// was). Returns how many bytes were cut.
    pub fn power_loss(&self, dir: &Path) -> u64 {
        let sizes = self.durable_sizes();
        let aof_dir = dir.join("appendonlydir");
        let mut cut = 0;
        for entry in std::fs::read_dir(&aof_dir).expect("the server's appendonlydir") {
            let path = entry.expect("an AOF file").path();
            if !path.to_string_lossy().ends_with(".incr.aof") {
                continue;
            }
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let keep = sizes.get(&real).copied().unwrap_or(0).min(len);
            if keep < len {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .expect("open an AOF file");
                f.set_len(keep).expect("cut an AOF file");
                cut += len - keep;
            }
        }
        cut
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
