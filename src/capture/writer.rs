//! Writing a bundle: a new folder, or one tar file whose members sit under a
//! top folder (so `tar xf` gives the same folder back). Nothing is written
//! over an existing file, and no link is followed: capture often runs as
//! root into a shared place such as /tmp, where another user could plant a
//! link to a file root would then overwrite.
//!
//! The folder is created 0700 (journals and `ps -ww` command lines are not
//! for every local user); an existing one is used only when it is empty, a
//! real folder (not a link) and the caller's own. Members are created in it
//! through its descriptor with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, so a
//! folder renamed or a link planted after the checks is never written
//! through. The tar file and the redaction mapping get the same flags.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::error::Error;

/// One file of the bundle, by its name inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub bytes: Vec<u8>,
}

fn output_error(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.display().to_string(),
        source,
    }
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.to_owned())
}

/// Into `dir`, which must not exist yet, or be an empty folder of the
/// caller's own.
pub fn write_dir(dir: &Path, members: &[Member]) -> Result<(), Error> {
    let folder = open_private_dir(dir)?;
    for m in members {
        let path = dir.join(&m.name);
        let mut file = create_in(&folder, &m.name).map_err(output_error(&path))?;
        file.write_all(&m.bytes).map_err(output_error(&path))?;
    }
    Ok(())
}

/// Creates `dir` 0700, or takes an existing empty one the caller owns (made
/// 0700), and returns it opened without following a link.
fn open_private_dir(dir: &Path) -> Result<File, Error> {
    let err = output_error(dir);
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(output_error(parent))?;
    }
    let created = match private_dir_builder().create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(err(e)),
    };
    let folder = open_dir_nofollow(dir).map_err(|e| {
        if e.raw_os_error() == Some(ELOOP) || e.raw_os_error() == Some(ENOTDIR) {
            err(refused(
                "it is a link or not a folder; capture writes only into a real folder",
            ))
        } else {
            err(e)
        }
    })?;
    if !created {
        let meta = folder.metadata().map_err(&err)?;
        if !owned_by_caller(&meta) {
            return Err(err(refused(
                "the folder belongs to another user; capture writes into a new folder or an empty one of your own",
            )));
        }
        if fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
            return Err(Error::OutputNotEmpty {
                path: dir.display().to_string(),
            });
        }
        make_private(&folder).map_err(&err)?;
    }
    Ok(folder)
}

/// Into the tar file `path` (new, never through a link, 0600), under the
/// folder `top`.
pub fn write_tar(path: &Path, top: &str, members: &[Member], mtime: u64) -> Result<(), Error> {
    let file = create_new_private(path).map_err(output_error(path))?;
    let mut builder = tar::Builder::new(file);
    for m in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(m.bytes.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, format!("{top}/{}", m.name), m.bytes.as_slice())
            .map_err(output_error(path))?;
    }
    let mut file = builder.into_inner().map_err(output_error(path))?;
    file.flush().map_err(output_error(path))
}

/// Owner-only, new, never through a link: the redaction mapping holds the
/// very values it hides. An existing file is refused, not overwritten.
pub fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    let mut file = create_new_private(path).map_err(output_error(path))?;
    file.write_all(text.as_bytes()).map_err(output_error(path))
}

/// A member's name is one plain file name: no folder, no `..`.
fn plain_name(name: &str) -> io::Result<&str> {
    let bad = name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']);
    if bad {
        return Err(refused("not a plain file name"));
    }
    Ok(name)
}

#[cfg(unix)]
mod sys {
    use std::ffi::CString;
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    pub const ELOOP: i32 = libc::ELOOP;
    pub const ENOTDIR: i32 = libc::ENOTDIR;

    pub fn private_dir_builder() -> fs::DirBuilder {
        let mut b = fs::DirBuilder::new();
        b.mode(0o700);
        b
    }

    pub fn open_dir_nofollow(dir: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(dir)
    }

    pub fn owned_by_caller(meta: &fs::Metadata) -> bool {
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        meta.uid() == unsafe { libc::geteuid() }
    }

    pub fn make_private(dir: &File) -> io::Result<()> {
        dir.set_permissions(fs::Permissions::from_mode(0o700))
    }

    pub fn create_new_private(path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    }

    /// `name` created inside the folder `dir` is open on, relative to its
    /// descriptor: a folder renamed since it was checked cannot redirect it.
    pub fn create_in(dir: &File, name: &str) -> io::Result<File> {
        let name = CString::new(super::plain_name(name)?.as_bytes())
            .map_err(|_| super::refused("a NUL in a file name"))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `name` is a NUL-terminated string that outlives the call and
        // `dir` an open descriptor; openat(2) returns a new descriptor we own,
        // or -1.
        let fd =
            unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by openat and nothing else owns it.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
}

#[cfg(not(unix))]
mod sys {
    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::path::Path;

    pub const ELOOP: i32 = -1;
    pub const ENOTDIR: i32 = -1;

    pub fn private_dir_builder() -> fs::DirBuilder {
        fs::DirBuilder::new()
    }
    pub fn open_dir_nofollow(dir: &Path) -> io::Result<File> {
        File::open(dir)
    }
    pub fn owned_by_caller(_: &fs::Metadata) -> bool {
        true
    }
    pub fn make_private(_: &File) -> io::Result<()> {
        Ok(())
    }
    pub fn create_new_private(path: &Path) -> io::Result<File> {
        OpenOptions::new().write(true).create_new(true).open(path)
    }
    pub fn create_in(_: &File, _: &str) -> io::Result<File> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "capture needs a Unix host",
        ))
    }
}

use sys::{
    ELOOP, ENOTDIR, create_in, create_new_private, make_private, open_dir_nofollow,
    owned_by_caller, private_dir_builder,
};

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("rootcause-writer-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn member(name: &str) -> Member {
        Member {
            name: name.to_owned(),
            bytes: b"x\n".to_vec(),
        }
    }

    #[test]
    fn a_new_folder_is_private_and_members_are_owner_only() {
        let root = scratch("new");
        let dir = root.join("bundle");
        write_dir(&dir, &[member("a.txt")]).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("a.txt")), 0o600);
        // Once written, the folder holds files: never written into again.
        assert!(matches!(
            write_dir(&dir, &[member("b.txt")]),
            Err(Error::OutputNotEmpty { .. })
        ));
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn links_are_never_followed() {
        let root = scratch("links");
        let victim = root.join("victim");
        fs::write(&victim, "KEEP").unwrap();
        // The output folder itself is a link.
        let target = root.join("elsewhere");
        fs::create_dir(&target).unwrap();
        symlink(&target, root.join("link")).unwrap();
        let e = write_dir(&root.join("link"), &[member("a.txt")]).unwrap_err();
        assert!(e.to_string().contains("link"), "{e}");
        assert!(fs::read_dir(&target).unwrap().next().is_none());
        // The mapping and the tar file are refused through a planted link.
        let map = root.join("out.redactions.json");
        symlink(&victim, &map).unwrap();
        assert!(write_private(&map, "secret").is_err());
        let tar = root.join("out.tar");
        symlink(&victim, &tar).unwrap();
        assert!(write_tar(&tar, "out", &[member("a.txt")], 0).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "KEEP");
        // A member name cannot leave the folder.
        assert!(write_dir(&root.join("b"), &[member("../victim")]).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "KEEP");
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_member_planted_as_a_link_is_not_written_through() {
        let root = scratch("plant");
        let victim = root.join("victim");
        fs::write(&victim, "KEEP").unwrap();
        let dir = root.join("bundle");
        let folder = open_private_dir(&dir).unwrap();
        symlink(&victim, dir.join("manifest.json")).unwrap();
        assert!(create_in(&folder, "manifest.json").is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "KEEP");
        fs::remove_dir_all(&root).ok();
    }
}
